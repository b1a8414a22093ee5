"""The registry of API resources (docs/development.md, "Adding an API resource"): every
route lies under the resource that declares it and needs one of its permissions, every
id the routes mint has a registered prefix, and the OpenAPI document's cursor patterns
and groups are the registry's. Pure checks of the declarations, but for the last test,
which asks every list whether it takes the cursors the document names.
"""

from __future__ import annotations

import ast
import re
from dataclasses import replace
from pathlib import Path

import trio

import web.routes
from store import has_prefix, new_id
from tests.api import Api
from tests.web.helpers import assert_error
from web.routes import PERMISSIONS, RESOURCES, ROUTES, Resource
from web.routes.openapi import cursor_pattern, openapi_document
from web.routes.resource import ACTIONS

ROUTES_DIR = Path(web.routes.__file__).parent

NON_RESOURCE_PATHS: frozenset[str] = frozenset()
"""Pipeline routes that belong to no resource (none yet): a route added here is served
and documented without a resource's noun, prefix or permissions."""


def _by_path() -> dict[str, Resource]:
    """One declaration per resource path; the parts of a resource that spans modules
    (the monitors and their history) are equal but for their routes."""
    found: dict[str, Resource] = {}
    for resource in RESOURCES:
        first = found.setdefault(resource.path, resource)
        assert replace(first, routes=()) == replace(resource, routes=()), resource.path
    return found


def _owner(path: str) -> Resource | None:
    """The resource whose path ``path`` is or lies under (the first part of one that
    spans modules)."""
    for resource in _by_path().values():
        if path == resource.path or path.startswith(resource.path + "/"):
            return resource
    return None


def test_every_route_lies_under_the_resource_that_declares_it() -> None:
    assert tuple(route for r in RESOURCES for route in r.routes) == ROUTES
    for resource in RESOURCES:
        for route in resource.routes:
            assert route.path.startswith("/"), route.name
            owner = _owner(route.path)
            assert (owner is not None and owner.path == resource.path) or (
                route.path in NON_RESOURCE_PATHS
            ), f"{route.method} {route.path} ({route.name}) is declared by {resource.path}"
    assert len({r.name for r in ROUTES}) == len(ROUTES), "route names are operation ids"
    assert len({(r.method, r.path) for r in ROUTES}) == len(ROUTES)


SHARED_NAMESPACES = frozenset({"on_call"})
"""Permission namespaces several resources share on purpose (the spec's "On-Call":
members, notification channels, escalation policies, alerts; docs/alerts.md); any other
namespace declared twice is a copy-paste slip."""


def test_resources_do_not_share_a_path_prefix_noun_or_permission() -> None:
    resources = list(_by_path().values())
    for field in ("prefix", "noun", "segment"):
        values = [getattr(r, field) for r in resources]
        assert len(set(values)) == len(values), (field, values)
    namespaces = [r.permission for r in resources if r.permission is not None]
    repeated = {n for n in namespaces if namespaces.count(n) > 1}
    assert repeated <= SHARED_NAMESPACES, repeated
    for resource in resources:
        if resource.prefix:  # "": no ids (regions)
            assert resource.prefix.isascii() and resource.prefix.isalpha(), resource.prefix
        assert resource.tag and resource.description, resource.path


def test_a_shared_namespace_is_listed_once_where_it_first_appears() -> None:
    first_seen = list(dict.fromkeys(r.permission for r in RESOURCES if r.permission))
    assert tuple(f"{n}.{a}" for n in first_seen for a in ACTIONS) == PERMISSIONS
    assert len(set(PERMISSIONS)) == len(PERMISSIONS)
    shared = [r.path for r in RESOURCES if r.permission == "on_call"]
    assert shared[:3] == ["/members", "/notification-channels", "/escalation-policies"]


def test_every_route_needs_a_permission_of_its_resource() -> None:
    assert (
        tuple(dict.fromkeys(p for r in _by_path().values() for p in r.permissions)) == PERMISSIONS
    )
    for resource in RESOURCES:
        for route in resource.routes:
            needed = (route.permission,) if isinstance(route.permission, str) else route.permission
            assert needed, f"{route.name} needs a permission"
            if resource.permission is not None:
                assert set(needed) <= set(resource.permissions), route.name
            else:  # events: the read permission of another resource
                assert set(needed) <= {p for p in PERMISSIONS if p.endswith(".read")}, route.name


def _new_id_arguments() -> list[tuple[str, ast.expr]]:
    calls = []
    for path in sorted(ROUTES_DIR.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "new_id"
            ):
                calls.append((f"{path.name}:{node.lineno}", node.args[0]))
    return calls


def test_every_id_the_routes_mint_has_a_registered_prefix() -> None:
    prefixes = {r.prefix for r in RESOURCES if r.prefix}
    for prefix in prefixes:  # the store mints only the prefixes it knows (store/ids.py)
        assert has_prefix(new_id(prefix), prefix), prefix
    calls = _new_id_arguments()
    # events and alerts are minted by the store; regions have no ids
    assert len(calls) >= len(_by_path()) - 3
    for where, argument in calls:
        if isinstance(argument, ast.Constant):
            assert argument.value in prefixes, f"{where}: new_id({argument.value!r}) is not a "
            "registered resource's prefix (web.routes.RESOURCES)"
        else:  # the module's own declaration: new_id(RESOURCE.prefix)
            assert ast.unparse(argument) == "RESOURCE.prefix", f"{where}: {ast.unparse(argument)}"


def test_the_openapi_cursor_patterns_and_groups_are_the_registrys() -> None:
    document = openapi_document(ROUTES)
    patterns = {}
    for route in ROUTES:
        path = re.sub(r"<(\w+)>", r"{\1}", route.path)
        operation = document["paths"][path][route.method.lower()]
        for parameter in operation["parameters"]:
            if parameter["name"] in ("starting_after", "ending_before"):
                patterns[(route.name, parameter["name"])] = parameter["schema"].get("pattern")
        owner = _owner(route.path)
        assert owner is not None
        assert operation["tags"] == [owner.tag], route.name
    for route in ROUTES:
        if ("starting_after", "string", "Cursor: objects after this id.") not in route.query:
            assert route.cursor is None, f"{route.name} is not a list but has a cursor"
            continue
        expected = None if route.cursor is None else cursor_pattern(route.cursor)
        assert patterns[(route.name, "starting_after")] == expected, route.name
        assert patterns[(route.name, "ending_before")] == expected, route.name
        owner = _owner(route.path)
        if owner is not None and route.path == owner.path and route.cursor is not None:
            # a resource's own list pages through its own ids
            assert route.cursor == owner.prefix, route.name
    tags = {t["name"]: t["description"] for t in document["tags"]}
    assert tags == {r.tag: r.description for r in RESOURCES}


def test_the_documents_id_list_names_every_prefix() -> None:
    text = openapi_document(ROUTES)["info"]["description"]
    for resource in RESOURCES:
        assert not resource.prefix or f"`{resource.prefix}_`" in text, resource.prefix


def test_query_schemas_and_links_name_what_exists() -> None:
    """A misspelt parameter or operation would drop out of the document silently."""
    names = {route.name for route in ROUTES}
    for route in ROUTES:
        assert set(route.query_schema) <= {name for name, _, _ in route.query}, route.name
        assert set(route.links) <= names, route.name
        if route.links:
            assert route.method == "POST" and route.success_status == 201, route.name


async def test_every_list_takes_the_cursors_its_document_names(api: Api) -> None:
    """The pattern the OpenAPI document gives a list's cursors (its route's ``cursor``) is
    the prefix its handler checks: an id of another prefix is refused naming that one.
    A list of objects under another (``/monitors/<id>/checks``) is asked with a
    well-formed id of its parent, which the cursor check comes before."""
    lists = [r for r in ROUTES if r.method == "GET" and r.cursor is not None]
    assert len(lists) >= len(_by_path()) - 3  # events and webhooks document no pattern yet
    with trio.fail_after(20):
        for route in lists:
            owner = _owner(route.path)
            assert owner is not None
            path = route.path.replace("<id>", f"{owner.prefix}_{'a' * 24}")
            for name in ("starting_after", "ending_before"):
                response = await api.get(path, query={name: "zz_1"})
                error = assert_error(response, 400, "cursor_not_found", param=name)
                assert f"the id of a {route.cursor}_ object" in error["message"], route.name
