"""Shift reminders (docs/on-call.md, "Shift reminders"; asyncio side: run these through
:class:`store.Database`): a member is told on each of their enabled contact channels
:data:`LEAD_SECONDS` (10 minutes) before each of their shifts starts, once, however many
nodes walk and whatever restarts come in between.

Reminders are rows with due times (migration 0023), never sleeping tasks. One walk
(:func:`walk_due`, run by every node's reminder walker, ``engine.walker``) does two
things in its transaction:

* **plan**: the schedules whose ``reminders_planned_until`` is NULL (never planned, or
  changed since: every change of who is on call sets it back) or closer than
  :data:`REPLAN_SECONDS` to being needed are claimed ``FOR UPDATE SKIP LOCKED``; their
  shifts are computed (:func:`store.rotation.shifts`) up to :data:`PLAN_AHEAD_SECONDS`
  past the reminders' horizon, and each *shift start* becomes a ``shift_reminders`` row
  (``ON CONFLICT DO NOTHING``: the start of one member in one schedule is one row). A
  shift start is an instant at which a member goes on call who was not on call just
  before (two shifts of one member that touch are one: no reminder between them);
* **send**: the rows due (``due_at`` = start - 10 minutes) are claimed ``FOR UPDATE SKIP
  LOCKED`` and checked again against the schedule as it is now: a member who no longer
  starts a shift then is ``void``; a start already past (no node walked in time) is
  ``missed``; else the shift's end is found (its member's touching shifts, at most
  :data:`END_SEARCH_SECONDS` ahead) and a ``shift_starting`` notification is written for
  each of the member's enabled contact channels, in order, into the outbox that the
  notifier sends (``store.notifications``), and the row becomes ``sent``: the
  notifications and the status commit together, so a reminder is written once.

A notification of a reminder is tried until its shift starts (``give_up_at``), never
after: a reminder that arrives after the start says nothing useful.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from . import rotation, schedules
from .alert_walk import TARGET_CHANNELS
from .database import Connection

__all__ = [
    "END_SEARCH_SECONDS",
    "LEAD_SECONDS",
    "PLAN_AHEAD_SECONDS",
    "REPLAN_SECONDS",
    "shift_starts",
    "walk_due",
]

LEAD_SECONDS = 600
"""How long before a shift starts its member is told, seconds (docs/on-call.md)."""

PLAN_AHEAD_SECONDS = 1800
"""How far past ``now + LEAD_SECONDS`` one planning of a schedule reaches, seconds."""

REPLAN_SECONDS = 600
"""A schedule is planned again once its plan reaches less than this past ``now +
LEAD_SECONDS``, seconds: a start is always planned well before it is due."""

END_SEARCH_SECONDS = 7 * 86_400
"""How far ahead a shift's end is looked for, seconds: a longer shift is told as ending
then (its real end is in the shifts listing)."""

_PLAN = """
SELECT id, account_id, reminders_planned_until FROM schedules
WHERE reminders_planned_until IS NULL OR reminders_planned_until < $1
ORDER BY reminders_planned_until NULLS FIRST, seq LIMIT $2
FOR UPDATE SKIP LOCKED
"""

_INSERT = """
INSERT INTO shift_reminders (schedule_id, account_id, member_id, starts_at, due_at)
SELECT $1, $2, u.member, u.starts_at, u.starts_at - $4::bigint
FROM unnest($3::text[], $5::bigint[]) AS u(member, starts_at)
ON CONFLICT (schedule_id, member_id, starts_at) DO NOTHING
"""

_DUE = """
SELECT seq, schedule_id, account_id, member_id, starts_at FROM shift_reminders
WHERE status = 'planned' AND due_at <= $1
ORDER BY due_at, seq LIMIT $2
FOR UPDATE SKIP LOCKED
"""

_NOTIFY = """
INSERT INTO notifications (id, account_id, alert_id, channel_id, member_id, kind, step,
                           status, ack_token, next_attempt_at, give_up_at, created,
                           reminder_seq)
SELECT new_id('ntf'), u.account_id, NULL, u.channel_id, u.member_id, 'shift_starting',
       NULL, 'pending', NULL, $5::float8, u.starts_at, $5::bigint, u.seq
FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $6::bigint[])
    WITH ORDINALITY AS u(account_id, channel_id, member_id, starts_at, seq, ord)
ORDER BY u.ord
"""

_SETTLE = """
UPDATE shift_reminders r SET status = u.status, ends_at = u.ends_at, handled_at = $4
FROM unnest($1::bigint[], $2::text[], $3::bigint[]) AS u(seq, status, ends_at)
WHERE r.seq = u.seq
"""


def shift_starts(listed: Sequence[rotation.Shift], lo: int) -> list[tuple[str, int]]:
    """The shift starts at or after ``lo`` (epoch seconds) in ``listed`` (the shifts of a
    range that begins before ``lo``, so a shift running into ``lo`` shows as starting
    before it): ``(member, start)`` for each shift whose member has no shift ending at
    its start (two touching shifts of one member are one). Pure."""
    ends = {(s.member, s.end) for s in listed}
    return sorted(
        {(s.member, s.start) for s in listed if s.start >= lo and (s.member, s.start) not in ends}
    )


def _shift_end(listed: Sequence[rotation.Shift], member: str, start: int) -> int | None:
    """The end of ``member``'s shift that starts at ``start`` in ``listed`` (its touching
    shifts joined), or None when ``member`` does not start a shift then."""
    if (member, start) not in shift_starts(listed, start):
        return None
    end = start
    for s in sorted((s for s in listed if s.member == member), key=lambda s: s.start):
        if s.start == end:  # the shift at ``start``, then each one touching it
            end = s.end
    return end


async def _plan(connection: Connection, now: int, limit: int) -> int:
    """Plan the schedules due for it (module docstring); how many were planned."""
    horizon = now + LEAD_SECONDS
    claimed = await connection.fetch(_PLAN, horizon + REPLAN_SECONDS, limit)
    until = horizon + PLAN_AHEAD_SECONDS
    for row in claimed:
        lo = max(row["reminders_planned_until"] or now, now)
        loaded = await schedules.load_plan(connection, row["id"], lo - 1, until)
        if loaded is not None:
            starts = shift_starts(rotation.shifts(*loaded, lo - 1, until), lo)
            await connection.execute(
                _INSERT,
                row["id"],
                row["account_id"],
                [member for member, _ in starts],
                LEAD_SECONDS,
                [start for _, start in starts],
            )
    if claimed:
        await connection.execute(
            "UPDATE schedules SET reminders_planned_until = $2 WHERE id = ANY($1::text[])",
            [r["id"] for r in claimed],
            until,
        )
    return len(claimed)


async def _send(connection: Connection, now: int, limit: int) -> int:
    """Send the reminders due (module docstring); how many were settled."""
    due = await connection.fetch(_DUE, now, limit)
    if not due:
        return 0
    listed: dict[tuple[str, int], list[rotation.Shift] | None] = {}
    settled: list[tuple[int, str, int | None]] = []
    told: list[Any] = []
    for row in due:
        start = int(row["starts_at"])
        if start <= now:
            settled.append((row["seq"], "missed", None))
            continue
        key = (row["schedule_id"], start)
        if key not in listed:
            loaded = await schedules.load_plan(
                connection, row["schedule_id"], start - 1, start + END_SEARCH_SECONDS
            )
            listed[key] = (
                None
                if loaded is None
                else rotation.shifts(*loaded, start - 1, start + END_SEARCH_SECONDS)
            )
        shifts = listed[key]
        end = None if shifts is None else _shift_end(shifts, row["member_id"], start)
        if end is None:
            settled.append((row["seq"], "void", None))
            continue
        settled.append((row["seq"], "sent", end))
        told.append(row)
    if told:
        channels = await connection.fetch(
            TARGET_CHANNELS,
            list(range(len(told))),
            ["member"] * len(told),
            [r["member_id"] for r in told],
            [r["account_id"] for r in told],
        )
        notes = [told[c["walk"]] for c in channels]
        await connection.execute(
            _NOTIFY,
            [r["account_id"] for r in notes],
            [c["channel_id"] for c in channels],
            [r["member_id"] for r in notes],
            [r["starts_at"] for r in notes],
            now,
            [r["seq"] for r in notes],
        )
    await connection.execute(
        _SETTLE,
        [s[0] for s in settled],
        [s[1] for s in settled],
        [s[2] for s in settled],
        now,
    )
    return len(due)


async def walk_due(connection: Connection, now: int, limit: int) -> int:
    """Plan up to ``limit`` schedules and send up to ``limit`` reminders due at ``now``
    (epoch seconds), as the module docstring says. Must run in a transaction of its own.
    Returns the larger of the two counts (below ``limit``: nothing more is due)."""
    planned = await _plan(connection, now, limit)
    sent = await _send(connection, now, limit)
    return max(planned, sent)
