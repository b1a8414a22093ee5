"""Rate limits that hold across nodes by quota leasing (docs/several-nodes.md, Rate limits
across nodes; web/http/limits/quota.py, store/rate_limits.py): several limiters, or several
apps, stand for several nodes and lease from the real Postgres table.

The alternating and concurrent tests run on the wall clock (real slices, real
exchanges); the others move an epoch-seconds clock by hand, so nothing waits. The whole
path with two real ``uptrio serve`` processes is tests/ops/test_node_limits.py.
"""

from __future__ import annotations

import dataclasses
import time
from contextlib import AsyncExitStack
from typing import Any

import pytest
import structlog
import trio
import trio.lowlevel

from store import Connection, Database
from tests.api import Api, MakeToken
from tests.web.test_rate_limits import Clock
from web.http.deps import Dependencies, WebSettings
from web.http.limits.quota import ALONE_SECONDS, LEASE_DEADLINE_SECONDS, QuotaLimiter
from web.http.limits.rolling import RateLimiter, Window
from web.http.limits.throttle import SHARED_WINDOWS
from web.process.app import create_app

MINUTE = Window("token/minute", 10, 60.0)
HOUR = Window("token/hour", 100, 3600.0)
SHARED = ("token/minute", "token/hour", "auth-failures/minute")
START = 1_800_000_000.0
"""An epoch second at a slice boundary of both windows (a multiple of 60)."""

# a deadline no busy test machine reaches: these tests count, they do not time
PATIENT = 30.0


def _node(db: Database, clock: Any = time.time) -> QuotaLimiter:
    return QuotaLimiter(RateLimiter(clock=clock), db=db, shared=SHARED, deadline_seconds=PATIENT)


def _checks(token: str = "tok_a") -> list[tuple[Window, str]]:
    return [(MINUTE, token), (HOUR, token)]


async def _admitted(limiter: QuotaLimiter, n: int, token: str = "tok_a") -> int:
    return sum([(await limiter.admit(_checks(token))).allowed for _ in range(n)])


async def _charged(db: Database, name: str = "token/minute", key: str = "tok_a") -> int:
    """What the table charges to ``name``/``key`` now (leases included)."""

    async def fetch(connection: Connection) -> int:
        value = await connection.fetchval(
            "SELECT coalesce((SELECT sum(n) FROM unnest(counts) AS n), 0)::integer "
            "FROM rate_limit_quota WHERE limit_name = $1 AND key = $2",
            name,
            key,
        )
        return int(value or 0)

    return await db.run(fetch)


async def _live_nodes(db: Database, count: int) -> None:
    async def insert(connection: Connection) -> None:
        await connection.execute(
            "INSERT INTO nodes (name, started, renewed_at, lease_seconds) "
            "SELECT 'n' || i, now(), now(), 600 FROM generate_series(1, $1) AS i",
            count,
        )

    await db.run(insert)


async def test_one_token_alternating_between_two_nodes_is_held_to_the_limit(
    deps: Dependencies, make_token: MakeToken
) -> None:
    """Two apps on one database, as two nodes; one token's requests alternate between
    them as fast as they are answered. The limits sync every 0.5 s admitted all 220 of
    220 here (each node admitted what the other had in the last half second)."""
    limit = 200
    settings = dataclasses.replace(WebSettings(), token_requests_per_minute=limit)
    with trio.fail_after(60):
        async with AsyncExitStack() as stack:
            apis = []
            token = await make_token()
            for _ in range(2):
                node = dataclasses.replace(
                    deps,
                    settings=settings,
                    rate_limiter=QuotaLimiter(
                        RateLimiter(clock=time.time),
                        db=deps.db,
                        shared=SHARED_WINDOWS,
                        deadline_seconds=PATIENT,
                    ),
                )
                test_app = await stack.enter_async_context(create_app(node).test_app())
                apis.append(Api(test_app.test_client(), token))
            statuses = []
            for i in range(limit + limit // 10):
                statuses.append((await apis[i % 2].get("/monitors", query={"limit": 1}))[0])
    admitted, refused = statuses.count(200), statuses.count(429)
    assert admitted + refused == len(statuses)
    assert limit * 0.99 <= admitted <= limit, (admitted, refused)


async def test_four_nodes_at_once_admit_the_limit_with_few_statements(db: Database) -> None:
    """Four limiters, each with eight tasks admitting as fast as they can: together
    they admit the limit (none over), and one statement serves many requests."""
    window = Window("token/minute", 1000, 60.0)
    nodes = [_node(db) for _ in range(4)]
    admitted = [0] * 4

    async def hammer(number: int) -> None:
        for _ in range(400):
            if (await nodes[number].admit([(window, "tok_a")])).allowed:
                admitted[number] += 1
            await trio.lowlevel.checkpoint()

    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            for number in range(4):
                for _ in range(8):
                    nursery.start_soon(hammer, number)
    total = sum(admitted)
    assert 990 <= total <= 1000, admitted
    assert all(n > 0 for n in admitted), admitted
    exchanges = sum(node.statistics().exchanges for node in nodes)
    assert exchanges * 5 < total, (exchanges, total)


async def test_requests_waiting_for_a_lease_share_one_statement(db: Database) -> None:
    """With 50 live nodes a lease of the rule is 1 (100 / (2 * 50)); twenty requests
    arriving at once still cost two statements, not twenty: the first asks, and the next
    lease is as large as the requests that waited meanwhile."""
    await _live_nodes(db, 50)
    window = Window("token/minute", 100, 60.0)
    node = _node(db)
    decisions = []

    async def request() -> None:
        decisions.append(await node.admit([(window, "tok_a")]))

    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            for _ in range(20):
                nursery.start_soon(request)
    assert all(d.allowed for d in decisions) and len(decisions) == 20
    assert node.statistics().exchanges == 2
    assert await _charged(db) == 20


async def test_a_lone_node_decides_exactly_as_the_limiter_in_memory(db: Database) -> None:
    """The same decisions, headers' figures included, as web.http.limits.rolling's limiter."""
    clock = Clock(START)
    leased = _node(db, clock)
    alone = RateLimiter(clock=clock)
    with trio.fail_after(30):
        for step in range(150):
            clock.now += 0.37 if step % 7 else 3.1
            assert await leased.admit(_checks()) == alone.admit(_checks()), step
            if step % 5 == 0:
                await leased.give_back()


async def test_an_unused_lease_goes_back_when_its_slice_ends(db: Database) -> None:
    clock = Clock(START)
    a, b = _node(db, clock), _node(db, clock)
    with trio.fail_after(30):
        assert await _admitted(a, 1) == 1  # a leased half the minute: 5
        assert await _charged(db) == 5
        await a.give_back()  # its slice goes on: the lease stays
        assert await _charged(db) == 5
        clock.now += 1.0  # a's slice ended, and a is idle
        await a.give_back()
        assert await _charged(db) == 1
        assert await _admitted(b, 20) == 9
        refused = await b.admit(_checks())
        assert not refused.allowed and refused.window == "token/minute"
        assert refused.retry_after_seconds == 60.0  # a's request, 1 s older, goes first
        # a node stopping gives back the unused part of its current slice too
        assert await _admitted(b, 1, token="tok_b") == 1
        assert await _charged(db, key="tok_b") == 5
        await b.give_back(everything=True)
        assert await _charged(db, key="tok_b") == 1
        assert await _admitted(b, 1, token="tok_b") == 1  # and leases again


async def test_without_the_database_a_node_keeps_to_its_share_and_pays_its_debts(
    db: Database,
) -> None:
    """Two live nodes: a node that cannot lease admits alone up to half the limit (its
    own earlier requests included), says so once, and charges what it admitted alone
    when it can again."""
    await _live_nodes(db, 2)
    clock = Clock(START)
    a = _node(db, clock)

    async def rename(connection: Connection, old: str, new: str) -> None:
        await connection.execute(f"ALTER FUNCTION {old} RENAME TO {new}")

    with structlog.testing.capture_logs() as logged, trio.fail_after(30):
        assert await _admitted(a, 3) == 3
        await db.run(rename, "take_rate_limit_quota", "elsewhere")
        clock.now += 1.0  # a new slice: the lease in hand is over
        assert await _admitted(a, 5) == 2  # 5 of 10 for this node: 3 + 2
        assert a.statistics().failed_exchanges == 1  # then no asking for ALONE_SECONDS
        refused = await a.admit(_checks())
        assert not refused.allowed and refused.limit == 10 and refused.remaining == 0
        await db.run(rename, "elsewhere", "take_rate_limit_quota")
        clock.now += ALONE_SECONDS
        await a.give_back()
        # 3 + 2 admitted, and the lease's unused 1 of the first slice: its giving back
        # failed and is not sent again (erring towards refusing)
        assert await _charged(db) == 3 + 1 + 2
        assert await _admitted(a, 10) == 4
    events = [e["event"] for e in logged if e["log_level"] in ("warning", "info")]
    assert events == ["rate limits decided by this node alone", "rate limits shared again"]
    assert a.statistics().admitted_alone == 2


async def test_a_request_waits_on_a_stuck_lease_statement_no_longer_than_its_deadline(
    db: Database,
) -> None:
    """The window's row locked by another transaction: the lease statement waits, and
    the request is decided alone once the deadline (0.5 s) passed, not when the lock
    goes."""
    clock = Clock(START)
    a = QuotaLimiter(RateLimiter(clock=clock), db=db, shared=SHARED)
    with trio.fail_after(30):
        assert await _admitted(a, 1) == 1
        clock.now += 1.0  # a new slice: the minute's lease is asked again
        async with db.open_transaction() as locking:

            async def lock(connection: Connection) -> None:
                await connection.execute(
                    "SELECT 1 FROM rate_limit_quota WHERE limit_name = 'token/minute' FOR UPDATE"
                )

            await locking.run(lock)
            began = time.monotonic()
            decision = await a.admit(_checks())
            waited = time.monotonic() - began
    assert decision.allowed and a.statistics().admitted_alone == 1
    assert a.statistics().failed_exchanges == 1
    assert LEASE_DEADLINE_SECONDS <= waited < LEASE_DEADLINE_SECONDS + 1.0, waited


async def test_failed_logins_over_the_limit_on_one_node_are_refused_on_the_other(
    db: Database,
) -> None:
    failures = [(Window("auth-failures/minute", 6, 60.0), "203.0.113.7")]
    clock = Clock(START)
    a, b = _node(db, clock), _node(db, clock)
    with trio.fail_after(30):
        for _ in range(6):
            assert (await a.peek(failures)).allowed
            await a.hit(failures)
        assert (await b.peek(failures)).allowed  # b never saw the address fail
        await b.hit(failures)  # one more guess, through b
        refused = await b.peek(failures)
        assert not refused.allowed and refused.limit == 6 and refused.retry_after_seconds > 59
        clock.now += 1.5  # the next slice: a asks again before it allows
        assert not (await a.peek(failures)).allowed
        assert await _charged(db, "auth-failures/minute", "203.0.113.7") == 7


async def test_a_request_mixing_shared_and_per_node_windows_is_a_bug(db: Database) -> None:
    limiter = _node(db)
    with pytest.raises(ValueError, match="all shared or none"):
        await limiter.admit([(MINUTE, "tok_a"), (Window("ping/minute", 60, 60.0), "key")])
