"""The store actor: batches check results into Postgres (DESIGN: Store; engine issue 5).

Producers (monitor actors) hand results to a :class:`CheckWriter`; one task,
:func:`run_check_writer`, owns the receiving end. It takes one result, then more until the
batch holds ``batch_size`` results or ``batch_age_seconds`` have passed since the first
(``trio.move_on_at``), whichever comes first, and writes the batch in one transaction
(:func:`store.checks.write_check_batch`: one ``unnest`` insert, status changes with the
checks that caused them). Then it answers the flush requests that rode in the batch
(group commit).

The inbox is bounded (``inbox_size`` results): when the database is slow, producers wait
in :meth:`CheckWriter.write` instead of memory growing. A write that fails because the
database is unavailable is retried with exponential back-off (0.1 s doubling to 5 s) and
never dropped; check ids make the retry idempotent. Any other database error is a bug or
a poison batch: it is retried :data:`POISON_RETRIES` times, then the batch is logged as
an error, counted in ``dropped`` and dropped, so one bad batch cannot stop every write.

Shutdown: :meth:`CheckWriter.aclose` closes the inbox; the actor writes everything still
queued and returns. If it is cancelled instead, it drains and writes what is queued under
a shield bounded by ``drain_seconds``.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import structlog
import trio

from .checks import StatusChange, write_check_batch
from .database import Database
from .errors import DatabaseUnavailable, StoreError
from .records import CheckRecord

log = structlog.get_logger("uptrio.store")

POISON_RETRIES = 3
"""Attempts at a batch that fails for a reason other than an unavailable database."""


@dataclass(frozen=True, slots=True, kw_only=True)
class WriteCheck:
    """One check result, with the status change it caused (or None)."""

    check: CheckRecord
    change: StatusChange | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Flush:
    """Answer on ``reply`` once everything queued before this message is committed."""

    reply: trio.MemorySendChannel[None]


StoreMessage = WriteCheck | Flush


@dataclass(slots=True)
class WriterStatistics:
    """Counters of the store actor since start (for metrics and the benchmark).

    Attributes:
        batches: batches committed.
        rows_written: check rows inserted.
        last_batch_size: results in the last batch.
        last_flush_seconds: duration of the last batch's transaction, seconds.
        retries: failed write attempts that were retried.
        dropped: check results dropped (poison batches).
    """

    batches: int = 0
    rows_written: int = 0
    last_batch_size: int = 0
    last_flush_seconds: float = 0.0
    retries: int = 0
    dropped: int = 0
    batch_sizes: list[int] = field(default_factory=list)


class CheckWriter:
    """The producers' handle on the store actor (one shared send channel, no clones)."""

    def __init__(self, send: trio.MemorySendChannel[StoreMessage], stats: WriterStatistics):
        self._send = send
        self.statistics = stats

    async def write(self, check: CheckRecord, change: StatusChange | None = None) -> None:
        """Queue one result; waits while the inbox is full (back-pressure).

        Raises:
            trio.ClosedResourceError: the writer was closed.
        """
        message = WriteCheck(check=check, change=change)
        try:
            self._send.send_nowait(message)
        except trio.WouldBlock:
            await self._send.send(message)

    async def flush(self, timeout_seconds: float = 30.0) -> None:
        """Wait until every result queued before this call is committed.

        Raises:
            TimeoutError: not committed within ``timeout_seconds``.
            trio.ClosedResourceError: the writer was closed.
        """
        reply_send, reply_receive = trio.open_memory_channel[None](1)
        with trio.fail_after(timeout_seconds):
            await self._send.send(Flush(reply=reply_send))
            try:
                await reply_receive.receive()
            except trio.EndOfChannel:
                raise StoreError("the store actor stopped before the flush") from None

    def queued(self) -> int:
        """Messages waiting in the inbox."""
        return self._send.statistics().current_buffer_used

    async def aclose(self) -> None:
        """Close the inbox: the actor writes what is queued and returns."""
        await self._send.aclose()


async def run_check_writer(
    db: Database,
    *,
    batch_size: int = 500,
    batch_age_seconds: float = 0.2,
    inbox_size: int = 10_000,
    drain_seconds: float = 10.0,
    task_status: trio.TaskStatus[CheckWriter] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run the store actor until its writer is closed (see the module docstring).

    Reports a :class:`CheckWriter` through ``task_status.started``. ``batch_size`` in
    results, ``batch_age_seconds`` and ``drain_seconds`` in seconds.
    """
    send, receive = trio.open_memory_channel[StoreMessage](inbox_size)
    stats = WriterStatistics()
    task_status.started(CheckWriter(send, stats))
    try:
        async with receive:
            while True:
                try:
                    first = await receive.receive()
                except trio.EndOfChannel:
                    return
                batch = [first]
                with trio.move_on_at(trio.current_time() + batch_age_seconds):
                    while len(batch) < batch_size:
                        try:
                            batch.append(await receive.receive())
                        except trio.EndOfChannel:
                            break
                await _commit(db, batch, stats)
    except trio.Cancelled:
        with trio.CancelScope(shield=True), trio.move_on_after(drain_seconds):
            leftover: list[StoreMessage] = []
            while True:
                try:
                    leftover.append(receive.receive_nowait())
                except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
                    break
            if leftover:
                await _commit(db, leftover, stats)
        raise


async def _commit(db: Database, batch: list[StoreMessage], stats: WriterStatistics) -> None:
    checks = [m.check for m in batch if isinstance(m, WriteCheck)]
    changes = [m.change for m in batch if isinstance(m, WriteCheck) and m.change is not None]
    delay = 0.1
    attempts = 0
    while checks or changes:
        started = trio.current_time()
        attempts += 1
        try:
            inserted = await db.transaction(write_check_batch, checks, changes)
        except StoreError as exc:
            if not isinstance(exc, DatabaseUnavailable) and attempts >= POISON_RETRIES:
                stats.dropped += len(checks)
                log.error("check batch dropped", error=str(exc), batch=len(checks))
                break
            stats.retries += 1
            log.warning(
                "check batch failed; retrying",
                error=str(exc),
                retry_in_seconds=delay,
                batch=len(checks),
            )
            await trio.sleep(delay)
            delay = min(5.0, delay * 2)
            continue
        stats.batches += 1
        stats.rows_written += inserted
        stats.last_batch_size = len(checks)
        stats.last_flush_seconds = trio.current_time() - started
        if len(stats.batch_sizes) < 100_000:
            stats.batch_sizes.append(len(checks))
        break
    for message in batch:
        if isinstance(message, Flush):
            with contextlib.suppress(trio.BrokenResourceError, trio.WouldBlock):
                message.reply.send_nowait(None)
            message.reply.close()
