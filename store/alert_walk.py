"""The escalation walk of alerts (docs/alerts.md, Escalation policies; asyncio side: run
these through :class:`store.Database`; :mod:`store.alerts` re-exports them).

An alert whose ``next_step_at`` has come is claimed ``FOR UPDATE SKIP LOCKED``
(:func:`walk_due`), its next step's targets are written as notifications (the outbox of
:mod:`store.notifications`), each with an acknowledge token (128 random bits in
``alert_ack_tokens``, bound to the alert and the member or channel), and the alert moves
on, all in one transaction: every step is notified once, by one node, and the walk
survives restarts and failover because it is rows with due times, never a sleeping task.

Targets of a step: a member is told on each of their enabled contact channels, in order;
a channel target on that channel if it is enabled; a schedule target, whoever is on call
in it at the moment the step runs (not when the alert was raised: docs/alerts.md,
Escalation policies), as member targets (:func:`store.rotation.members_at` over the
schedule's layers and overrides). A schedule with nobody on call then, or of another
account, or deleted, tells nobody (the walk still moves on).

Timing: a step's ``delay_seconds`` counts from the step before (the first step's from the
trigger); a repeated walk (``repeat``) starts with step 0 again, its own delay after the
last step, so a policy whose step 0 waits 0 s reminds right after its last step.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from . import rotation, schedules
from .database import Connection

__all__ = ["NOTICE_SECONDS", "TARGET_CHANNELS", "walk_alerts", "walk_due"]

NOTICE_SECONDS = 3600
"""How long a notification is tried before it is given up, seconds (docs/alerts.md)."""


_CLAIM = """
SELECT a.id, a.account_id, a.escalation_step, a.walks, p.steps, p.repeat
FROM alerts a LEFT JOIN escalation_policies p ON p.id = a.escalation_policy
WHERE {where} AND a.status = 'triggered' AND a.next_step_at IS NOT NULL
ORDER BY a.next_step_at, a.seq
{limit}
FOR UPDATE OF a{skip}
"""

TARGET_CHANNELS = """
WITH t AS (
    SELECT * FROM unnest($1::int[], $2::text[], $3::text[], $4::text[])
        WITH ORDINALITY AS u(walk, type, target, account_id, ord))
SELECT t.walk, t.ord, cc.pos, c.id AS channel_id, m.id AS member_id
FROM t JOIN members m ON t.type = 'member' AND m.id = t.target AND m.account_id = t.account_id
CROSS JOIN LATERAL unnest(m.contact_channels) WITH ORDINALITY AS cc(channel_id, pos)
JOIN notification_channels c ON c.id = cc.channel_id AND c.account_id = t.account_id
    AND c.enabled
UNION ALL
SELECT t.walk, t.ord, 0, c.id, NULL
FROM t JOIN notification_channels c ON t.type = 'channel' AND c.id = t.target
    AND c.account_id = t.account_id AND c.enabled
ORDER BY 1, 2, 3
"""
"""The channels that targets are told on, in order: ``$1`` walk indexes, ``$2`` target
types (``member`` or ``channel``), ``$3`` their ids, ``$4`` their accounts; rows
``(walk, ord, pos, channel_id, member_id)``. A member's enabled contact channels in their
order; a channel target's channel if it is enabled (docs/alerts.md)."""

_STEP = f"""
WITH sent AS (
    INSERT INTO notifications (id, account_id, alert_id, channel_id, member_id, kind, step,
                               status, ack_token, next_attempt_at, give_up_at, created)
    SELECT new_id('ntf'), u.account_id, u.alert_id, u.channel_id, u.member_id, u.kind,
           u.step, 'pending', u.token, $8::float8, $9::bigint + {NOTICE_SECONDS}, $9::bigint
    FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::int[],
                $7::text[]) WITH ORDINALITY
        AS u(account_id, alert_id, channel_id, member_id, kind, step, token, ord)
    ORDER BY u.ord),
tokens AS (
    INSERT INTO alert_ack_tokens (token, alert_id, member_id, channel_id, created)
    SELECT u.token, u.alert_id, u.member_id, u.channel_id, $9::bigint
    FROM unnest($2::text[], $3::text[], $4::text[], $7::text[])
        AS u(alert_id, channel_id, member_id, token)),
moved AS (
    UPDATE alerts a SET escalation_step = w.step, walks = w.walks, next_step_at = w.next,
        updated = $9::bigint
    FROM unnest($10::text[], $11::int[], $12::int[], $13::float8[], $14::bool[], $15::int[])
        AS w(id, step, walks, next, escalated, old_step)
    WHERE a.id = w.id
    RETURNING a.*, w.escalated, w.old_step)
INSERT INTO events (id, account_id, type, resource_id, created, object, previous)
SELECT new_id('evt'), account_id, 'alert.escalated', id, $9::bigint,
       to_jsonb(moved) - 'seq' - 'escalated' - 'old_step',
       jsonb_build_object('escalation_step', old_step)
FROM moved WHERE escalated ORDER BY id
"""


@dataclass(frozen=True, slots=True)
class _Step:
    """What one claimed alert's walk does now: notify ``step`` (None: nothing, the walk
    is over) of walk ``walks`` as ``kind``, then wait until ``next_at`` (None: never)."""

    alert_id: str
    account_id: str
    step: int | None
    walks: int
    kind: str
    targets: list[dict[str, str]]
    next_at: float | None
    old_step: int


def _plan(row: Any, now: float) -> _Step:
    """The step due for a claimed alert ``row`` (``escalation_step``, ``walks``, the
    policy's ``steps`` and ``repeat``) at ``now`` (epoch seconds): the step after the
    last one notified, or step 0 of the next walk while ``repeat`` allows; then the next
    step's due time, its ``delay_seconds`` after ``now``."""
    steps: list[dict[str, Any]] = row["steps"] or []
    repeat: int = row["repeat"] or 0
    step, walks = row["escalation_step"] + 1, row["walks"]
    if step >= len(steps) and walks < repeat and steps:
        step, walks = 0, walks + 1
    if step >= len(steps):
        return _Step(
            row["id"], row["account_id"], None, walks, "", [], None, row["escalation_step"]
        )
    kind = "reminder" if walks > 0 else "trigger" if step == 0 else "escalation"
    following = step + 1 if step + 1 < len(steps) else 0 if walks < repeat else None
    next_at = None if following is None else now + steps[following]["delay_seconds"]
    return _Step(
        row["id"],
        row["account_id"],
        step,
        walks,
        kind,
        steps[step]["targets"],
        next_at,
        row["escalation_step"],
    )


async def _on_call(
    connection: Connection, steps: Sequence[_Step], now: float
) -> dict[tuple[str, str], list[str]]:
    """Who is on call at ``now`` (epoch seconds) in each schedule the ``steps`` name, by
    ``(account, schedule)``: member ids in the order :func:`store.rotation.members_at` gives
    them; a schedule not found in that account maps to nobody."""
    wanted = {
        (step.account_id, target["id"])
        for step in steps
        if step.step is not None
        for target in step.targets
        if target["type"] == "schedule"
    }
    found: dict[tuple[str, str], list[str]] = {}
    at = int(now)
    for account_id, schedule_id in sorted(wanted):
        loaded = await schedules.load_plan(connection, schedule_id, at, at + 1, account_id)
        found[(account_id, schedule_id)] = (
            [] if loaded is None else rotation.members_at(loaded[0], loaded[1], at)
        )
    return found


async def _walk(connection: Connection, claimed: Sequence[Any], now: float) -> int:
    """Notify the due step of each locked alert in ``claimed`` and move its walk on."""
    plans = [_plan(row, now) for row in claimed]
    if not plans:
        return 0
    on_call = await _on_call(connection, plans, now)
    walk, types, targets, accounts = [], [], [], []
    for index, plan in enumerate(plans):
        for target in plan.targets:
            members = (
                on_call.get((plan.account_id, target["id"]), [])
                if target["type"] == "schedule"
                else None
            )
            for kind, target_id in (
                [(target["type"], target["id"])]
                if members is None
                else [("member", m) for m in members]
            ):
                walk.append(index)
                types.append(kind)
                targets.append(target_id)
                accounts.append(plan.account_id)
    rows = await connection.fetch(TARGET_CHANNELS, walk, types, targets, accounts) if walk else []
    notes: list[tuple[str, str, str, str | None, str, int, str]] = []
    seen: set[tuple[int, str, str | None]] = set()
    for r in rows:
        plan, key = plans[r["walk"]], (r["walk"], r["channel_id"], r["member_id"])
        if key in seen or plan.step is None:
            continue
        seen.add(key)
        token = secrets.token_urlsafe(16)
        notes.append(
            (
                plan.account_id,
                plan.alert_id,
                r["channel_id"],
                r["member_id"],
                plan.kind,
                plan.step,
                token,
            )
        )
    created = int(now)
    await connection.execute(
        _STEP,
        *(list(column) for column in zip(*notes, strict=True)) if notes else [[]] * 7,
        now,
        created,
        [p.alert_id for p in plans],
        [p.old_step if p.step is None else p.step for p in plans],
        [p.walks for p in plans],
        [p.next_at for p in plans],
        [p.step is not None and (p.step, p.walks) != (0, 0) for p in plans],
        [p.old_step for p in plans],
    )
    return len(plans)


async def walk_due(connection: Connection, now: float, limit: int) -> int:
    """Walk up to ``limit`` alerts whose next step is due at ``now`` (epoch seconds):
    claim them ``FOR UPDATE SKIP LOCKED`` (two nodes never notify one step twice), write
    each one's step (module docstring) and move it on (``escalation_step``, ``walks``,
    ``next_step_at``: the next step's ``delay_seconds`` after ``now``, or None once the
    walk is over), with ``alert.escalated`` for every step after the first notification.
    Run it in a transaction of its own. Returns how many alerts were claimed.

    Kinds: ``trigger`` for the first walk's step 0, ``escalation`` for its later steps,
    ``reminder`` for every step of a repeated walk.
    """
    claimed = await connection.fetch(
        _CLAIM.format(where="a.next_step_at <= $1", limit="LIMIT $2", skip=" SKIP LOCKED"),
        now,
        limit,
    )
    return await _walk(connection, claimed, now)


async def walk_alerts(connection: Connection, alert_ids: Sequence[str], now: float) -> int:
    """Walk the due step of the triggered alerts ``alert_ids`` at ``now`` (epoch seconds)
    as :func:`walk_due` does, waiting for their locks: the batch transaction that raised
    them walks step 0 itself when its delay is 0 (docs/alerts.md: the first notifications
    commit with the move). Returns how many were walked."""
    claimed = await connection.fetch(
        _CLAIM.format(where="a.id = ANY($1::text[])", limit="", skip=""), list(alert_ids)
    )
    return await _walk(connection, claimed, now)
