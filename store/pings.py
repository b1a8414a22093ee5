"""Pings and the heartbeats' status moves: the engine's writes for heartbeats, and the
read of ``GET /heartbeats/:id/pings`` (docs/heartbeats.md; docs/heartbeats.md, "No
database round trip on a ping, and no ping lost").

Pings are the ``pings`` family of the store actor's batches (:mod:`store.family`;
:data:`PINGS`): a producer hands over a :class:`WritePing` (a ping and the
:class:`HeartbeatChange` it caused, or a move alone), and the family writes its part of
a batch with :func:`write_ping_batch`, beside the checks and in the same way
(``store.checks``):

* one statement inserts every ping of the batch through ``unnest`` arrays (pings of
  heartbeats deleted meanwhile are dropped; ping ids are made by the engine, so a batch
  retried after a lost commit acknowledgement inserts nothing twice) and, from the rows
  it inserted, moves each heartbeat's ``last_ping_at`` (any kind) and
  ``last_success_at`` (success pings) forward;
* when the batch holds status moves (fenced first by the store actor of a node with
  leases, as monitors' are: ``store.fencing``; the pings themselves are facts received
  from outside and stored whichever node received them), a second statement applies those of the
  heartbeat's current run (``run_epoch``, not paused), logs them in ``heartbeat_moves``
  under their own ``hbm_`` id (migration 0017; a move already logged is skipped: a retry
  causes nothing twice), and the moves it applied open and resolve incidents and write
  ``heartbeat.down`` / ``heartbeat.up`` (:mod:`store.alerting`), in the same transaction.

Pings are kept ``ping_retention_days`` (``store.maintenance`` deletes older ones in
bulk).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar

import trio

from .alerting import HEARTBEAT_MOVES, apply_moves, release_held
from .database import Connection
from .family import Family, register
from .pagination import CreatedBounds, seq_page_newest_first
from .records import PingRecord, column_names

__all__ = [
    "FAIL_DESCRIPTION",
    "PINGS",
    "HeartbeatChange",
    "WritePing",
    "list_pings",
    "write_ping_batch",
]

_COLUMNS = ", ".join(column_names(PingRecord))

FAIL_DESCRIPTION = "The job reported a failure (a ping to /fail)."
"""Why a ``/fail`` ping takes a heartbeat down: the description of the incident it opens
(the engine's move, or the release of one a maintenance window held back)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class HeartbeatChange:
    """A heartbeat's status moving (the engine's heartbeat actor decided it).

    ``move_id`` (``hbm_``) names the move in ``heartbeat_moves``; ``detail`` is the
    description of the incident a move into ``down`` opens (why: a deadline passed, or a
    ``/fail`` ping). It is written only while the stored heartbeat still has
    ``run_epoch`` and is not paused. ``created`` is epoch seconds.
    """

    heartbeat_id: str
    move_id: str
    from_status: str
    to_status: str
    run_epoch: int
    created: int
    detail: str
    lease_epoch: int | None = None
    """The lease epoch its actor ran under (``store.fencing``), or None: not fenced."""
    lease_region: str | None = None
    """None: a heartbeat's lease is in the any-region pool (``store.fencing``)."""

    family: ClassVar[str] = "pings"
    """Written by the ``pings`` family (:data:`PINGS`)."""

    @property
    def resource_id(self) -> str:
        """The heartbeat's id (the fence's bucket)."""
        return self.heartbeat_id


@dataclass(frozen=True, slots=True, kw_only=True)
class WritePing:
    """One ping of a heartbeat handed to the store actor (``StoreWriter.write``) with
    the status move it caused, or a move alone (``ping`` None: a deadline passed, or a
    ping another node stored): an item of the ``pings`` family. A ping handed over is in
    the store's durable path: its HTTP answer may go (docs/heartbeats.md). The ping
    itself is not fenced (``lease_epoch`` None: a fact received from outside); its move
    is, with its own lease epoch. ``queued_at`` as ``store.checks.WriteCheck``'s.

    Raises:
        ValueError: neither a ping nor a move.
    """

    ping: PingRecord | None
    change: HeartbeatChange | None = None
    queued_at: float = field(default_factory=trio.current_time)

    family: ClassVar[str] = "pings"
    """Written by the ``pings`` family (:data:`PINGS`)."""

    def __post_init__(self) -> None:
        if self.ping is None and self.change is None:
            raise ValueError("a ping item needs a ping or a move")

    @property
    def resource_id(self) -> str:
        """The heartbeat's id."""
        if self.ping is not None:
            return self.ping.heartbeat_id
        return self.change.heartbeat_id if self.change is not None else ""

    @property
    def lease_epoch(self) -> None:
        """None: a ping is stored by whichever node received it (its move is fenced)."""
        return None

    @property
    def lease_region(self) -> None:
        """None: a heartbeat's lease is in the any-region pool (``store.fencing``)."""
        return None


async def write_ping_batch(
    connection: Connection, pings: Sequence[PingRecord], changes: Sequence[HeartbeatChange]
) -> int:
    """Insert ``pings`` and apply ``changes`` (module docstring; asyncio side; call inside
    a transaction when there are ``changes`` or ``fail`` pings). A ``fail`` ping of a
    heartbeat still down whose episode a maintenance window held back, once the window
    is over, opens its incident and alert (:func:`store.alerting.release_held`;
    docs/maintenance.md, "Alerts held back"). Returns the number of pings inserted."""
    inserted = 0
    if pings:
        result = await connection.fetchval(
            "WITH ins AS ("
            f"INSERT INTO pings ({_COLUMNS}) SELECT {_COLUMNS} FROM unnest($1::text[], "
            "$2::text[], $3::text[], $4::bigint[], $5::float8[], $6::text[]) "
            f"WITH ORDINALITY AS u({_COLUMNS}, ord) "
            "WHERE EXISTS (SELECT 1 FROM heartbeats h WHERE h.id = u.heartbeat_id) "
            "ORDER BY ord ON CONFLICT DO NOTHING RETURNING heartbeat_id, kind, created), "
            "latest AS (SELECT heartbeat_id, max(created) AS pinged, "
            "max(created) FILTER (WHERE kind = 'success') AS succeeded FROM ins GROUP BY 1), "
            "moved AS (UPDATE heartbeats h SET "
            "last_ping_at = greatest(h.last_ping_at, latest.pinged), "
            "last_success_at = greatest(h.last_success_at, latest.succeeded) "
            "FROM latest WHERE h.id = latest.heartbeat_id) "
            "SELECT count(*) FROM ins",
            [p.id for p in pings],
            [p.heartbeat_id for p in pings],
            [p.kind for p in pings],
            [p.created for p in pings],
            [p.duration_ms for p in pings],
            [p.source_ip for p in pings],
        )
        inserted = int(result)
    if changes:
        moves = await connection.fetch(
            "WITH ch AS (SELECT u.* FROM unnest($1::text[], $2::text[], $3::text[], "
            "$4::text[], $5::int[], $6::bigint[], $7::text[]) WITH ORDINALITY "
            "AS u(heartbeat_id, move_id, from_status, to_status, epoch, created, detail, ord)), "
            # Moves of the heartbeat's current run, not logged yet (a retry logs nothing).
            "ok AS (SELECT ch.* FROM ch JOIN heartbeats h ON h.id = ch.heartbeat_id "
            "AND h.run_epoch = ch.epoch AND h.status <> 'paused' "
            "WHERE NOT EXISTS (SELECT 1 FROM heartbeat_moves s WHERE s.move_id = ch.move_id)), "
            "last AS (SELECT DISTINCT ON (heartbeat_id) * FROM ok "
            "ORDER BY heartbeat_id, ord DESC), "
            "moved AS (UPDATE heartbeats h SET status = last.to_status, updated = last.created "
            "FROM last WHERE h.id = last.heartbeat_id), "
            "logged AS (INSERT INTO heartbeat_moves (heartbeat_id, move_id, from_status, "
            "to_status, created) SELECT heartbeat_id, move_id, from_status, to_status, created "
            "FROM ok ORDER BY ord ON CONFLICT (move_id) DO NOTHING) "
            "SELECT heartbeat_id, detail, from_status, to_status, created FROM ok ORDER BY ord",
            [c.heartbeat_id for c in changes],
            [c.move_id for c in changes],
            [c.from_status for c in changes],
            [c.to_status for c in changes],
            [c.run_epoch for c in changes],
            [c.created for c in changes],
            [c.detail for c in changes],
        )
        await apply_moves(
            connection,
            HEARTBEAT_MOVES,
            [
                (m["heartbeat_id"], m["detail"], m["from_status"], m["to_status"], m["created"])
                for m in moves
            ],
        )
    await release_held(
        connection,
        HEARTBEAT_MOVES,
        [(p.heartbeat_id, FAIL_DESCRIPTION, p.created) for p in pings if p.kind == "fail"],
        [c.heartbeat_id for c in changes],
    )
    return inserted


async def _write_part(
    connection: Connection, items: Sequence[WritePing], changes: Sequence[HeartbeatChange]
) -> int:
    """The ``pings`` family's part of a batch (:func:`write_ping_batch`)."""
    pings = [item.ping for item in items if item.ping is not None]
    return await write_ping_batch(connection, pings, changes)


PINGS = register(Family(name="pings", write=_write_part))
"""The ``pings`` family of the store actor's batches (:mod:`store.family`)."""


async def list_pings(
    connection: Connection,
    heartbeat_id: str,
    *,
    limit: int,
    starting_after: str | None = None,
    ending_before: str | None = None,
    kind: str | None = None,
    bounds: CreatedBounds = CreatedBounds(),
) -> tuple[list[PingRecord], bool]:
    """Pings of ``heartbeat_id``, newest first (by ``created``, then arrival), ``limit``
    (1-100) of them after ``starting_after`` or before ``ending_before`` (docs/api.md,
    Conventions; at most one of the two), of ``kind`` only when given, within ``bounds`` on
    ``created`` (epoch seconds). Returns ``(pings, has_more)``, ``has_more`` in the
    direction of travel as in :mod:`store.pagination`.

    Raises:
        CursorNotFound: a cursor is not a ping of this heartbeat.
    """
    rows, has_more = await seq_page_newest_first(
        connection,
        table="pings",
        select=_COLUMNS,
        scope=["heartbeat_id = $1"],
        scope_args=[heartbeat_id],
        filters=[] if kind is None else [("kind = {}", kind)],
        bounds=bounds,
        limit=limit,
        starting_after=starting_after,
        ending_before=ending_before,
    )
    return [PingRecord.from_row(r) for r in rows], has_more
