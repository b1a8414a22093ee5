"""Uptrio's store: Postgres through asyncpg (on trio via trio-asyncio).

Owns the schema and its migrations, the embedded server, the queries and the store actor.
Imports nothing of Uptrio's other packages. Query functions are asyncio coroutines taking
the connection first; run them with :meth:`Database.run` or :meth:`Database.transaction`.
"""

from . import accounts, checks, idempotency, incidents, monitors
from .checks import StatusChange
from .database import Connection, Database, open_database
from .embedded import EmbeddedPostgres, start_embedded
from .errors import CursorNotFound, DatabaseUnavailable, IntegrityConflict, StoreError
from .ids import has_prefix, new_id
from .migrate import LATEST_VERSION, apply_migrations, schema_version
from .pagination import Page, PageRequest
from .records import (
    AccountRecord,
    CheckRecord,
    IncidentRecord,
    MonitorRecord,
    TokenContext,
    TokenRecord,
)

__all__ = [
    "LATEST_VERSION",
    "AccountRecord",
    "CheckRecord",
    "Connection",
    "CursorNotFound",
    "Database",
    "DatabaseUnavailable",
    "EmbeddedPostgres",
    "IncidentRecord",
    "IntegrityConflict",
    "MonitorRecord",
    "Page",
    "PageRequest",
    "StatusChange",
    "StoreError",
    "TokenContext",
    "TokenRecord",
    "accounts",
    "apply_migrations",
    "checks",
    "has_prefix",
    "idempotency",
    "incidents",
    "monitors",
    "new_id",
    "open_database",
    "schema_version",
    "start_embedded",
]
