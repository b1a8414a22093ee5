"""One declaration per API resource (docs/development.md, "Adding an API resource").

Each routes module declares its resource as ``RESOURCE``: the collection's path, the
noun its 404 names, its ids' prefix, its permission namespace, its group in the OpenAPI
document, and its routes. ``web.routes.RESOURCES`` registers them, and everything that
used to be a list kept by hand is derived from that one tuple at import time: the route
table (``web.routes.ROUTES``), the permissions a token may hold
(``web.routes.PERMISSIONS``: docs/operations.md, "Command line", ``--permissions all``),
the OpenAPI document's tags (docs/api.md, "API reference"). The message of a 404 for an
unknown id and the cursor patterns of the OpenAPI document need no table: the first
reads the resource it is given (:func:`web.routes.common.not_found`), the second each
list route's ``cursor`` (:class:`web.http.pipeline.Route`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..http.pipeline import Route

ACTIONS = ("read", "create", "update", "delete")
"""The actions of a resource's permissions, in the order ``--permissions all`` and the
command line's messages list them: ``monitors.read``, ``monitors.create``, ..."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Resource:
    """One API resource.

    Attributes:
        path: the collection's path, ``/monitors``; every route's path is it or lies
            under it (``/monitors/<id>/checks``).
        noun: what a 404 calls one object: ``no such monitor: 'mon_x'``.
        prefix: its ids' prefix without the underscore (``mon``), given to
            ``store.new_id`` and checked on every ``<id>`` of a path; ``""`` for a
            resource whose objects have no id and no ``<id>`` route (regions: known by
            name).
        permission: its permission namespace (``monitors``: ``monitors.read``,
            ``.create``, ``.update``, ``.delete``); None for a resource that has none
            of its own (events are read with the read permission of their resource).
            Several resources may share one namespace (``on_call``: members,
            notification channels, escalation policies, alerts; docs/alerts.md): the
            permission list names it once, where it first appears.
        tag: the name of its group of operations in the OpenAPI document (``Monitors``).
        description: the group's description there, for a reader of the API.
        routes: its endpoints, in the order the OpenAPI document lists them.

    A resource whose endpoints span two modules registers each module's declaration,
    equal but for ``routes`` (the history of a monitor: ``web.routes.history``).
    """

    path: str
    noun: str
    prefix: str
    permission: str | None
    tag: str
    description: str
    routes: tuple[Route, ...]

    @property
    def permissions(self) -> tuple[str, ...]:
        """Its permission strings (:data:`ACTIONS` in its namespace); none without one."""
        if self.permission is None:
            return ()
        return tuple(f"{self.permission}.{action}" for action in ACTIONS)

    @property
    def segment(self) -> str:
        """The first segment of its path (``monitors``, ``webhook-endpoints``)."""
        return self.path.strip("/").split("/")[0]


def routes_of(resources: Iterable[Resource]) -> tuple[Route, ...]:
    """Every route of ``resources``, in their order."""
    return tuple(route for resource in resources for route in resource.routes)


def permissions_of(resources: Iterable[Resource]) -> tuple[str, ...]:
    """Every permission of ``resources``, each once, in their order."""
    return tuple(dict.fromkeys(p for resource in resources for p in resource.permissions))


def tags_of(resources: Iterable[Resource]) -> dict[str, tuple[str, str]]:
    """The OpenAPI group of each resource by the first segment of its path:
    ``{"monitors": ("Monitors", description)}``."""
    return {r.segment: (r.tag, r.description) for r in resources}
