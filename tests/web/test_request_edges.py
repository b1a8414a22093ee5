"""Rough edges of request input, each with its own answer (docs/api.md, Hostile input and
Conventions and decisions):

- validation messages are Uptrio's words, not pydantic's (``Input should be a valid
  integer``);
- a body nested too deep is 400 ``json_too_deep``, not "not valid JSON";
- a JSON object with a key twice is 400 ``duplicate_key`` (two parsers could disagree
  on which value wins);
- ``sort=`` (empty) and a query value that is not UTF-8 (``search=%FF``) are 400
  ``invalid_parameter`` naming the parameter;
- an ``Idempotency-Key`` may be any printable text, ``ключ`` included (docs/api.md,
  Idempotency keys);
- the rate limits (docs/api.md, Rate limits) are operator settings (``uptrio serve`` flags);
- NUL (U+0000) is refused in every query parameter (``/events?type=%00`` was a 500), path
  id and header, never reaching Postgres;
- no message shows pydantic's internals (``interval_seconds.constrained-int``).
"""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING, Any

import pytest
import trio
from pydantic import ValidationError

from tests.api import Api, MakeToken
from tests.web.helpers import HTTP_MONITOR, assert_error, create_monitor, expect
from web.api.heartbeats import HeartbeatUpdate
from web.api.incidents import IncidentCreate, IncidentUpdate
from web.api.monitors import MonitorCreate, MonitorUpdate
from web.http.deps import Dependencies
from web.http.errors import ApiError
from web.http.idempotency import parse_key
from web.http.json_body import MAX_JSON_DEPTH
from web.process.app import create_app
from web.process.cli import build_parser
from web.process.cli.serve_flags import service_settings
from web.routes import ROUTES

if TYPE_CHECKING:
    from quart.typing import TestClientProtocol

JSON = {"Content-Type": "application/json"}


async def _post(api: Api, path: str, data: bytes) -> tuple[int, Any, Any]:
    return await api.request("POST", path, data=data, headers=JSON)


INVALID_FIELDS: list[tuple[str, Any]] = [
    ("interval_seconds", "60"),
    ("interval_seconds", 1.5),
    ("interval_seconds", True),
    ("interval_seconds", 0),
    ("interval_seconds", 86_401),
    ("timeout_seconds", None),
    ("name", 5),
    ("name", ""),
    ("name", "n" * 201),
    ("url", ["https://example.com/"]),
    ("type", "ftp"),
    ("method", "get"),
    ("expected_status_code", 99),
    ("failure_threshold", 11),
    ("metadata", "k=v"),
    ("metadata", {"k": 1}),
    ("surprise", 1),
]


def _pydantic_message(model: Any, data: dict[str, Any]) -> str:
    with pytest.raises(ValidationError) as caught:
        model.model_validate(data)
    return str(caught.value.errors(include_url=False)[0]["msg"])


async def test_validation_messages_are_worded_by_uptrio_not_by_pydantic(api: Api) -> None:
    with trio.fail_after(20):
        leaked = []
        for field, value in INVALID_FIELDS:
            data = {**HTTP_MONITOR, field: value}
            status, body, _ = await api.post("/monitors", json=data)
            assert status == 422, (field, value, body)
            message = body["error"]["message"]
            assert body["error"]["param"] == field and field in message, body
            library = _pydantic_message(MonitorCreate, data)
            if library in message or "Input should" in message or "Value error" in message:
                leaked.append((field, value, message))
        missing = await api.post("/incidents", json={"severity": "minor"})
        error = assert_error(missing, 422, "parameter_missing", param="title")
        assert _pydantic_message(IncidentCreate, {"severity": "minor"}) not in error["message"]
        assert not leaked


async def test_a_body_nested_too_deep_has_its_own_code(api: Api) -> None:
    with trio.fail_after(20):
        for depth in (MAX_JSON_DEPTH, 5000, 100_000):
            nested = "[" * depth + "]" * depth  # the body's object makes it one deeper
            data = f'{{"name":"w","url":"https://e.com/","type":"http","metadata":{nested}}}'
            error = assert_error(
                await _post(api, "/monitors", data.encode()), 400, "json_too_deep", param=None
            )
            assert str(MAX_JSON_DEPTH) in error["message"]
            objects = '{"a":' * depth + "1" + "}" * depth
            response = await _post(api, "/incidents", f'{{"title":{objects}}}'.encode())
            assert_error(response, 400, "json_too_deep")
        # within the limit the body is read, and refused for what it holds
        nested = "[" * (MAX_JSON_DEPTH - 1) + "]" * (MAX_JSON_DEPTH - 1)
        data = f'{{"name":"w","url":"https://e.com/","type":"http","metadata":{nested}}}'
        assert_error(
            await _post(api, "/monitors", data.encode()), 422, "metadata_invalid", param="metadata"
        )


async def test_a_json_object_with_a_key_twice_is_refused_naming_the_key(api: Api) -> None:
    with trio.fail_after(20):
        error = assert_error(
            await _post(api, "/incidents", b'{"title":"a","title":"b"}'),
            400,
            "duplicate_key",
            param="title",
        )
        assert '"title"' in error["message"]
        # nested: param names the top-level field that holds it
        body = b'{"title":"a","metadata":{"k":"1","k":"2"}}'
        error = assert_error(
            await _post(api, "/incidents", body), 400, "duplicate_key", param="metadata"
        )
        assert '"k"' in error["message"]
        monitor = await create_monitor(api)
        assert_error(
            await api.request(
                "PATCH", f"/monitors/{monitor['id']}", data=b'{"name":"a","name":"b"}', headers=JSON
            ),
            400,
            "duplicate_key",
            param="name",
        )
        # the same key in two different objects is fine
        fine = b'{"title":"a","metadata":{"title":"b"}}'
        assert (await _post(api, "/incidents", fine))[0] == 201


async def test_an_empty_sort_and_a_query_value_that_is_not_utf8_are_400(api: Api) -> None:
    with trio.fail_after(20):
        for path, queries in (
            ("/monitors", ("search=%FF", "search=%C3", "search=caf%E9", "sort=%FF")),
            ("/incidents", ("sort=%FF", "severity=%C3%28")),
        ):
            assert_error(await api.get(f"{path}?sort="), 400, "invalid_parameter", param="sort")
            for query in queries:
                param = query.partition("=")[0]
                assert_error(
                    await api.get(f"{path}?{query}"), 400, "invalid_parameter", param=param
                )
        assert_error(
            await api.get("/monitors?starting_after=mon_%FF"),
            400,
            "invalid_parameter",
            param="starting_after",
        )
        # UTF-8, percent-encoded or not, is read as such
        await create_monitor(api, name="café")
        found = expect(await api.get("/monitors?search=caf%C3%A9"))
        assert [m["name"] for m in found["data"]] == ["café"]


async def test_an_idempotency_key_may_be_any_printable_text(api: Api) -> None:
    with trio.fail_after(20):
        # the test client sends header values as UTF-8, as curl does
        for key in ("ключ", "clé-😀", "key with spaces", "ÿþ"):
            headers = {"Idempotency-Key": key}
            first = await api.post("/incidents", json={"title": key}, headers=headers)
            assert first[0] == 201, (key, first[1])
            again = await api.post("/incidents", json={"title": key}, headers=headers)
            assert again[0] == 201 and again[1]["id"] == first[1]["id"], key
            assert again[2]["Idempotent-Replayed"] == "true"
        for key in ("k\x7f", "\x85", "a\tb"):  # control characters
            response = await api.post(
                "/incidents", json={"title": "t"}, headers={"Idempotency-Key": key}
            )
            assert_error(response, 400, "idempotency_key_invalid", param="Idempotency-Key")


def test_a_key_is_read_as_utf8_when_it_is_utf8_else_as_latin1() -> None:
    # values as the server hands them over: each byte as one Latin-1 character
    assert parse_key("ключ".encode().decode("latin-1")) == "ключ"
    assert parse_key("retry \xe9") == "retry é"  # the byte 0xE9 alone: Latin-1 é
    with pytest.raises(ApiError):
        parse_key("\x85")  # a C1 control character as Latin-1
    with pytest.raises(ApiError):
        parse_key("\u00c2\u0085")  # U+0085 as UTF-8


async def test_the_rate_limits_are_operator_settings(
    deps: Dependencies, make_token: MakeToken
) -> None:
    args = build_parser().parse_args(
        [
            "serve",
            "--token-requests-per-minute",
            "3",
            "--token-requests-per-hour",
            "50",
            "--account-requests-per-minute",
            "40",
        ]
    )
    app = create_app(dataclasses.replace(deps, settings=service_settings(args).web))
    with trio.fail_after(20):
        async with app.test_app() as test_app:
            client: TestClientProtocol = test_app.test_client()
            api = Api(client, await make_token())
            for n in range(3):
                status, _, headers = await api.get("/monitors")
                assert status == 200, n
                assert headers["X-RateLimit-Limit"] == "3"
            assert_error(await api.get("/monitors"), 429, "rate_limited", type="rate_limit_error")
            # the defaults are those of docs/api.md, Rate limits
            defaults = service_settings(build_parser().parse_args(["serve"])).web
            assert (
                defaults.token_requests_per_minute,
                defaults.token_requests_per_hour,
                defaults.account_requests_per_minute,
            ) == (1000, 10_000, 5000)
            assert json.dumps(defaults.body_timeout_seconds) == "10.0"


def _with_ids(path: str) -> str:
    """A route's path with a well-formed id (of no object) in place of ``<id>``."""
    return path.replace("<id>", "mon_nosuchthing")


async def test_nul_is_refused_in_every_query_parameter_path_segment_and_header(
    api: Api,
) -> None:
    # Postgres stores and compares no U+0000: /events?type=%00 was once a 500
    with trio.fail_after(30):
        assert_error(await api.get("/events?type=%00"), 400, "invalid_parameter", param="type")
        for route in ROUTES:
            for name, _, _ in route.query:
                path = f"{_with_ids(route.path)}?{name}=a%00b"
                response = await api.request(route.method, path)
                assert_error(response, 400, "invalid_parameter", param=name)
            if "<id>" in route.path:
                path = route.path.replace("<id>", "mon_a%00b")
                assert_error(await api.request(route.method, path), 404, "resource_missing")
        for header in ("Idempotency-Key", "X-Anything", "Service-Version"):
            response = await api.post("/incidents", json={"title": "t"}, headers={header: "a\x00"})
            assert response[0] == 400, (header, response[1])
        assert expect(await api.get("/incidents"))["data"] == []


async def test_no_message_shows_pydantic_internals(api: Api) -> None:
    # pydantic names the member of a union it tried (``constrained-int``, ``str``) in
    # the error's location; a PATCH field is such a union ("X or not sent")
    with trio.fail_after(30):
        monitor = await create_monitor(api)
        heartbeat = expect(
            await api.post("/heartbeats", json={"name": "n", "period_seconds": 60}), 201
        )
        incident = expect(await api.post("/incidents", json={"title": "t"}), 201)
        targets = {
            f"/monitors/{monitor['id']}": MonitorUpdate,
            f"/heartbeats/{heartbeat['id']}": HeartbeatUpdate,
            f"/incidents/{incident['id']}": IncidentUpdate,
        }
        seen = []
        for path, model in targets.items():
            for field in model.model_fields:
                for value in ("x", 1.5, True, [], {}, -1, 10**30):
                    status, body, _ = await api.patch(path, json={field: value})
                    if status < 400:
                        continue
                    message = body["error"]["message"]
                    seen.append(message)
                    assert body["error"]["param"] == field, body
                    if body["error"]["code"] in ("invalid_type", "value_out_of_range"):
                        assert message.startswith(f"{field} must be"), body
                    for internal in ("constrained", "function-", "[", "lax-", "none", "Input"):
                        assert internal not in message.replace(f"{field}[", ""), body
        assert "interval_seconds must be an integer" in seen
        assert "interval_seconds must be at least 1" in seen
