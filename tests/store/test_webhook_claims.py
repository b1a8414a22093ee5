"""The sender's claim (``store.deliveries.claim_due``; docs/webhooks.md, Fairness) on the
real Postgres: deliveries are shared round-robin between accounts first, then between an
account's endpoints, within per-account and per-endpoint caps of attempts in flight, and an
account's backlog, however long, never hides another account's due delivery.

Endpoints and events are written through the store (the fan-out trigger of migration
0004 makes the deliveries); nothing is sent.
"""

from __future__ import annotations

import time
from collections import Counter

import trio

from store import Connection, Database, accounts, deliveries, new_id, webhooks


async def _endpoints(db: Database, account: str, count: int) -> tuple[str, list[str]]:
    """An account called ``account`` (its id) with ``count`` enabled endpoints for
    ``["*"]`` (their ids)."""
    now = int(time.time())
    owner = await db.transaction(accounts.ensure_account, account, now)
    made = []
    for n in range(count):
        values = {
            "id": new_id("we"),
            "account_id": owner.id,
            "url": f"http://127.0.0.1:9/{n}",
            "enabled_events": ["*"],
            "description": None,
            "status": "enabled",
            "secret": webhooks.new_secret(),
            "created": now,
            "updated": now,
            "metadata": {},
        }
        record = await db.transaction(webhooks.insert_endpoint, values)
        assert record is not None
        made.append(record.id)
    return owner.id, made


async def _events(db: Database, account: str, count: int, created: int) -> None:
    """``count`` events of ``account`` made at ``created`` (epoch seconds), in one
    statement: one delivery each per endpoint of the account."""

    async def insert(connection: Connection) -> None:
        await connection.execute(
            "INSERT INTO events (id, account_id, type, resource_id, created, object) "
            "SELECT 'evt_' || md5(random()::text), $1, 'incident.created', 'inc_x', $2, "
            "'{}'::jsonb FROM generate_series(1, $3)",
            account,
            created,
            count,
        )

    await db.transaction(insert)


async def _claim(
    db: Database,
    limit: int,
    *,
    per_account: int = 8,
    endpoints: Counter[str] | None = None,
    accounts: Counter[str] | None = None,
) -> list[deliveries.ClaimedDelivery]:
    share = deliveries.Share(
        per_endpoint=4,
        per_account=per_account,
        endpoints=endpoints or Counter(),
        accounts=accounts or Counter(),
    )
    return await db.transaction(
        deliveries.claim_due, now=time.time(), limit=limit, share=share, claim_seconds=60
    )


async def test_a_long_backlog_does_not_hide_another_accounts_delivery(db: Database) -> None:
    with trio.fail_after(30):
        acme, _ = await _endpoints(db, "acme", 16)
        other, (theirs,) = await _endpoints(db, "other", 1)
        await _events(db, acme, 100, int(time.time()) - 60)  # 1,600 due, all older
        await _events(db, other, 1, int(time.time()))
        claimed = await _claim(db, 2)  # round-robin: each account's first
        assert theirs in [c.endpoint_id for c in claimed]
        assert Counter(c.account_id for c in claimed) == {acme: 1, other: 1}


async def test_claims_go_round_robin_within_the_shares(db: Database) -> None:
    with trio.fail_after(30):
        acme, mine = await _endpoints(db, "acme", 3)
        other, (theirs,) = await _endpoints(db, "other", 1)
        await _events(db, acme, 10, int(time.time()) - 60)  # 30 due
        await _events(db, other, 10, int(time.time()) - 30)  # 10 due
        # acme: at most 5 in flight, spread over its 3 endpoints (2, 2, 1); other: 4,
        # its one endpoint's cap
        first = await _claim(db, 100, per_account=5)
        assert Counter(c.account_id for c in first) == {acme: 5, other: 4}
        assert sorted(Counter(c.endpoint_id for c in first if c.account_id == acme).values()) == [
            1,
            2,
            2,
        ]
        # what a sender holds counts: acme holds 5 (its share), other's endpoint 3 of 4
        held_endpoints = Counter(c.endpoint_id for c in first)
        held_endpoints[theirs] -= 1
        held_accounts = Counter({acme: 5, other: 3})
        second = await _claim(
            db, 100, per_account=5, endpoints=held_endpoints, accounts=held_accounts
        )
        assert [c.endpoint_id for c in second] == [theirs]
        # nothing claimed twice, and a claimed delivery is not due again for 60 s
        assert not {c.id for c in first} & {c.id for c in second}
        assert await _claim(db, 100, per_account=100) != []  # the rest, unclaimed
        assert len(mine) == 3


async def test_nothing_due_claims_nothing(db: Database) -> None:
    with trio.fail_after(10):
        acme, _ = await _endpoints(db, "acme", 2)
        assert await _claim(db, 10) == []
        await _events(db, acme, 3, int(time.time()) + 3600)  # due in an hour
        assert await _claim(db, 10) == []
