"""Conventions shared by every request (docs/api.md, Conventions and decisions; docs/api.md,
Error codes): Request-Id and Service-Version on every response, version pinning and
override, the Content-Type rule, unreadable bodies, ids, timestamps and explicit nulls.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import pytest
import trio

from store import Database, accounts
from tests.api import Api
from tests.web.helpers import HTTP_MONITOR, assert_error, create_incident, create_monitor, expect
from web.http import versioning
from web.http.versioning import CURRENT_VERSION

if TYPE_CHECKING:
    from quart.typing import TestClientProtocol


async def test_every_response_carries_request_id_and_service_version(
    api: Api, client: TestClientProtocol
) -> None:
    with trio.fail_after(15):
        monitor = await create_monitor(api)
        other = await create_monitor(api)
        incident = await create_incident(api)
        responses: dict[str, tuple[int, Any, Any]] = {
            "200": await api.get("/monitors"),
            "201": await api.post("/monitors", json=HTTP_MONITOR),
            "204": await api.delete(f"/monitors/{other['id']}"),
            "204 incident": await api.delete(f"/incidents/{incident['id']}"),
            "200 action": await api.post(f"/monitors/{monitor['id']}/pause"),
            "400 json": await api.post(
                "/monitors", data=b"{", headers={"Content-Type": "application/json"}
            ),
            "400 query": await api.get("/monitors", query={"limit": 0}),
            "400 version": await api.get("/monitors", headers={"Service-Version": "latest"}),
            "401": await Api(client, "not-a-jwt").get("/monitors"),
            "404 object": await api.get("/monitors/mon_missing"),
            "404 route": await api.get("/nowhere"),
            "405": await api.request("PUT", "/monitors"),
            "422": await api.post("/monitors", json={}),
            "openapi": await Api(client, "").get("/openapi.json"),
        }
        seen: set[str] = set()
        for name, (status, body, headers) in responses.items():
            request_id = headers.get("Request-Id")
            assert request_id and request_id.startswith("req_"), name
            assert request_id not in seen, "Request-Id must be unique per request"
            seen.add(request_id)
            assert headers.get("Service-Version") == CURRENT_VERSION, name
            if status >= 400:
                assert body["error"]["request_id"] == request_id, name
        for name in ("204", "204 incident"):  # their headers on the wire: test_serve.py
            assert responses[name][0] == 204 and responses[name][1] is None
        for name, (status, _, headers) in responses.items():
            if status != 204:
                assert headers["Content-Type"] == "application/json", name
        assert responses["405"][2]["Allow"] == "GET, HEAD, POST"
        assert_error(responses["405"], 405, "method_not_allowed")
        assert_error(responses["404 route"], 404, "route_not_found")
        assert_error(responses["401"], 401, "invalid_token")


async def test_service_version_header_is_validated_and_echoed(api: Api) -> None:
    with trio.fail_after(10):
        status, _, headers = await api.get(
            "/monitors", headers={"Service-Version": CURRENT_VERSION}
        )
        assert status == 200 and headers["Service-Version"] == CURRENT_VERSION
        for malformed in (
            "latest",
            "2026-1-1",
            "20261120",
            "2026-13-01",
            "2026-11-32",
            "",
            "x" * 300,
        ):
            error = assert_error(
                await api.get("/monitors", headers={"Service-Version": malformed}),
                400,
                "invalid_version",
                param="Service-Version",
            )
            assert len(error["message"]) < 200
        for unknown in ("2020-01-01", "2026-11-21"):
            response = await api.get("/monitors", headers={"Service-Version": unknown})
            assert_error(response, 400, "unknown_version", param="Service-Version")
            assert response[2]["Service-Version"] == CURRENT_VERSION
        # a version error stops the request before the handler runs
        response = await api.post(
            "/monitors", json=HTTP_MONITOR, headers={"Service-Version": "1999-01-01"}
        )
        assert_error(response, 400, "unknown_version")
        assert expect(await api.get("/monitors"))["data"] == []


async def test_the_first_token_pins_the_account_version(
    api_for: Callable[..., Awaitable[Api]], db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    with trio.fail_after(10):
        older = "2025-06-01"
        monkeypatch.setattr(versioning, "KNOWN_VERSIONS", frozenset({older, CURRENT_VERSION}))
        first = await api_for(account="initech")
        account = await db.run(accounts.get_account, "initech")
        assert account is not None and account.api_version == CURRENT_VERSION
        # pretend the account was pinned when the older version was current
        await db.run(_set_pin, account.id, older)
        second = await api_for(account="initech")
        account = await db.run(accounts.get_account, "initech")
        assert account is not None and account.api_version == older, "only the first token pins"
        for client in (first, second):
            _, _, headers = await client.get("/monitors")
            assert headers["Service-Version"] == older
            _, _, headers = await client.get(
                "/monitors", headers={"Service-Version": CURRENT_VERSION}
            )
            assert headers["Service-Version"] == CURRENT_VERSION
        # another account's first token pins the current version
        fresh = await api_for(account="hooli")
        _, _, headers = await fresh.get("/monitors")
        assert headers["Service-Version"] == CURRENT_VERSION


async def _set_pin(connection: Any, account_id: str, version: str) -> None:
    await connection.execute(
        "UPDATE accounts SET api_version = $2 WHERE id = $1", account_id, version
    )


async def test_content_type_is_required_on_bodies_but_not_on_bodyless_actions(api: Api) -> None:
    with trio.fail_after(15):
        monitor = await create_monitor(api)
        incident = await create_incident(api)
        writes = [
            ("POST", "/monitors", b'{"name": "x", "url": "https://example.com/", "type": "http"}'),
            ("PATCH", f"/monitors/{monitor['id']}", b'{"name": "y"}'),
            ("POST", "/incidents", b'{"title": "x"}'),
            ("PATCH", f"/incidents/{incident['id']}", b'{"title": "y"}'),
            ("POST", f"/monitors/{monitor['id']}/pause", b"{}"),
            ("POST", f"/incidents/{incident['id']}/resolve", b'{"resolution_message": "m"}'),
        ]
        for method, path, body in writes:
            for content_type in (
                None,
                "text/plain",
                "application/x-www-form-urlencoded",
                "application/jsonx",
            ):
                headers = {} if content_type is None else {"Content-Type": content_type}
                assert_error(
                    await api.request(method, path, data=body, headers=headers),
                    400,
                    "unsupported_content_type",
                    param="Content-Type",
                )
        assert expect(await api.get(f"/monitors/{monitor['id']}")) == monitor
        assert expect(await api.get(f"/incidents/{incident['id']}")) == incident
        for method, path, body in writes:
            response = await api.request(
                method, path, data=body, headers={"Content-Type": "application/json; charset=utf-8"}
            )
            assert response[0] in (200, 201), (path, response[1])

        # pause, resume and resolve need no body, hence no Content-Type
        fresh = await create_incident(api)
        for path, expected in (
            (f"/monitors/{monitor['id']}/pause", "paused"),
            (f"/monitors/{monitor['id']}/resume", "pending"),
            (f"/incidents/{fresh['id']}/resolve", "resolved"),
        ):
            assert expect(await api.post(path))["status"] == expected
        # but a POST or PATCH of a resource needs a body
        for method, path in (("POST", "/monitors"), ("PATCH", f"/monitors/{monitor['id']}")):
            assert_error(
                await api.request(method, path, headers={"Content-Type": "application/json"}),
                400,
                "invalid_json",
            )


async def test_unreadable_bodies_are_400_and_non_objects_422(api: Api) -> None:
    with trio.fail_after(15):
        json_header = {"Content-Type": "application/json"}
        unreadable = [
            b"{",
            b"{'name': 'x'}",
            b'{"name": "x",}',
            b"\xff\xfe{}",
            b'{"interval_seconds": NaN}',
            b'{"interval_seconds": Infinity}',
            b'{"interval_seconds": 1e999}',
            b"   ",
        ]
        for body in unreadable:
            assert_error(
                await api.request("POST", "/monitors", data=body, headers=json_header),
                400,
                "invalid_json",
            )
        # too deep is said before the parser reaches the (missing) end
        assert_error(
            await api.request("POST", "/monitors", data=b"[" * 100_000, headers=json_header),
            400,
            "json_too_deep",
        )
        for body in (b"[]", b'"monitor"', b"42", b"null", b"true"):
            assert_error(
                await api.request("POST", "/incidents", data=body, headers=json_header),
                422,
                "invalid_type",
            )
        too_big = b'{"title": "' + b"x" * (1024 * 1024) + b'"}'
        assert_error(
            await api.request("POST", "/incidents", data=too_big, headers=json_header),
            400,
            "body_too_large",
        )
        assert expect(await api.get("/incidents"))["data"] == []
        assert expect(await api.get("/monitors"))["data"] == []


async def test_objects_have_prefixed_ids_integer_times_and_explicit_nulls(api: Api) -> None:
    with trio.fail_after(10):
        monitor = await create_monitor(api, type="tcp", url="db.example.com:5432")
        incident = await create_incident(api)
        for obj, prefix, nulls in (
            (monitor, "mon_", ("method", "expected_status_code", "last_checked_at")),
            (incident, "inc_", ("description", "resolved_at", "resolution_message")),
        ):
            assert obj["id"].startswith(prefix)
            for field in ("created", "updated"):
                assert type(obj[field]) is int and obj[field] > 1_600_000_000
            for field in nulls:
                assert field in obj and obj[field] is None
            assert obj["metadata"] == {}
        for path in ("/monitors", "/incidents"):
            page = expect(await api.get(path))
            assert set(page) == {"object", "data", "has_more", "url"}
            assert page["has_more"] is False and page["url"] == path
        resolved = expect(await api.post(f"/incidents/{incident['id']}/resolve"))
        assert type(resolved["resolved_at"]) is int


async def test_nul_characters_are_refused_not_a_500(api: Api) -> None:
    with trio.fail_after(10):
        monitor = await create_monitor(api)
        incident = await create_incident(api)
        nul = "a\x00b"
        for method, path, body, param in (
            ("POST", "/monitors", {**HTTP_MONITOR, "name": nul}, "name"),
            ("POST", "/monitors", {**HTTP_MONITOR, "metadata": {"k": nul}}, "metadata"),
            ("POST", "/incidents", {"title": "t", "metadata": {nul: "v"}}, "metadata"),
            ("POST", "/incidents", {"title": "t", "description": nul}, "description"),
            ("PATCH", f"/monitors/{monitor['id']}", {"name": nul}, "name"),
            ("PATCH", f"/incidents/{incident['id']}", {"title": nul}, "title"),
            (
                "POST",
                f"/incidents/{incident['id']}/resolve",
                {"resolution_message": nul},
                "resolution_message",
            ),
        ):
            assert_error(
                await api.request(method, path, json=body), 422, "invalid_value", param=param
            )
        assert_error(
            await api.get("/monitors?search=a%00b"), 400, "invalid_parameter", param="search"
        )
        assert expect(await api.get(f"/monitors/{monitor['id']}")) == monitor
        assert expect(await api.get(f"/incidents/{incident['id']}")) == incident
        # other control characters are plain text
        tab = await create_monitor(api, name="a\tb\u00e9\U0001f600")
        assert tab["name"] == "a\tb\u00e9\U0001f600"
        page = expect(await api.get("/monitors", query={"search": "\u00e9\U0001f600"}))
        assert [m["id"] for m in page["data"]] == [tab["id"]]


async def test_unknown_query_parameters_are_400_on_every_endpoint(api: Api) -> None:
    with trio.fail_after(15):
        monitor = await create_monitor(api)
        incident = await create_incident(api)
        mon, inc = f"/monitors/{monitor['id']}", f"/incidents/{incident['id']}"
        for method, path, body in (
            ("POST", "/monitors", HTTP_MONITOR),
            ("GET", mon, None),
            ("PATCH", mon, {"name": "x"}),
            ("POST", f"{mon}/pause", None),
            ("POST", f"{mon}/resume", None),
            ("GET", f"{mon}/checks", None),
            ("DELETE", mon, None),
            ("POST", "/incidents", {"title": "t"}),
            ("GET", inc, None),
            ("PATCH", inc, {"title": "x"}),
            ("POST", f"{inc}/resolve", None),
            ("DELETE", inc, None),
        ):
            assert_error(
                await api.request(method, f"{path}?expand=all", json=body),
                400,
                "unknown_parameter",
                param="expand",
            )
        # nothing was done
        assert expect(await api.get(mon)) == monitor
        assert expect(await api.get(inc)) == incident
        assert len(expect(await api.get("/monitors"))["data"]) == 1
        assert len(expect(await api.get("/incidents"))["data"]) == 1
