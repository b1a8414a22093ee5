"""The OpenAPI 3.1 document, generated from the route table and the pydantic models.

Served at ``GET /openapi.json`` without authentication. Every path, parameter, request
body, response body and the error shape come from the same objects the server runs on,
so the document cannot drift from the code.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, get_args

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from .errors import CODES
from .models import ErrorResponse, IncidentStatus, MonitorStatus, MonitorType, Severity
from .pipeline import Route
from .versioning import CURRENT_VERSION, KNOWN_VERSIONS

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
        "description": "Requests allowed in the most constraining window (spec 8).",
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
        "the same Idempotency-Key (spec 4.5).",
    }
}
_CURSOR_PREFIXES = {
    "list_monitors": "mon",
    "list_incidents": "inc",
    "list_checks": "chk",
    "list_status_pages": "stp",
    "list_heartbeats": "hbt",
    "list_pings": "png",
}
_QUERY_SCHEMAS: dict[tuple[str, str], dict[str, Any]] = {
    ("list_monitors", "status"): {"enum": list(get_args(MonitorStatus))},
    ("list_monitors", "type"): {"enum": list(get_args(MonitorType))},
    ("list_monitors", "search"): {"minLength": 1, "maxLength": 200},
    ("list_monitors", "sort"): {"pattern": "^-?(created|updated|name)$"},
    ("list_incidents", "status"): {"enum": list(get_args(IncidentStatus))},
    ("list_incidents", "severity"): {"enum": list(get_args(Severity))},
    ("list_incidents", "sort"): {"pattern": "^-?(created|updated|title)$"},
    ("list_status_pages", "sort"): {"pattern": "^-?(created|updated|name)$"},
    ("list_webhook_endpoints", "sort"): {"pattern": "^-?created$"},
    ("list_webhook_deliveries", "status"): {"enum": ["pending", "succeeded", "failed"]},
    ("get_availability", "granularity"): {"enum": ["hour", "day"]},
    ("list_heartbeats", "status"): {"enum": ["pending", "up", "down", "paused"]},
    ("list_heartbeats", "sort"): {"pattern": "^-?(created|updated|name)$"},
    ("list_pings", "kind"): {"enum": ["success", "fail", "start"]},
    # ASCII, 1-100 characters, a * only at the end (web/routes/events.py)
    ("list_events", "type"): {
        "minLength": 1,
        "maxLength": 100,
        "pattern": "^[\\x00-\\x29\\x2b-\\x7f]{0,99}\\*?$",
    },
}
"""What the query parameters accept beyond their JSON type (web/params.py parses them)."""
_CREATED_LINKS = {
    "create_monitor": (
        "get_monitor",
        "update_monitor",
        "delete_monitor",
        "pause_monitor",
        "resume_monitor",
        "list_checks",
    ),
    "create_incident": ("get_incident", "update_incident", "delete_incident", "resolve_incident"),
    "create_heartbeat": (
        "get_heartbeat",
        "update_heartbeat",
        "delete_heartbeat",
        "pause_heartbeat",
        "resume_heartbeat",
        "list_pings",
    ),
}
"""OpenAPI links from a create to the operations on the created object (stateful tests).
None from status pages: their slug is unique over the service, so against the one live
server of the stateful test a replayed create fails (``slug_taken``) where it first
succeeded, and hypothesis refuses the run as flaky."""


def _path(route: Route) -> str:
    return re.sub(r"<(\w+)>", r"{\1}", route.path)


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
    if "<id>" in route.path:
        parameters.append(
            {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}
        )
    for name, kind, description in route.query:
        schema: dict[str, Any] = {"type": kind}
        if name == "limit":
            schema.update(minimum=1, maximum=100, default=10)
        if name in ("starting_after", "ending_before") and route.name in _CURSOR_PREFIXES:
            schema["pattern"] = f"^{_CURSOR_PREFIXES[route.name]}_[a-z0-9]{{1,64}}$"
        if name.startswith("created["):  # epoch seconds, as web/params.py reads them
            schema.update(minimum=0, maximum=99_999_999_999)
        schema.update(_QUERY_SCHEMAS.get((route.name, name), {}))
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
    if route.name in _CREATED_LINKS:
        success["links"] = {
            target: {"operationId": target, "parameters": {"id": "$response.body#/id"}}
            for target in _CREATED_LINKS[route.name]
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
    keys, definitions = models_json_schema([(m, "validation") for m in models], ref_template=_REF)
    names = {m: keys[(m, "validation")]["$ref"].rsplit("/", 1)[-1] for m in models}
    paths: dict[str, dict[str, Any]] = {}
    for route in routes:
        paths.setdefault(_path(route), {})[route.method.lower()] = _operation(route, names)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Uptrio",
            "version": CURRENT_VERSION,
            "description": "Uptime monitoring and incident API.",
        },
        "servers": [{"url": "/"}],
        "paths": paths,
        "components": {
            "schemas": definitions.get("$defs", {}),
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"}
            },
        },
    }
