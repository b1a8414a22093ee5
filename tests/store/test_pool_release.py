"""A pooled connection goes back to the pool without a reset round trip
(``store.database._keep_session``): the store leaves no session state behind."""

from __future__ import annotations

from typing import Any

import trio

from store import Database


async def _pid(connection: Any) -> int:
    return int(await connection.fetchval("SELECT pg_backend_pid() /* the unit's own */"))


async def _last_statement(connection: Any, pid: int) -> str:
    return str(await connection.fetchval("SELECT query FROM pg_stat_activity WHERE pid = $1", pid))


async def test_a_unit_of_work_costs_no_reset_statement_on_release(db: Database) -> None:
    with trio.fail_after(10):
        async with db.open_transaction() as held:  # another connection, held meanwhile
            pid = await db.run(_pid)
            assert pid != await held.run(_pid)
            # the released connection's last statement is the unit's own, not a reset
            assert "the unit's own" in await held.run(_last_statement, pid)
