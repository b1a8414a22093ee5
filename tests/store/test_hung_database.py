"""A database that hangs instead of refusing (docs/operations.md, A database outage), at the
store's boundary.

A server of the test's own (``tests.postgres``) has every process stopped with SIGSTOP:
its sockets accept and then nothing answers, not even a cancel request. Every call on a
:class:`store.Database` with a deadline must still fail with ``DatabaseUnavailable``
within that deadline (plus scheduling slack), a caller's own cancel scope must end the
call on time, closing the pool must be bounded, and the connections given up on must be
terminated rather than returned to the pool. When the server continues (SIGCONT) the
pool answers again, without a restart. A lock held past the deadline is the same story
with a live server. Real Postgres, real clock.
"""

from __future__ import annotations

import asyncio

import trio
import trio_asyncio

from store import Database, DatabaseUnavailable, EmbeddedPostgres, open_database
from tests.postgres import freeze_postgres

DEADLINE_SECONDS = 1.0
SLACK_SECONDS = 1.0
"""Scheduling slack on a shared 2-core machine; the unfixed code took the whole freeze."""
FREEZE_SECONDS = 6.0
CALLS = 6
"""Concurrent calls during the freeze: twice the pool, so half of them wait to acquire."""


async def _one(connection: object) -> int:
    return int(await connection.fetchval("SELECT 1"))  # type: ignore[attr-defined]


async def _lock_monitors(connection: object) -> None:
    await connection.execute("LOCK TABLE monitors IN ACCESS EXCLUSIVE MODE")  # type: ignore[attr-defined]


async def _count_monitors(connection: object) -> int:
    return int(await connection.fetchval("SELECT count(*) FROM monitors"))  # type: ignore[attr-defined]


async def _wait_reaped(db: Database) -> None:
    """Wait until no abandoned unit of work is still running on the asyncio side."""
    while db.statistics().abandoned_running:
        await trio.sleep(0.01)


async def test_calls_fail_within_their_deadline_while_every_server_process_is_stopped(
    own_postgres: EmbeddedPostgres,
) -> None:
    with trio.fail_after(60):
        # connecting gives up later than the calls do, so that every call is abandoned
        async with open_database(
            own_postgres.url, min_size=2, max_size=3, connect_timeout_seconds=5
        ) as db:
            bounded = db.with_deadline(DEADLINE_SECONDS)
            assert await bounded.run(_one) == 1
            outcomes: list[tuple[float, str]] = []

            async def call() -> None:
                began = trio.current_time()
                try:
                    await bounded.run(_one)
                    outcome = "answered"
                except DatabaseUnavailable:
                    outcome = "unavailable"
                outcomes.append((trio.current_time() - began, outcome))

            async with trio.open_nursery() as nursery:
                frozen_at = await nursery.start(
                    freeze_postgres, own_postgres.pgdata, FREEZE_SECONDS
                )
                async with trio.open_nursery() as calls:
                    for _ in range(CALLS):
                        calls.start_soon(call)
                # a caller's own deadline (readyz's 1 s) ends a call on an unbounded pool
                began = trio.current_time()
                with trio.move_on_after(0.5) as own:
                    await db.run(_one)
                own_seconds = trio.current_time() - began
                still_frozen = trio.current_time() - frozen_at < FREEZE_SECONDS
            # continued (the nursery waited for the thaw)
            answered_after = await bounded.run(_one)
            await _wait_reaped(db)
            statistics = db.statistics()

        assert still_frozen, f"the calls outlived the freeze (waited for the server): {outcomes}"
        assert [o for _, o in outcomes] == ["unavailable"] * CALLS, outcomes
        assert max(s for s, _ in outcomes) < DEADLINE_SECONDS + SLACK_SECONDS, outcomes
        assert own.cancelled_caught and own_seconds < 0.5 + SLACK_SECONDS, own_seconds
        assert answered_after == 1
        # the calls holding a connection had it terminated; the others were waiting
        assert statistics.abandoned == CALLS + 1, statistics
        assert statistics.terminated >= 1, statistics
        assert statistics.abandoned_running == 0


async def test_closing_the_pool_while_the_server_is_stopped_is_bounded(
    own_postgres: EmbeddedPostgres,
) -> None:
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            async with open_database(
                own_postgres.url, min_size=2, max_size=2, close_seconds=1.0
            ) as db:
                assert await db.run(_one) == 1
                frozen_at = await nursery.start(
                    freeze_postgres, own_postgres.pgdata, FREEZE_SECONDS
                )
                with trio.move_on_after(0.2):
                    await db.run(_one)  # abandoned mid-query: a busy connection
            closed_seconds = trio.current_time() - frozen_at
            leftover = [
                t for t in asyncio.all_tasks(trio_asyncio.current_loop.get()) if not t.done()
            ]
            nursery.cancel_scope.cancel()  # thaw now
        assert closed_seconds < 0.2 + 1.0 + SLACK_SECONDS, closed_seconds
        assert leftover == [], leftover


async def test_a_lock_held_past_the_deadline_gives_up_and_terminates_the_waiting_connection(
    db: Database,
) -> None:
    with trio.fail_after(30):
        bounded = db.with_deadline(0.5)
        async with db.open_transaction() as tx:
            await tx.run(_lock_monitors)
            began = trio.current_time()
            try:
                await bounded.run(_count_monitors)
                outcome = "answered"
            except DatabaseUnavailable:
                outcome = "unavailable"
            waited = trio.current_time() - began
        assert outcome == "unavailable"
        assert waited < 0.5 + SLACK_SECONDS, waited
        assert await bounded.run(_count_monitors) == 0  # the lock is gone: answers again
        await _wait_reaped(db)
        assert db.statistics().terminated == 1
