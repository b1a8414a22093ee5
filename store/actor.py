"""The store actor: batches the engine's rows into Postgres and rides out database
outages (docs/design-notes.md, "Writes"; docs/operations.md, "A database outage" and
"Shutdown").

Producers (the engine's actors) hand items to a :class:`StoreWriter`; what an item is,
and who writes it, is :mod:`store.family`'s: each family's module builds its items and
writes its part of a batch. The actor owns the receiving end and a
:class:`~store.buffer.StoreBuffer`, and runs two tasks over them:

* The **pump** moves items from the bounded inbox (``inbox_size``) into the buffer.
  While the database answers, it stops taking once the buffer holds two batches, so a
  slow database slows producers down (the inbox fills and :meth:`StoreWriter.write`
  waits: back-pressure). While the database is *unavailable* it keeps taking, so
  producers never block on an outage; the buffer's bound (``buffer_limit``, ``uptrio
  serve --store-buffer``, default 100,000 items) then drops the OLDEST items (keeping
  their status moves), counted in :attr:`WriterStatistics.dropped`
  (``uptrio_store_rows_dropped_total``) and logged.
* The **writer** takes a batch from the front of the buffer once it holds ``batch_size``
  items or its oldest item is ``batch_age_seconds`` old, whichever comes first, and
  writes it in one transaction: fenced first on a node with leases
  (:mod:`store.fencing`), then each family's part (its items and status moves), in the
  families' order (:func:`store.family.split`). A batch of one family without moves,
  not fenced, is that family's one statement alone, atomic without BEGIN and COMMIT.
  Then it answers the flushes that waited for it (group commit). A write that fails
  because the database is unavailable, or gets no answer within
  ``write_timeout_seconds`` (5 s: a server that hangs instead of refusing; the write's
  connection is terminated), puts the batch back and is retried with exponential
  back-off (``retry_min_seconds`` doubling to ``retry_max_seconds``; 0.1 s to 2 s by
  default, so the buffer is written at most about 2 s after the database is back); the
  items' ids make a retry idempotent, so a commit whose acknowledgement was lost
  inserts nothing twice. Any other database error is a bug or a poison batch: after
  :data:`POISON_RETRIES` attempts the batch is logged as an error, counted in
  ``dropped`` and dropped, so one bad batch cannot stop every write.

Restarts: :class:`StoreActor` holds the inbox, the buffer and the statistics, and
:meth:`StoreActor.run` is one incarnation of the actor (a child of the service's root
supervisor, :mod:`web.service`; docs/operations.md, "The supervision tree"). A restart
cancels the incarnation after one last attempt at the buffer; whatever is still buffered
waits for the next incarnation: a restart loses nothing. :func:`run_store_writer` runs
one actor with one incarnation (tests, tools).

Shutdown: :meth:`StoreWriter.aclose` (or ``close``) closes the inbox; the incarnation
writes everything queued and returns (:meth:`StoreActor.wait_finished`). If it is
cancelled instead, it makes one last attempt at what is queued, under a shield bounded by
``drain_seconds``; what that attempt cannot write (the database is down) is logged with
its count and lost when the process exits.
"""

from __future__ import annotations

import contextlib
import math
from collections import deque
from collections.abc import Sequence

import structlog
import trio

from .buffer import StoreBuffer
from .database import Connection, Database
from .errors import DatabaseUnavailable, StoreError
from .family import Part, split
from .fencing import fence
from .writer import (
    Flush,
    StoreMessage,
    StoreSettings,
    StoreWriter,
    WriterObserver,
    WriterStatistics,
)

__all__ = [
    "POISON_RETRIES",
    "Flush",
    "StoreActor",
    "StoreMessage",
    "StoreSettings",
    "StoreWriter",
    "WriterObserver",
    "WriterStatistics",
    "run_store_writer",
]

log = structlog.get_logger("uptrio.store")

POISON_RETRIES = 3
"""Attempts at a batch that fails for a reason other than an unavailable database."""

_OUTAGE_LOG_SECONDS = 10.0
"""While the database stays unavailable, one "still unavailable" line per this period."""


class StoreActor:
    """The store actor's lasting state: inbox, buffer, flush waiters and statistics,
    shared by its incarnations (see the module docstring). ``settings`` says how it
    batches and buffers (a batch is at most the buffer's bound); ``drain_seconds`` bounds
    the last attempt at the buffer when an incarnation is cancelled, seconds.

    Attributes:
        writer: the producers' handle (stable across incarnations).
        statistics: the counters (stable across incarnations).
    """

    def __init__(
        self,
        db: Database,
        settings: StoreSettings = StoreSettings(),
        *,
        drain_seconds: float = 10.0,
        observer: WriterObserver | None = None,
        fence_node: str | None = None,
    ) -> None:
        """``fence_node``: this node's name when it holds bucket leases; every batch is
        then fenced (``store.fencing``) in its transaction. None: nothing is fenced."""
        timeout = settings.write_timeout_seconds
        if timeout is not None and (db.deadline_seconds is None or timeout < db.deadline_seconds):
            db = db.with_deadline(timeout)
        self._db = db
        self._batch_size = min(settings.batch_size, settings.buffer_limit)
        self._batch_age_seconds = settings.batch_age_seconds
        self._drain_seconds = drain_seconds
        self._retry_min_seconds = settings.retry_min_seconds
        self._retry_max_seconds = settings.retry_max_seconds
        self._partition_seconds = settings.partition_seconds
        # Per family with partitions: [from, to) epoch seconds known to have them.
        self._partitioned: dict[str, tuple[int, int]] = {}
        self._observer = observer
        self._fence_node = fence_node
        send, self._inbox = trio.open_memory_channel[StoreMessage](settings.inbox_size)
        self.statistics = WriterStatistics(buffer_limit=settings.buffer_limit)
        self.writer = StoreWriter(send, self.statistics)
        self._buffer = StoreBuffer(settings.buffer_limit)
        self._waiters: deque[tuple[int, trio.MemorySendChannel[None]]] = deque()
        # Who waits for what: the writer for a first item, a full batch or the close
        # (_grew); the pump for a batch left or the database gone away (_room).
        self._grew = trio.lowlevel.ParkingLot()
        self._room = trio.lowlevel.ParkingLot()
        self._in_flight = 0  # items of the batch being written
        self._inbox_closed = False
        self._finished = trio.Event()
        self._delay_seconds = settings.retry_min_seconds
        self._poison_attempts = 0
        self._outage_since: float | None = None
        self._outage_logged_at = -math.inf
        self._dropped_unlogged = 0
        self._fenced_unlogged = 0
        self._fenced_logged_at = -math.inf

    async def run(
        self, *, task_status: trio.TaskStatus[StoreWriter] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """One incarnation: pump and write until the writer is closed and everything is
        written, then return. Reports :attr:`writer` through ``task_status.started``.

        Raises only for bugs; ``trio.Cancelled`` propagates after one last attempt at the
        buffer (bounded by ``drain_seconds``).
        """
        task_status.started(self.writer)
        finished = False
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._pump)
                await self._write_until_closed()
                nursery.cancel_scope.cancel()
            finished = True
        finally:
            if not finished:
                with trio.CancelScope(shield=True), trio.move_on_after(self._drain_seconds):
                    await self._last_attempt()

    async def wait_finished(self) -> None:
        """Wait until the writer was closed and every item was written or dropped."""
        await self._finished.wait()

    # ---- the pump ----------------------------------------------------------------

    async def _pump(self) -> None:
        # After one wait, whatever else the inbox holds is taken without one (a channel's
        # ``receive`` yields to the scheduler even when a message is there): one wake-up
        # for all the results of one scheduler round, not one per result.
        inbox, high_water, stats = self._inbox, 2 * self._batch_size, self.statistics
        while True:
            while stats.database_available and len(self._buffer) >= high_water:
                await self._room.park()
            try:
                self._accept(await inbox.receive())
                while not (stats.database_available and len(self._buffer) >= high_water):
                    self._accept(inbox.receive_nowait())
            except trio.WouldBlock:
                continue
            except trio.EndOfChannel:
                self._inbox_closed = True
                self._grew.unpark_all()
                return

    def _accept(self, message: StoreMessage) -> None:
        buffer, stats = self._buffer, self.statistics
        if isinstance(message, Flush):
            self._waiters.append((buffer.entered, message.reply))
            self._answer_flushes()
            return
        buffer.append(message)
        size = len(buffer)
        if size == 1 or size == self._batch_size:
            self._grew.unpark_all()
        if not stats.database_available and not self._in_flight and size > buffer.limit:
            self._trim()
        stats.buffered = len(buffer) + self._in_flight
        stats.max_buffered = max(stats.max_buffered, stats.buffered)

    # ---- the writer --------------------------------------------------------------

    async def _write_until_closed(self) -> None:
        buffer = self._buffer
        while True:
            oldest = buffer.oldest_queued_at()
            if oldest is None and not buffer.orphan_count:
                if self._inbox_closed:
                    self._answer_flushes(everything=True)
                    self._finished.set()
                    return
                await self._grew.park()
                continue
            if oldest is not None and len(buffer) < self._batch_size and not self._inbox_closed:
                deadline = oldest + self._batch_age_seconds
                if trio.current_time() < deadline:
                    with trio.move_on_at(deadline):
                        await self._grew.park()
                    continue
            if not await self._write_batch():
                await trio.sleep(self._delay_seconds)
                self._delay_seconds = min(self._retry_max_seconds, self._delay_seconds * 2)

    async def _write_batch(self) -> bool:
        """Write one batch from the front; False when it must be retried after a pause."""
        buffer, stats = self._buffer, self.statistics
        batch = buffer.take(self._batch_size)
        self._in_flight = len(batch.items) or 1
        started = trio.current_time()
        moves = batch.moves
        parts = split(batch.items, moves)
        # A batch of one family without status moves is that family's one statement,
        # atomic by itself: no BEGIN and COMMIT, two round trips fewer (the common case;
        # moves come with what they cause, and the fence needs a transaction).
        single = not moves and len(parts) == 1 and self._fence_node is None
        write = self._db.run if single else self._db.transaction
        try:
            await self._ensure_partitions(parts)
            inserted, refused = await write(_write_parts, parts, self._fence_node)
        except DatabaseUnavailable as exc:
            buffer.put_back(batch)
            stats.retries += 1
            self._database_unavailable(exc)
            return False
        except StoreError as exc:
            self._partitioned.clear()  # a missing partition, perhaps: ask again
            self._poison_attempts += 1
            if self._poison_attempts < POISON_RETRIES:
                buffer.put_back(batch)
                stats.retries += 1
                log.warning("batch failed; retrying", error=str(exc), batch=len(batch.items))
                return False
            buffer.discard(batch)
            stats.dropped += len(batch.items)
            self._poison_attempts = 0
            log.error("batch dropped", error=str(exc), batch=len(batch.items))
            self._answer_flushes()
            self._room.unpark_all()
            return True
        except BaseException:
            buffer.put_back(batch)  # cancelled or a bug: the next attempt has it
            raise
        finally:
            self._in_flight = 0
            stats.buffered = len(buffer)
        finished = trio.current_time()
        buffer.committed(batch)
        self._poison_attempts = 0
        self._delay_seconds = self._retry_min_seconds
        stats.batches += 1
        stats.rows_written += inserted
        if refused:
            self._fenced(refused)
        stats.last_batch_size = len(batch.items)
        stats.last_flush_seconds = finished - started
        if len(stats.batch_sizes) < 100_000:
            stats.batch_sizes.append(len(batch.items))
        if self._observer is not None:
            delays = [finished - item.queued_at for item in batch.items]
            self._observer.batch_written(len(batch.items), finished - started, delays)
        if not stats.database_available:
            self._database_back()
        self._answer_flushes()
        self._room.unpark_all()
        return True

    async def _ensure_partitions(self, parts: Sequence[Part]) -> None:
        """Make the partitions a batch needs (``store.family.Partitions``) unless they
        are known to exist (the maintenance actor makes them ahead of time; this is the
        safety net). One comparison per family per batch in the common case."""
        for part in parts:
            partitions = part.family.partitions
            if partitions is None or not part.items:
                continue
            times = [partitions.row_time(item) for item in part.items]
            lo, hi = min(times), max(times)
            known_from, known_to = self._partitioned.get(part.family.name, (0, 0))
            if known_from <= lo and hi < known_to:
                continue
            width = self._partition_seconds
            await self._db.run(partitions.ensure, lo, hi, width)
            self._partitioned[part.family.name] = (lo - lo % width, hi - hi % width + width)

    def _database_unavailable(self, exc: StoreError) -> None:
        stats, now = self.statistics, trio.current_time()
        if stats.database_available:
            stats.database_available = False
            stats.outages += 1
            self._outage_since = now
            self._outage_logged_at = now
            self._room.unpark_all()  # the pump takes everything from now on
            log.warning(
                "database unavailable; buffering results",
                error=str(exc),
                buffered=len(self._buffer),
                buffer_limit=self._buffer.limit,
            )
        self._trim()
        self._flush_drop_log()  # at most one line per attempt (the back-off spaces them)
        if now - self._outage_logged_at >= _OUTAGE_LOG_SECONDS:
            self._outage_logged_at = now
            log.warning(
                "database still unavailable",
                error=str(exc),
                outage_seconds=round(now - (self._outage_since or now), 3),
                buffered=len(self._buffer),
                dropped=stats.dropped_overflow,
            )

    def _database_back(self) -> None:
        stats, now = self.statistics, trio.current_time()
        stats.database_available = True
        self._flush_drop_log()
        log.info(
            "database available again; writing buffered results",
            outage_seconds=round(now - (self._outage_since or now), 3),
            buffered=len(self._buffer),
            dropped=stats.dropped,
        )
        self._outage_since = None

    def _fenced(self, refused: int) -> None:
        """Count rows the fence refused (``store.fencing``: another node holds their
        bucket now) as dropped, and log them: at once for the first, then at most one
        line per :data:`_OUTAGE_LOG_SECONDS` with the count since the last line."""
        stats, now = self.statistics, trio.current_time()
        stats.fenced_refused += refused
        stats.dropped += refused
        self._fenced_unlogged += refused
        if now - self._fenced_logged_at >= _OUTAGE_LOG_SECONDS:
            self._fenced_logged_at = now
            log.warning(
                "writes refused by the fence; dropped (another node holds their buckets)",
                dropped=self._fenced_unlogged,
                dropped_total=stats.fenced_refused,
            )
            self._fenced_unlogged = 0

    def _trim(self) -> None:
        dropped = self._buffer.trim()
        if dropped:
            stats = self.statistics
            stats.dropped += dropped
            stats.dropped_overflow += dropped
            stats.buffered = len(self._buffer)
            self._dropped_unlogged += dropped
            self._answer_flushes()

    def _flush_drop_log(self) -> None:
        if self._dropped_unlogged:
            log.warning(
                "store buffer full; dropped the oldest results",
                dropped=self._dropped_unlogged,
                dropped_total=self.statistics.dropped_overflow,
                buffer_limit=self._buffer.limit,
            )
            self._dropped_unlogged = 0

    def _answer_flushes(self, *, everything: bool = False) -> None:
        waiters, left = self._waiters, self._buffer.left
        while waiters and (everything or waiters[0][0] <= left):
            _, reply = waiters.popleft()
            with reply, contextlib.suppress(trio.BrokenResourceError, trio.WouldBlock):
                reply.send_nowait(None)

    async def _last_attempt(self) -> None:
        """Under a shield: take what the inbox holds, write the buffer batch by batch,
        and stop at the first failure (what remains waits for a next incarnation)."""
        while True:
            try:
                self._accept(self._inbox.receive_nowait())
            except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
                break
        if self._buffer.limit < len(self._buffer):
            self._trim()
        while len(self._buffer) or self._buffer.orphan_count:
            try:
                if not await self._write_batch():
                    break
            except StoreError:
                break
        if len(self._buffer):
            log.warning("results not written yet", buffered=len(self._buffer))


async def _write_parts(
    connection: Connection, parts: Sequence[Part], fence_node: str | None
) -> tuple[int, int]:
    """One batch (asyncio side): each family's part, fenced first when ``fence_node`` is
    given (``store.fencing``); ``(rows inserted, items and moves refused by the
    fence)``."""
    refused = 0
    if fence_node is not None:
        parts, refused = await fence(connection, fence_node, parts)
    inserted = 0
    for part in parts:
        if part.items or part.moves:
            inserted += await part.family.write(connection, part.items, part.moves)
    return inserted, refused


async def run_store_writer(
    db: Database,
    settings: StoreSettings = StoreSettings(),
    *,
    drain_seconds: float = 10.0,
    observer: WriterObserver | None = None,
    task_status: trio.TaskStatus[StoreWriter] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run a :class:`StoreActor` (one incarnation) until its writer is closed and every
    item is written; reports its :class:`StoreWriter` through ``task_status.started``.
    ``drain_seconds``: the last attempt's bound when cancelled, seconds.
    """
    actor = StoreActor(db, settings, drain_seconds=drain_seconds, observer=observer)
    await actor.run(task_status=task_status)
