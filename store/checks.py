"""Check results and status changes: the engine's high-volume writes, and their reads.

Writes come from the store actor in batches (:func:`write_check_batch`): one statement
inserts every check of the batch through ``unnest`` arrays (one round trip), a second
applies the batch's status changes, both in the caller's transaction (DESIGN: "a status
change is written in the same transaction as the check that caused it"). Check ids are
made by the engine, so a batch retried after a lost commit acknowledgement inserts
nothing twice (``ON CONFLICT DO NOTHING``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .database import Connection
from .errors import CursorNotFound
from .records import CheckRecord

_CHECK_COLUMNS = (
    "id, monitor_id, status, response_time_ms, status_code, error_code, error_message, created"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class StatusChange:
    """A monitor's status moving because of check ``check_id``.

    ``run_epoch`` is the epoch the engine ran the monitor under: the change is written only
    while the stored monitor still has that epoch and is not paused, so a result that
    arrives after a pause or a resume never overrides it. ``created`` is epoch seconds.
    """

    monitor_id: str
    check_id: str
    from_status: str
    to_status: str
    run_epoch: int
    created: int


async def write_check_batch(
    connection: Connection, checks: Sequence[CheckRecord], changes: Sequence[StatusChange]
) -> int:
    """Insert ``checks`` and apply ``changes`` (asyncio side; call inside a transaction
    when there are ``changes``; without them it is one statement, atomic by itself).

    Checks of monitors deleted meanwhile are dropped; when several changes of one monitor
    are in the batch, the monitor ends with the last. Returns the number of check rows
    inserted.
    """
    inserted = 0
    if checks:
        result = await connection.execute(
            f"INSERT INTO checks ({_CHECK_COLUMNS}) "
            f"SELECT {_CHECK_COLUMNS} FROM unnest($1::text[], $2::text[], $3::text[], "
            "$4::float8[], $5::int[], $6::text[], $7::text[], $8::bigint[]) "
            f"WITH ORDINALITY AS u({_CHECK_COLUMNS}, ord) "
            "WHERE EXISTS (SELECT 1 FROM monitors m WHERE m.id = u.monitor_id) "
            "ORDER BY ord ON CONFLICT (id) DO NOTHING",
            [c.id for c in checks],
            [c.monitor_id for c in checks],
            [c.status for c in checks],
            [c.response_time_ms for c in checks],
            [c.status_code for c in checks],
            [c.error_code for c in checks],
            [c.error_message for c in checks],
            [c.created for c in checks],
        )
        inserted = int(result.rsplit(" ", 1)[-1])
    if changes:
        await connection.execute(
            "WITH ch AS (SELECT u.* FROM unnest($1::text[], $2::text[], $3::text[], "
            "$4::text[], $5::int[], $6::bigint[]) WITH ORDINALITY "
            "AS u(monitor_id, check_id, from_status, to_status, epoch, created, ord)), "
            "last AS (SELECT DISTINCT ON (monitor_id) * FROM ch ORDER BY monitor_id, ord DESC), "
            "moved AS (UPDATE monitors m SET status = last.to_status, updated = last.created "
            "FROM last WHERE m.id = last.monitor_id AND m.run_epoch = last.epoch "
            "AND m.status <> 'paused' RETURNING m.id) "
            "INSERT INTO status_changes (monitor_id, check_id, from_status, to_status, created) "
            "SELECT ch.monitor_id, ch.check_id, ch.from_status, ch.to_status, ch.created "
            "FROM ch JOIN monitors m ON m.id = ch.monitor_id AND m.run_epoch = ch.epoch "
            "ORDER BY ch.ord ON CONFLICT (check_id) DO NOTHING",
            [c.monitor_id for c in changes],
            [c.check_id for c in changes],
            [c.from_status for c in changes],
            [c.to_status for c in changes],
            [c.run_epoch for c in changes],
            [c.created for c in changes],
        )
    return inserted


async def list_checks(
    connection: Connection, monitor_id: str, *, limit: int, starting_after: str | None
) -> tuple[list[CheckRecord], bool]:
    """Checks of ``monitor_id``, newest first, ``limit`` (1-100) of them after the check
    ``starting_after`` (spec 4.1). Returns ``(checks, has_more)``.

    Raises:
        store.errors.CursorNotFound: ``starting_after`` is not a check of this monitor.
    """
    args: list[object] = [monitor_id]
    condition = ""
    if starting_after is not None:
        seq = await connection.fetchval(
            "SELECT seq FROM checks WHERE id = $1 AND monitor_id = $2", starting_after, monitor_id
        )
        if seq is None:
            raise CursorNotFound("starting_after", starting_after)
        args.append(seq)
        condition = " AND seq < $2"
    rows = await connection.fetch(
        f"SELECT {_CHECK_COLUMNS} FROM checks WHERE monitor_id = $1{condition} "
        f"ORDER BY seq DESC LIMIT {int(limit) + 1}",
        *args,
    )
    return [CheckRecord.from_row(r) for r in rows[:limit]], len(rows) > limit
