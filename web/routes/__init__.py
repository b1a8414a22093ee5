"""The endpoints of spec part 4, as :class:`web.http.pipeline.Route` tables."""

from .events import ROUTES as EVENT_ROUTES
from .heartbeats import ROUTES as HEARTBEAT_ROUTES
from .history import ROUTES as HISTORY_ROUTES
from .incidents import ROUTES as INCIDENT_ROUTES
from .monitors import ROUTES as MONITOR_ROUTES
from .status_pages import ROUTES as STATUS_PAGE_ROUTES
from .webhooks import ROUTES as WEBHOOK_ROUTES

ROUTES = (
    *MONITOR_ROUTES,
    *HISTORY_ROUTES,
    *INCIDENT_ROUTES,
    *EVENT_ROUTES,
    *WEBHOOK_ROUTES,
    *STATUS_PAGE_ROUTES,
    *HEARTBEAT_ROUTES,
)

__all__ = ["ROUTES"]
