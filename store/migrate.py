"""Numbered SQL migrations, applied at start-up (docs/design-notes.md).

Migrations are the files ``store/migrations/NNNN_name.sql``, applied in order, each in its
own transaction, each recorded in ``schema_migrations``. A Postgres advisory lock makes
concurrent start-ups (several processes, or a CLI command beside a running service) apply
them once.
"""

from __future__ import annotations

import re
from importlib import resources

from .database import Connection

_LOCK_KEY = 0x5570_7472_696F  # "Uptrio", an arbitrary advisory-lock key
_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")


def migration_files() -> list[tuple[int, str, str]]:
    """Every migration as ``(version, file name, sql)``, by version."""
    found = []
    for entry in resources.files("store").joinpath("migrations").iterdir():
        match = _NAME.match(entry.name)
        if match:
            found.append((int(match.group(1)), entry.name, entry.read_text("utf-8")))
    return sorted(found)


LATEST_VERSION = migration_files()[-1][0]
"""The schema version this code expects."""


async def apply_migrations(connection: Connection, up_to: int | None = None) -> list[str]:
    """Apply every migration not yet applied (up to version ``up_to`` when given: tests
    of a migration's data move); return the file names applied (asyncio side).

    Raises:
        asyncpg errors, translated by the caller's :class:`store.Database` bridge.
    """
    await connection.execute("SELECT pg_advisory_lock($1)", _LOCK_KEY)
    try:
        await connection.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version integer PRIMARY KEY, name text NOT NULL,"
            " applied_at timestamptz NOT NULL DEFAULT now())"
        )
        done = {
            r["version"] for r in await connection.fetch("SELECT version FROM schema_migrations")
        }
        applied = []
        for version, name, sql in migration_files():
            if version in done or (up_to is not None and version > up_to):
                continue
            async with connection.transaction():
                await connection.execute(sql)
                await connection.execute(
                    "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", version, name
                )
            applied.append(name)
        return applied
    finally:
        await connection.execute("SELECT pg_advisory_unlock($1)", _LOCK_KEY)


async def schema_version(connection: Connection) -> int | None:
    """The highest applied migration version, or None on an empty database."""
    exists = await connection.fetchval("SELECT to_regclass('schema_migrations') IS NOT NULL")
    if not exists:
        return None
    value: int | None = await connection.fetchval("SELECT max(version) FROM schema_migrations")
    return value
