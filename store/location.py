"""Where the database is, and opening it: the URL given (flag or
``UPTRIO_DATABASE_URL``), else the embedded Postgres in the data directory
(docs/operations.md, Running it: Store). ``uptrio serve`` and the ``uptrio tokens`` commands
open it the same way, so a command run beside the service shares the service's embedded
server.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import structlog
import trio

from .database import Database, open_database
from .embedded import EmbeddedPostgres, start_embedded
from .migrate import apply_migrations

__all__ = ["StoreLocation", "open_store"]

log = structlog.get_logger("uptrio.store")


@dataclass(frozen=True, slots=True, kw_only=True)
class StoreLocation:
    """Where the database lives.

    Attributes:
        data_dir: the data directory (the embedded server's ``pgdata``, the JWT secret,
            the admin socket, the first token).
        database_url: an external Postgres URL, or None for the embedded server.
    """

    data_dir: Path
    database_url: str | None = None


@asynccontextmanager
async def open_store(location: StoreLocation) -> AsyncIterator[Database]:
    """The database of ``location``, migrated, as a pool; the embedded server's handle is
    released on exit (the server stops when no process holds one). Must run inside
    ``trio_asyncio.open_loop()``.

    Raises:
        RuntimeError: the embedded server failed to start.
        store.DatabaseUnavailable: the database could not be reached.
    """
    url = location.database_url
    embedded: EmbeddedPostgres | None = None
    if url is None:
        embedded = await trio.to_thread.run_sync(start_embedded, location.data_dir)
        url = embedded.url
    try:
        async with open_database(url) as db:
            applied = await db.run(apply_migrations)
            if applied:
                log.info("migrations applied", migrations=applied)
            yield db
    finally:
        if embedded is not None:
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(embedded.stop)
