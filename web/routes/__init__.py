"""The API's endpoints (docs/api.md, "API reference"): one module per resource, each
declaring its :class:`~web.routes.resource.Resource` as ``RESOURCE``, registered by one
line in :data:`RESOURCES` (docs/development.md, "Adding an API resource").

The tables the rest of the service reads are derived from :data:`RESOURCES` here, once,
at import time: :data:`ROUTES` (served by ``web.process.app.create_app`` and documented
by :mod:`web.routes.openapi`) and :data:`PERMISSIONS`.
"""

from . import (
    alerts,
    badge_keys,
    escalation_policies,
    events,
    heartbeats,
    history,
    incidents,
    maintenance_windows,
    members,
    monitors,
    notification_channels,
    regions,
    schedules,
    status_pages,
    webhooks,
)
from .resource import Resource, permissions_of, routes_of

RESOURCES: tuple[Resource, ...] = (
    monitors.RESOURCE,
    history.RESOURCE,
    badge_keys.RESOURCE,
    incidents.RESOURCE,
    events.RESOURCE,
    webhooks.RESOURCE,
    status_pages.RESOURCE,
    heartbeats.RESOURCE,
    members.RESOURCE,
    notification_channels.RESOURCE,
    escalation_policies.RESOURCE,
    schedules.RESOURCE,
    alerts.RESOURCE,
    maintenance_windows.RESOURCE,
    regions.RESOURCE,
)
"""Every API resource, in the order of the route table and of the OpenAPI document."""

ROUTES = routes_of(RESOURCES)
"""Every endpoint of the API, as :class:`web.http.pipeline.Route` entries."""

PERMISSIONS = permissions_of(RESOURCES)
"""The permission strings a token may hold, each namespace's ``read``, ``create``,
``update`` and ``delete`` in the order of :data:`RESOURCES` (a namespace several resources
share, ``on_call``, listed once, where it first appears) (``--permissions all`` grants
them all: docs/operations.md, "Command line"; what each needs: the OpenAPI document)."""

__all__ = ["PERMISSIONS", "RESOURCES", "ROUTES", "Resource"]
