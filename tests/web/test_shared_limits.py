"""Rate limits shared by nodes (extensions part 6; issue 14, item 4; web/ratelimit.py's
shared windows, web/limit_sync.py, store/rate_limits.py): two limiters stand for two
nodes and sync through the real Postgres table; a hand-moved clock (epoch seconds)
stands for the nodes' wall clocks, so nothing waits.

The whole path with two real ``uptrio serve`` processes is tests/ops/test_nodes.py's
rate-limit test.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import structlog
import trio

from store import Connection, Database
from tests.web.test_rate_limits import Clock
from web.limit_sync import run_limit_sync, sync_once
from web.ratelimit import RateLimiter, Window

MINUTE = Window("token/minute", 10, 60.0)
HOUR = Window("token/hour", 100, 3600.0)
SHARED = ("token/minute", "token/hour")


def _checks(token: str = "tok_a") -> list[tuple[Window, str]]:
    return [(MINUTE, token), (HOUR, token)]


def _admitted(limiter: RateLimiter, n: int, token: str = "tok_a") -> int:
    return sum(limiter.admit(_checks(token)).allowed for _ in range(n))


async def _rows(db: Database) -> list[Any]:
    async def fetch(connection: Connection) -> list[Any]:
        return list(
            await connection.fetch(
                "SELECT limit_name, key, node, sum(count) AS n FROM rate_limit_counts "
                "GROUP BY 1, 2, 3 ORDER BY 1, 2, 3"
            )
        )

    return await db.run(fetch)


async def test_a_node_refuses_once_the_other_used_the_budget(db: Database) -> None:
    clock = Clock(1_800_000_000.0)
    a = RateLimiter(clock=clock, shared=SHARED)
    b = RateLimiter(clock=clock, shared=SHARED)
    assert _admitted(a, 7) == 7
    clock.now += 0.5
    assert _admitted(b, 1) == 1  # b has seen the token: it reads a's counts back
    await sync_once(db, a, "a")
    await sync_once(db, b, "b")
    assert _admitted(b, 5) == 2  # 7 + 1 + 2: the minute's 10
    decision = b.admit(_checks())
    assert not decision.allowed
    assert decision.window == "token/minute"
    assert 60.0 <= decision.retry_after_seconds <= 61.0  # a's slice, 0.5 s older
    await sync_once(db, b, "b")
    await sync_once(db, a, "a")
    assert _admitted(a, 3) == 0  # and a sees b's 3
    assert [tuple(r) for r in await _rows(db)] == [
        ("token/hour", "tok_a", "a", 7),
        ("token/hour", "tok_a", "b", 3),
        ("token/minute", "tok_a", "a", 7),
        ("token/minute", "tok_a", "b", 3),
    ]
    clock.now += 62.0  # the minute rolled on; the hour still counts all 10
    await sync_once(db, a, "a")
    assert _admitted(a, 1) == 1
    await sync_once(db, a, "a")
    await sync_once(db, b, "b")
    assert b.peek([(HOUR, "tok_a")]).remaining == 100 - 11 - 1


async def test_a_lone_node_decides_exactly_as_without_sharing(db: Database) -> None:
    clock = Clock(1_800_000_000.0)
    shared = RateLimiter(clock=clock, shared=SHARED)
    alone = RateLimiter(clock=clock)
    for step in range(40):
        clock.now += 0.37
        assert shared.admit(_checks()) == alone.admit(_checks()), step
        if step % 3 == 0:
            await sync_once(db, shared, "only")


async def test_syncs_are_idempotent_and_expired_slices_are_deleted(db: Database) -> None:
    clock = Clock(1_800_000_000.0)
    a = RateLimiter(clock=clock, shared=SHARED)
    b = RateLimiter(clock=clock, shared=SHARED)
    _admitted(a, 4)
    changes = a.take_changes()
    assert a.take_changes() == []  # taken once
    a.requeue(changes)  # as after a failed sync: sent again, in full
    await sync_once(db, a, "a")
    a.requeue(changes)  # a sync repeated after a lost answer adds nothing
    await sync_once(db, a, "a")
    _admitted(b, 1)
    await sync_once(db, b, "b")
    assert b.peek(_checks()).remaining == 10 - 4 - 1 - 1
    clock.now += 3600.0 + 61.0  # every slice of both windows expired
    _admitted(b, 1, token="tok_b")
    await sync_once(db, b, "b")
    assert [tuple(r)[:3] for r in await _rows(db)] == [
        ("token/hour", "tok_b", "b"),
        ("token/minute", "tok_b", "b"),
    ]


def test_windows_not_shared_are_never_handed_to_the_sync() -> None:
    clock = Clock()
    limiter = RateLimiter(clock=clock, shared=("token/minute",))
    limiter.admit([(MINUTE, "tok_a"), (Window("ping/minute", 60, 60.0), "key")])
    limiter.hit([(Window("auth-failures/minute", 60, 60.0), "127.0.0.1")])
    assert [c[:2] for c in limiter.take_changes()] == [("token/minute", "tok_a")]
    assert limiter.shared_keys() == [("token/minute", "tok_a")]


async def test_without_the_table_a_node_counts_alone_and_says_so_once(db: Database) -> None:
    """A sync that fails (here: the table renamed away, on the real server) logs once,
    loses nothing it had to send, and the limiter goes on deciding."""
    clock = Clock(1_800_000_000.0)
    a = RateLimiter(clock=clock, shared=SHARED)

    async def rename(connection: Connection, old: str, new: str) -> None:
        await connection.execute(f"ALTER TABLE {old} RENAME TO {new}")

    await db.run(rename, "rate_limit_counts", "elsewhere")
    with structlog.testing.capture_logs() as logged, trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            await nursery.start(partial(run_limit_sync, db, a, "a", interval_seconds=0.01))
            assert _admitted(a, 3) == 3
            await trio.sleep(0.1)  # several failed syncs
            assert _admitted(a, 20) == 7
            await db.run(rename, "elsewhere", "rate_limit_counts")
            while not await _rows(db):
                await trio.sleep(0.01)
            nursery.cancel_scope.cancel()
    events = [e["event"] for e in logged if e["log_level"] in ("warning", "info")]
    assert events == ["rate limits counted by this node alone", "rate limits shared again"]
    assert [tuple(r)[2:] for r in await _rows(db)] == [("a", 10), ("a", 10)]
