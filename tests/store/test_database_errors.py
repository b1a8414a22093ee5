"""How the store's boundary translates asyncpg's errors (``store.database``): whatever
breaks a connection is ``DatabaseUnavailable`` (a 503 on ``/readyz``, a 500
``database_unavailable`` on the API), never an untranslated exception (a 500
``internal_error``). Real Postgres."""

from __future__ import annotations

import asyncpg
import pytest
import trio

from store import Connection, Database, DatabaseUnavailable


async def test_the_pools_internal_client_error_is_database_unavailable(db: Database) -> None:
    """asyncpg raises ``InternalClientError`` from ``pool.release`` when the server went
    away while the connection was being reset (``pg_ctl stop -m fast``)."""

    async def breaks(connection: Connection) -> None:
        raise asyncpg.InternalClientError("cannot reset a connection: the server went away")

    with trio.fail_after(5), pytest.raises(DatabaseUnavailable):
        await db.run(breaks)
    assert await db.run(lambda c: c.fetchval("SELECT 1")) == 1  # the pool goes on
