"""The dependency graph's rules in the writing transaction (``store.dependencies``;
docs/incidents.md, "Dependencies"): two transactions that would close a cycle together
are serialized by the account's graph lock, and the second is refused. Real Postgres."""

from __future__ import annotations

import asyncio

import pytest
import trio

from store import Connection, Database, dependencies, monitors
from tests.store.helpers import new_monitor

T0 = 1_790_000_000


async def test_two_concurrent_patches_cannot_close_a_cycle_together(db: Database) -> None:
    with trio.fail_after(15):
        a = await new_monitor(db, created=T0)
        b = await new_monitor(db, created=T0)
        account = a.account_id
        written = asyncio.Event()
        outcomes: dict[str, str] = {}

        async def first(connection: Connection) -> None:
            await monitors.update_monitor(
                connection, account, a.id, lambda _: {"depends_on": [b.id]}, T0 + 1
            )
            written.set()
            # Still uncommitted: the second transaction's check runs meanwhile (without
            # the graph lock it would not see this edge and would close the cycle).
            await asyncio.sleep(0.5)

        async def second(connection: Connection) -> None:
            await written.wait()
            await monitors.update_monitor(
                connection, account, b.id, lambda _: {"depends_on": [a.id]}, T0 + 1
            )

        async def run(name: str, fn: object) -> None:
            try:
                await db.transaction(fn)  # type: ignore[arg-type]
                outcomes[name] = "committed"
            except dependencies.DependencyCycle as exc:
                outcomes[name] = f"refused through {exc.parent}"

        async with trio.open_nursery() as nursery:
            nursery.start_soon(run, "first", first)
            nursery.start_soon(run, "second", second)
        assert outcomes == {"first": "committed", "second": f"refused through {a.id}"}
        got_a = await db.run(monitors.get_monitor, account, a.id)
        got_b = await db.run(monitors.get_monitor, account, b.id)
        assert got_a is not None and got_b is not None
        assert (got_a.depends_on, got_b.depends_on) == ([b.id], [])


async def test_a_monitor_deleted_meanwhile_is_no_dependency(db: Database) -> None:
    with trio.fail_after(15):
        a = await new_monitor(db, created=T0)
        gone = await new_monitor(db, created=T0)
        await db.transaction(monitors.delete_monitor, a.account_id, gone.id, T0 + 1)
        with pytest.raises(dependencies.UnknownDependency) as raised:
            await db.transaction(
                monitors.update_monitor,
                a.account_id,
                a.id,
                lambda _: {"depends_on": [gone.id]},
                T0 + 2,
            )
        assert (raised.value.index, raised.value.monitor_id) == (0, gone.id)
