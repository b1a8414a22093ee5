"""Uptrio's store: Postgres through asyncpg (on trio via trio-asyncio).

Owns the schema and its migrations, the embedded server, the queries and the store actor.
Imports nothing of Uptrio's other packages; other packages import only the names
below (checked by the import contracts in ``pyproject.toml``). Query functions are
asyncio coroutines taking the connection first; run them with :meth:`Database.run` or
:meth:`Database.transaction`.
"""

from . import (
    accounts,
    alerts,
    checks,
    escalation_policies,
    events,
    heartbeats,
    history,
    idempotency,
    incidents,
    leases,
    members,
    monitors,
    notification_channels,
    notifications,
    notify,
    pings,
    rate_limits,
    rollups,
    status_pages,
    webhooks,
)
from .actor import (
    StoreActor,
    StoreSettings,
    StoreWriter,
    WriterObserver,
    WriterStatistics,
    run_store_writer,
)
from .alerts import AlertNotOpen
from .checks import StatusChange, WriteCheck
from .database import Connection, Database, open_database
from .datadir import DATA_DIR_MODE, OPEN_TO_OTHERS, secure_data_dir
from .embedded import EmbeddedPostgres, start_embedded
from .errors import (
    CursorNotFound,
    DatabaseUnavailable,
    IntegrityConflict,
    StoreError,
    TimelineFull,
)
from .events import EventCause, EventFilter
from .ids import check_created, has_prefix, new_check_id, new_id
from .location import DEFAULT_DATA_DIR, StoreLocation, open_store
from .maintenance import MaintenanceSettings, maintain, run_maintenance
from .migrate import LATEST_VERSION, apply_migrations, schema_version
from .pagination import CreatedBounds, Page, PageRequest
from .pings import HeartbeatChange, WritePing
from .records import (
    AccountRecord,
    AlertRecord,
    AttemptRecord,
    CheckRecord,
    EscalationPolicyRecord,
    EventRecord,
    HeartbeatRecord,
    IncidentRecord,
    IncidentUpdateRecord,
    MemberRecord,
    MonitorRecord,
    NotificationChannelRecord,
    NotificationRecord,
    PingRecord,
    StatusPageRecord,
    TokenContext,
    TokenRecord,
    WebhookDeliveryRecord,
    WebhookEndpointRecord,
)

__all__ = [
    "DATA_DIR_MODE",
    "DEFAULT_DATA_DIR",
    "LATEST_VERSION",
    "OPEN_TO_OTHERS",
    "AccountRecord",
    "AlertNotOpen",
    "AlertRecord",
    "AttemptRecord",
    "CheckRecord",
    "Connection",
    "CreatedBounds",
    "CursorNotFound",
    "Database",
    "DatabaseUnavailable",
    "EmbeddedPostgres",
    "EscalationPolicyRecord",
    "EventCause",
    "EventFilter",
    "EventRecord",
    "HeartbeatChange",
    "HeartbeatRecord",
    "IncidentRecord",
    "IncidentUpdateRecord",
    "IntegrityConflict",
    "MaintenanceSettings",
    "MemberRecord",
    "MonitorRecord",
    "NotificationChannelRecord",
    "NotificationRecord",
    "Page",
    "PageRequest",
    "PingRecord",
    "StatusChange",
    "StatusPageRecord",
    "StoreActor",
    "StoreError",
    "StoreLocation",
    "StoreSettings",
    "StoreWriter",
    "TimelineFull",
    "TokenContext",
    "TokenRecord",
    "WebhookDeliveryRecord",
    "WebhookEndpointRecord",
    "WriteCheck",
    "WritePing",
    "WriterObserver",
    "WriterStatistics",
    "accounts",
    "alerts",
    "apply_migrations",
    "check_created",
    "checks",
    "deliveries",
    "escalation_policies",
    "events",
    "has_prefix",
    "heartbeats",
    "history",
    "idempotency",
    "incidents",
    "leases",
    "maintain",
    "members",
    "monitors",
    "new_check_id",
    "new_id",
    "notification_channels",
    "notifications",
    "notify",
    "open_database",
    "open_store",
    "pings",
    "rate_limits",
    "rollups",
    "run_maintenance",
    "run_store_writer",
    "schema_version",
    "secure_data_dir",
    "start_embedded",
    "status_pages",
    "webhooks",
]
