"""The OpenAPI 3.1 document, generated from the route table and the pydantic models.

Served at ``GET /openapi.json`` without authentication, and shown by the viewer at
``/docs`` (:mod:`web.public.docs`). Every path, parameter, request body, response body and the
error shape come from the same objects the server runs on, so the document cannot drift
from the code.

Its texts are for a reader of the API (docs/api.md, "API reference"): the models' docstrings
and field descriptions become the schemas' descriptions, so they say what a field means
to a client, never which spec part, issue or module a rule comes from (their modules'
docstrings say that); pydantic's generated field titles are left out.
tests/web/test_openapi.py walks the whole document for such references.

What is particular to a resource comes from its declaration (docs/development.md,
"Adding an API resource"): operations are grouped by resource (its ``tag`` and
``description``: :class:`web.routes.resource.Resource`), and each route says what its
query parameters accept beyond their type (``query_schema``), the pattern of its cursors
(``cursor``) and, for a create, the operations linked from the new object's id
(``links``): :class:`web.http.pipeline.Route`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema, models_json_schema
from pydantic_core import core_schema

from ..api.common import ErrorResponse
from ..http.errors import CODES
from ..http.pipeline import Route
from ..http.versioning import CURRENT_VERSION, KNOWN_VERSIONS
from . import RESOURCES
from .resource import tags_of

_REF = "#/components/schemas/{model}"
_ERROR = {
    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorResponse"}}}
}
_HEADERS = {
    "Request-Id": {"schema": {"type": "string", "pattern": "^req_"}},
    "Service-Version": {"schema": {"type": "string"}},
}
_RATE_HEADERS = {
    "X-RateLimit-Limit": {
        "schema": {"type": "integer", "minimum": 1},
        "description": "Requests allowed in the most constraining window (per token or per "
        "account, per minute or per hour).",
    },
    "X-RateLimit-Remaining": {
        "schema": {"type": "integer", "minimum": 0},
        "description": "Requests left in that window.",
    },
    "X-RateLimit-Reset": {
        "schema": {"type": "integer"},
        "description": "Epoch second when the oldest request counted there stops counting.",
    },
}
_RETRY_AFTER = {
    "Retry-After": {
        "schema": {"type": "integer", "minimum": 1},
        "description": "Seconds to wait before retrying.",
    }
}
_REPLAYED = {
    "Idempotent-Replayed": {
        "schema": {"type": "string", "enum": ["true"]},
        "description": "Present when the response is the replay of an earlier request with "
        "the same Idempotency-Key.",
    }
}
_TAGS = tags_of(RESOURCES)
"""Operation groups by a path's first segment: (name, description), from each
resource's declaration (:class:`web.routes.resource.Resource`)."""

_INFO = """Uptime monitoring and incident API: monitors that check http, tcp, dns and \
ping targets, their checks and availability; incidents, opened by hand or by monitors; \
events and signed webhooks; public status pages; heartbeats for jobs that call in.

**Authentication.** Every operation takes a bearer token, `Authorization: Bearer \
<token>` (`uptrio tokens create` makes one). Each operation says the permission it \
needs. A token sees its own account only: another account's object is a 404.

**Versions.** `Service-Version: YYYY-MM-DD` picks the API version of a request; without \
it the account's pinned version answers. Every response says which one did.

**Objects.** Ids start with their type (`mon_`, `inc_`, `chk_`, `evt_`, `we_`, `stp_`, \
`hbt_`, `mbr_`, `nch_`, `esc_`, `alt_`, `ntf_`, `mnt_`, `sch_`, `ovr_`); every object has \
an `object` field. \
Times are epoch seconds (`created`, `updated`, `..._at`); durations say their unit \
(`..._seconds`, `..._ms`). `metadata` holds up to 50 string keys (1 to 40 characters) of \
string values (up to 500); a PATCH sets the keys it sends, removes those sent as `""` and \
keeps the others.

**Lists.** `{"object": "list", "data": [...], "has_more": ..., "url": ...}`, newest first \
unless said otherwise; `limit` (1 to 100, default 10), and `starting_after` or \
`ending_before` with the id of an object of the list to page through it.

**Errors.** `{"error": {"type", "code", "message", "param", "request_id"}}`: `code` is \
stable (each response lists its codes), `param` names the field at fault, and \
`request_id` (also the `Request-Id` header) identifies the request for support.

**Retries.** A POST sent again with the same `Idempotency-Key` within 24 hours gets the \
first response back (`Idempotent-Replayed: true`). Rate limits apply per token and per \
account; a 429 says in `Retry-After` how many seconds to wait.

This reference is served by the service at `/docs`; the document itself is \
`/openapi.json`."""


class _Schemas(GenerateJsonSchema):
    """Pydantic's JSON schemas without the titles it makes up from field names
    (``"Tls Expires At"``): the property's name says as much."""

    def field_title_should_be_set(
        self, schema: core_schema.CoreSchema | core_schema.ModelField | Any
    ) -> bool:
        return False


def cursor_pattern(prefix: str) -> str:
    """The pattern of a list's ``starting_after`` and ``ending_before`` whose objects'
    ids start with ``prefix`` (:attr:`web.http.pipeline.Route.cursor`)."""
    return f"^{prefix}_[a-z0-9]{{1,64}}$"


def _path(route: Route) -> str:
    return re.sub(r"<(\w+)>", r"{\1}", route.path)


def _tag(route: Route) -> str:
    segment = route.path.split("/")[1]
    return _TAGS.get(segment, (segment.replace("-", " ").capitalize(), ""))[0]


def _error_statuses(route: Route) -> list[int]:
    statuses = [400, 500]
    if route.permission is not None:
        statuses += [401, 403, 429]
    if "<id>" in route.path:
        statuses.append(404)
    if route.method in ("POST", "PATCH"):
        statuses.append(422)
    if route.method == "POST":
        statuses.append(409)
    return sorted(statuses)


def _operation(route: Route, names: dict[type[BaseModel], str]) -> dict[str, Any]:
    parameters: list[dict[str, Any]] = []
    for name in re.findall(r"<(\w+)>", route.path):  # <id>, and a sub-object's <override_id>
        parameters.append(
            {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
        )
    for name, kind, description in route.query:
        schema: dict[str, Any] = {"type": kind}
        if name == "limit":
            schema.update(minimum=1, maximum=100, default=10)
        if name in ("starting_after", "ending_before") and route.cursor is not None:
            schema["pattern"] = cursor_pattern(route.cursor)
        if name.startswith("created["):  # epoch seconds, as web/http/params.py reads them
            schema.update(minimum=0, maximum=99_999_999_999)
        schema.update(route.query_schema.get(name, {}))
        parameters.append(
            {
                "name": name,
                "in": "query",
                "required": False,
                "schema": schema,
                "description": description,
            }
        )
    parameters.append(
        {
            "name": "Service-Version",
            "in": "header",
            "required": False,
            "schema": {"type": "string", "enum": sorted(KNOWN_VERSIONS)},
            "description": f"API version; the account's pinned version by default "
            f"(current: {CURRENT_VERSION}).",
        }
    )
    if route.method == "POST":
        parameters.append(
            {
                "name": "Idempotency-Key",
                "in": "header",
                "required": False,
                "schema": {"type": "string", "maxLength": 255, "pattern": "^[ -~]*[!-~][ -~]*$"},
                "description": "A UUID v4 is recommended (any printable text is accepted); "
                "a retry with the same key within 24 hours replays the response.",
            }
        )
    headers: dict[str, Any] = dict(_HEADERS)
    if route.permission is not None:
        headers.update(_RATE_HEADERS)
    success: dict[str, Any] = {"description": route.summary, "headers": headers}
    if route.method == "POST":
        success["headers"] = {**headers, **_REPLAYED}
    if route.links:
        success["links"] = {
            target: {"operationId": target, "parameters": {"id": "$response.body#/id"}}
            for target in route.links
        }
    if route.response_model is not None:
        success["content"] = {
            "application/json": {"schema": {"$ref": _REF.format(model=names[route.response_model])}}
        }
    responses: dict[str, Any] = {str(route.success_status): success}
    for status in _error_statuses(route):
        codes = sorted(c for c, (s, _) in CODES.items() if s == status)
        error_headers: dict[str, Any] = dict(_HEADERS if status == 401 else headers)
        if status in (409, 429):
            error_headers.update(_RETRY_AFTER)
        responses[str(status)] = {
            "description": "Error; codes: " + ", ".join(codes) if codes else "Error",
            "headers": error_headers,
            **_ERROR,
        }
    operation: dict[str, Any] = {
        "operationId": route.name,
        "tags": [_tag(route)],
        "summary": route.summary,
        "parameters": parameters,
        "responses": responses,
    }
    if route.permission is not None:
        operation["security"] = [{"bearer": []}]
        needed = (route.permission,) if isinstance(route.permission, str) else route.permission
        operation["description"] = (
            "Requires the permission " + " or ".join(f"`{p}`" for p in needed) + "."
        )
    if route.request_model is not None:
        operation["requestBody"] = {
            "required": route.name not in ("resolve_incident",),
            "content": {
                "application/json": {
                    "schema": {"$ref": _REF.format(model=names[route.request_model])}
                }
            },
        }
    return operation


def openapi_document(routes: Sequence[Route]) -> dict[str, Any]:
    """The OpenAPI 3.1 document of ``routes``."""
    models: list[type[BaseModel]] = [ErrorResponse]
    for route in routes:
        for model in (route.request_model, route.response_model):
            if model is not None and model not in models:
                models.append(model)
    keys, definitions = models_json_schema(
        [(m, "validation") for m in models], ref_template=_REF, schema_generator=_Schemas
    )
    names = {m: keys[(m, "validation")]["$ref"].rsplit("/", 1)[-1] for m in models}
    paths: dict[str, dict[str, Any]] = {}
    for route in routes:
        paths.setdefault(_path(route), {})[route.method.lower()] = _operation(route, names)
    tags: dict[str, str] = {}
    for route in routes:
        name = _tag(route)
        described = {tag: text for tag, text in _TAGS.values()}
        tags.setdefault(name, described.get(name) or f"The {name.lower()} endpoints.")
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Uptrio",
            "version": CURRENT_VERSION,
            "description": _INFO,
        },
        "servers": [{"url": "/"}],
        "tags": [{"name": name, "description": text} for name, text in tags.items()],
        "paths": paths,
        "components": {
            "schemas": definitions.get("$defs", {}),
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"}
            },
        },
    }
