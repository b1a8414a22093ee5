"""The OpenAPI 3.1 document, generated from the route table and the pydantic models.

Served at ``GET /openapi.json`` without authentication. Every path, parameter, request
body, response body and the error shape come from the same objects the server runs on,
so the document cannot drift from the code.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from .errors import CODES
from .models import ErrorResponse
from .pipeline import Route
from .versioning import CURRENT_VERSION

_REF = "#/components/schemas/{model}"
_ERROR = {
    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorResponse"}}}
}
_HEADERS = {
    "Request-Id": {"schema": {"type": "string", "pattern": "^req_"}},
    "Service-Version": {"schema": {"type": "string"}},
}


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
            "schema": {"type": "string", "pattern": r"^\d{4}-\d{2}-\d{2}$"},
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
                "schema": {"type": "string", "maxLength": 255},
                "description": "A UUID v4; a retry with the same key replays the response.",
            }
        )
    success: dict[str, Any] = {"description": route.summary, "headers": _HEADERS}
    if route.response_model is not None:
        success["content"] = {
            "application/json": {"schema": {"$ref": _REF.format(model=names[route.response_model])}}
        }
    responses: dict[str, Any] = {str(route.success_status): success}
    for status in _error_statuses(route):
        codes = sorted(c for c, (s, _) in CODES.items() if s == status)
        responses[str(status)] = {
            "description": "Error; codes: " + ", ".join(codes) if codes else "Error",
            "headers": _HEADERS,
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
        operation["description"] = f"Requires the permission `{route.permission}`."
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
