"""The OpenAPI document at ``GET /openapi.json`` (docs/api.md, API reference): served
without a token, OpenAPI 3.1, every route of the table with its parameters, request body,
success and error responses, and every ``$ref`` resolvable.
"""

from __future__ import annotations

import importlib.util
import re
from typing import TYPE_CHECKING, Any

import pytest
import trio

from engine import PROBE_TYPES
from web.routes import ROUTES

if TYPE_CHECKING:
    from quart.typing import TestClientProtocol


def _refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
        return found + [r for value in node.values() for r in _refs(value)]
    if isinstance(node, list):
        return [r for value in node for r in _refs(value)]
    return []


async def _document(client: TestClientProtocol) -> dict[str, Any]:
    response = await client.get("/openapi.json")
    assert response.status_code == 200
    assert response.headers["Content-Type"].startswith("application/json")
    assert response.headers["Request-Id"].startswith("req_")
    document = await response.get_json()
    assert isinstance(document, dict)
    return document


async def test_openapi_document_describes_every_route_without_auth(
    client: TestClientProtocol,
) -> None:
    with trio.fail_after(10):
        doc = await _document(client)
        assert doc["openapi"] == "3.1.0"
        assert doc["info"]["title"] and doc["info"]["version"]
        schemas = doc["components"]["schemas"]
        assert doc["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"

        expected = {(re.sub(r"<(\w+)>", r"{\1}", r.path), r.method.lower()) for r in ROUTES}
        documented = {(path, method) for path, ops in doc["paths"].items() for method in ops}
        assert documented == expected
        # monitors 9 (checks and availability included), incidents 8 (updates included),
        # heartbeats 8, webhook endpoints 7, status pages 5, alerts 5, events 2, members 5,
        # notification channels 6 (the test send included), escalation policies 5,
        # maintenance windows 7 (end and cancel included), schedules 11 (CRUD, the calendar
        # key, overrides 3, who is on call, shifts), regions 1
        assert len(expected) == 81

        for route in ROUTES:
            op = doc["paths"][re.sub(r"<(\w+)>", r"{\1}", route.path)][route.method.lower()]
            assert op["operationId"] == route.name
            responses = op["responses"]
            assert str(route.success_status) in responses
            for status in ("400", "401", "403", "500"):
                error_schema = responses[status]["content"]["application/json"]["schema"]
                assert error_schema == {"$ref": "#/components/schemas/ErrorResponse"}
            if "<id>" in route.path:
                assert "404" in responses
                assert any(p["in"] == "path" and p["name"] == "id" for p in op["parameters"])
            if route.method in ("POST", "PATCH"):
                assert "422" in responses
            if route.request_model is not None:
                body_schema = op["requestBody"]["content"]["application/json"]["schema"]
                assert body_schema["$ref"].rsplit("/", 1)[-1] in schemas
            if route.response_model is not None:
                success = responses[str(route.success_status)]
                ref = success["content"]["application/json"]["schema"]["$ref"]
                assert ref.rsplit("/", 1)[-1] in schemas
            assert op["security"] == [{"bearer": []}]
            needed = (route.permission,) if isinstance(route.permission, str) else route.permission
            assert all(p in op["description"] for p in needed)
            query = {p["name"] for p in op["parameters"] if p["in"] == "query"}
            assert query == {name for name, _, _ in route.query}

        monitors = doc["paths"]["/monitors"]
        assert monitors["post"]["requestBody"]["required"] is True
        assert {"limit", "starting_after", "ending_before", "status", "type", "search", "sort"} <= {
            p["name"] for p in monitors["get"]["parameters"]
        }
        create = schemas[
            monitors["post"]["requestBody"]["content"]["application/json"]["schema"]["$ref"].rsplit(
                "/", 1
            )[-1]
        ]
        assert set(create["required"]) == {"name", "url", "type"}
        # the monitor types, from the one list of them, in its order
        assert create["properties"]["type"]["enum"] == list(PROBE_TYPES)
        [list_type] = [p for p in monitors["get"]["parameters"] if p["name"] == "type"]
        assert list_type["schema"]["enum"] == list(PROBE_TYPES)
        assert create["additionalProperties"] is False
        assert create["properties"]["name"]["maxLength"] == 200
        assert {"error"} == set(schemas["ErrorResponse"]["required"])

        for ref in _refs(doc):
            assert ref.startswith("#/components/schemas/")
            assert ref.rsplit("/", 1)[-1] in schemas, ref


@pytest.mark.skipif(
    importlib.util.find_spec("openapi_spec_validator") is None,
    reason="openapi-spec-validator is not installed",
)
async def test_openapi_document_passes_the_spec_validator(client: TestClientProtocol) -> None:
    import openapi_spec_validator

    with trio.fail_after(10):
        openapi_spec_validator.validate(await _document(client))


_INTERNAL = re.compile(
    r"\bspec\b|\bissues?\b|\bextensions?\b|\bpart \d|\bDESIGN\b|\bREADME\b|\bmigration|"
    r"\bengine\b|\bstore\b|\bactor|pydantic|\bmodel_|\bAbsent\b|SkipJsonSchema|__|``|"
    r":(?:mod|func|class|data|meth):|\bweb\.|\bInput should\b",
    re.IGNORECASE,
)
"""What an API reader cannot follow: the project's own documents and their numbering
(section numbers of documents outside the repository, an issue), its internals (engine,
store, actors, migrations, module names, Sphinx roles, RST's double backticks) and
pydantic's."""


def _texts(node: Any, where: str = "") -> list[tuple[str, str]]:
    """Every description, summary and title in ``node`` with its JSON path."""
    if isinstance(node, dict):
        found = [
            (f"{where}/{key}", value)
            for key, value in node.items()
            if key in ("description", "summary", "title") and isinstance(value, str)
        ]
        return found + [t for key, value in node.items() for t in _texts(value, f"{where}/{key}")]
    if isinstance(node, list):
        return [t for i, value in enumerate(node) for t in _texts(value, f"{where}/{i}")]
    return []


async def test_openapi_descriptions_are_for_api_readers(client: TestClientProtocol) -> None:
    with trio.fail_after(10):
        doc = await _document(client)
    texts = _texts(doc)
    assert len(texts) > 300
    internal = {text: where for where, text in texts if _INTERNAL.search(text)}
    assert not internal, "\n".join(f"{w}: {t}" for t, w in internal.items())
    schemas = doc["components"]["schemas"]
    for name, schema in schemas.items():
        assert re.fullmatch(r"[A-Z][A-Za-z]+", name), name  # no module-qualified names
        assert schema.get("description"), f"{name} has no description"
        for field, prop in schema.get("properties", {}).items():
            # pydantic's generated titles ("Tls Expires At") say nothing the name does not
            assert "title" not in prop, (name, field, prop["title"])
    for path, operations in doc["paths"].items():
        for method, operation in operations.items():
            assert operation["summary"] and operation["description"], (path, method)
            assert operation["tags"], (path, method)
    tagged = {t for ops in doc["paths"].values() for op in ops.values() for t in op["tags"]}
    assert tagged == {t["name"] for t in doc["tags"]}
    assert all(t["description"] for t in doc["tags"])
    assert "/docs" in doc["info"]["description"]
