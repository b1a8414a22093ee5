"""Monitor endpoints and the decisions on them (docs/api.md, Conventions and decisions):
statuses, defaults, the pause/resume no-ops, PATCH semantics, lengths and bounds, metadata
limits and merging.

Every test runs the real app on a fresh embedded-Postgres database; a ``trio.fail_after``
inside each test makes a hang fail fast.
"""

from __future__ import annotations

import time
from typing import Any

import trio

from engine import PROBE_TYPES, http_fields_apply
from store import Database
from tests.api import Api
from tests.web.helpers import (
    HTTP_MONITOR,
    VALID_URLS,
    assert_error,
    create_monitor,
    expect,
    set_times,
    sql,
)
from web.api.monitors import MonitorObject

OLD = 1_000_000_000
"""A time long past (2001), to tell a rewritten ``updated`` from an untouched one."""


async def test_every_monitor_endpoint_answers_with_its_success_status(api: Api) -> None:
    with trio.fail_after(10):
        before = int(time.time())
        status, created, headers = await api.post("/monitors", json=HTTP_MONITOR)
        assert status == 201, created
        MonitorObject.model_validate(created)
        assert created["id"].startswith("mon_")
        assert created["object"] == "monitor"
        assert created["status"] == "pending"
        assert created["interval_seconds"] == 60 and created["timeout_seconds"] == 30
        assert created["method"] == "GET" and created["expected_status_code"] == 200
        assert created["metadata"] == {}
        assert "last_checked_at" in created and created["last_checked_at"] is None
        assert type(created["created"]) is int and type(created["updated"]) is int
        assert before <= created["created"] == created["updated"] <= int(time.time())
        monitor_id = created["id"]

        status, got, _ = await api.get(f"/monitors/{monitor_id}")
        assert status == 200 and got == created

        status, page, _ = await api.get("/monitors")
        assert status == 200
        assert page == {"object": "list", "data": [created], "has_more": False, "url": "/monitors"}

        status, patched, _ = await api.patch(f"/monitors/{monitor_id}", json={"name": "renamed"})
        assert status == 200, patched
        MonitorObject.model_validate(patched)
        assert patched["name"] == "renamed"
        assert {k: v for k, v in patched.items() if k not in ("name", "updated")} == {
            k: v for k, v in created.items() if k not in ("name", "updated")
        }

        status, paused, _ = await api.post(f"/monitors/{monitor_id}/pause")
        assert status == 200, paused
        MonitorObject.model_validate(paused)
        assert paused["status"] == "paused"

        status, resumed, _ = await api.post(f"/monitors/{monitor_id}/resume")
        assert status == 200, resumed
        MonitorObject.model_validate(resumed)
        assert resumed["status"] == "pending"

        status, body, headers = await api.delete(f"/monitors/{monitor_id}")
        assert status == 204 and body is None
        assert headers.get("Content-Type") is None or headers.get("Content-Length") == "0"

        assert_error(await api.get(f"/monitors/{monitor_id}"), 404, "resource_missing", param="id")
        assert_error(await api.delete(f"/monitors/{monitor_id}"), 404, "resource_missing")
        assert expect(await api.get("/monitors"))["data"] == []


HTTP_ONLY: dict[str, Any] = {
    "method": "GET",
    "expected_status_code": 200,
    "request_headers": {},
    "request_body": "x",
    "assertions": [],
    "tls_expiry_days": 14,
}
"""http-only fields (docs/api.md, Conventions and decisions) with a non-null value for each."""


async def test_non_http_monitors_show_null_http_fields(api: Api) -> None:
    with trio.fail_after(10):
        for kind in [k for k in PROBE_TYPES if not http_fields_apply(k)]:
            monitor = await create_monitor(api, type=kind, url=VALID_URLS[kind])
            assert monitor["type"] == kind
            status, got, _ = await api.get(f"/monitors/{monitor['id']}")
            for field in HTTP_ONLY:
                assert field in monitor and monitor[field] is None and got[field] is None
            # sending them for a non-http monitor is refused, on create and on PATCH
            for field, value in HTTP_ONLY.items():
                assert_error(
                    await api.post(
                        "/monitors",
                        json={"name": "x", "type": kind, "url": VALID_URLS[kind], field: value},
                    ),
                    422,
                    "invalid_value",
                    param=field,
                )
                assert_error(
                    await api.patch(f"/monitors/{monitor['id']}", json={field: value}),
                    422,
                    "invalid_value",
                    param=field,
                )
            # null is what they are: accepted, nothing changes
            status, same, _ = await api.patch(
                f"/monitors/{monitor['id']}", json=dict.fromkeys(HTTP_ONLY)
            )
            assert status == 200 and same == got


async def test_http_monitor_keeps_given_method_and_status_code_and_refuses_null(api: Api) -> None:
    with trio.fail_after(10):
        monitor = await create_monitor(api, method="HEAD", expected_status_code=204)
        assert monitor["method"] == "HEAD" and monitor["expected_status_code"] == 204
        status, patched, _ = await api.patch(
            f"/monitors/{monitor['id']}", json={"method": "POST", "expected_status_code": 301}
        )
        assert status == 200
        assert patched["method"] == "POST" and patched["expected_status_code"] == 301
        for field in ("method", "expected_status_code", "name", "url", "interval_seconds"):
            assert_error(
                await api.patch(f"/monitors/{monitor['id']}", json={field: None}),
                422,
                "invalid_type",
                param=field,
            )


async def test_pause_on_paused_and_resume_on_unpaused_are_noops(api: Api, db: Database) -> None:
    with trio.fail_after(10):
        monitor = await create_monitor(api)
        path = f"/monitors/{monitor['id']}"
        await set_times(db, "monitors", monitor["id"], created=OLD, updated=OLD)

        # resume on a pending monitor: 200, unchanged
        status, body, _ = await api.post(f"{path}/resume")
        assert status == 200 and body["status"] == "pending" and body["updated"] == OLD

        # pause: a real move, updated changes
        status, body, _ = await api.post(f"{path}/pause")
        assert status == 200 and body["status"] == "paused" and body["updated"] > OLD

        # pause again: 200, unchanged
        await set_times(db, "monitors", monitor["id"], created=OLD, updated=OLD)
        status, body, _ = await api.post(f"{path}/pause")
        assert status == 200 and body["status"] == "paused" and body["updated"] == OLD
        status, got, _ = await api.get(path)
        assert got == body

        # resume: back to pending (docs/checks.md, Up and down), updated changes
        status, body, _ = await api.post(f"{path}/resume")
        assert status == 200 and body["status"] == "pending" and body["updated"] > OLD

        # resume on a monitor that is up or down: 200, status and updated kept
        for current in ("up", "down"):
            await sql(
                db,
                "UPDATE monitors SET status = $2, updated = $3 WHERE id = $1",
                monitor["id"],
                current,
                OLD,
            )
            status, body, _ = await api.post(f"{path}/resume")
            assert status == 200 and body["status"] == current and body["updated"] == OLD
            # pause applies from any status
            status, body, _ = await api.post(f"{path}/pause")
            assert status == 200 and body["status"] == "paused"
            await api.post(f"{path}/resume")


async def test_pause_and_resume_take_no_body_but_accept_an_empty_object(api: Api) -> None:
    with trio.fail_after(10):
        monitor = await create_monitor(api)
        path = f"/monitors/{monitor['id']}"
        status, body, _ = await api.post(f"{path}/pause", json={})
        assert status == 200 and body["status"] == "paused"
        assert_error(
            await api.post(f"{path}/resume", json={"status": "up"}),
            422,
            "parameter_unknown",
            param="status",
        )
        status, body, _ = await api.get(path)
        assert body["status"] == "paused"


async def test_patch_changes_only_the_fields_sent(api: Api, db: Database) -> None:
    with trio.fail_after(10):
        monitor = await create_monitor(api, metadata={"team": "core"})
        path = f"/monitors/{monitor['id']}"
        await set_times(db, "monitors", monitor["id"], created=OLD, updated=OLD)
        # sending the current values changes nothing, not even updated
        status, body, _ = await api.patch(path, json={"name": "web", "interval_seconds": 60})
        assert status == 200 and body["updated"] == OLD
        status, body, _ = await api.patch(path, json={})
        assert status == 200 and body["updated"] == OLD

        status, body, _ = await api.patch(
            path,
            json={
                "name": "api",
                "url": "https://example.org/ping",
                "interval_seconds": 120,
                "timeout_seconds": 10,
                "failure_threshold": 3,
                "success_threshold": 2,
            },
        )
        assert status == 200, body
        assert body["updated"] > OLD and body["created"] == OLD
        assert body["name"] == "api" and body["url"] == "https://example.org/ping"
        assert body["interval_seconds"] == 120 and body["timeout_seconds"] == 10
        assert body["failure_threshold"] == 3 and body["success_threshold"] == 2
        assert body["type"] == "http" and body["status"] == "pending"
        assert body["method"] == "GET" and body["metadata"] == {"team": "core"}
        status, got, _ = await api.get(path)
        assert got == body


async def test_type_in_a_patch_is_422_even_when_unchanged(api: Api) -> None:
    with trio.fail_after(10):
        monitor = await create_monitor(api)
        for value in ("http", "tcp"):
            assert_error(
                await api.patch(f"/monitors/{monitor['id']}", json={"type": value}),
                422,
                "parameter_immutable",
                param="type",
            )
        assert expect(await api.get(f"/monitors/{monitor['id']}")) == monitor


async def test_create_validation_errors_are_422_naming_the_field(api: Api) -> None:
    cases: list[tuple[dict[str, Any], str, str]] = [
        ({"url": "https://example.com/", "type": "http"}, "parameter_missing", "name"),
        ({"name": "x", "type": "http"}, "parameter_missing", "url"),
        ({"name": "x", "url": "https://example.com/"}, "parameter_missing", "type"),
        ({**HTTP_MONITOR, "colour": "red"}, "parameter_unknown", "colour"),
        ({**HTTP_MONITOR, "id": "mon_abc"}, "parameter_unknown", "id"),
        ({**HTTP_MONITOR, "status": "up"}, "parameter_unknown", "status"),
        ({**HTTP_MONITOR, "created": 1}, "parameter_unknown", "created"),
        ({**HTTP_MONITOR, "type": "smtp"}, "invalid_value", "type"),
        ({**HTTP_MONITOR, "method": "FETCH"}, "invalid_value", "method"),
        ({**HTTP_MONITOR, "interval_seconds": "60"}, "invalid_type", "interval_seconds"),
        ({**HTTP_MONITOR, "interval_seconds": 60.0}, "invalid_type", "interval_seconds"),
        ({**HTTP_MONITOR, "interval_seconds": True}, "invalid_type", "interval_seconds"),
        ({**HTTP_MONITOR, "name": 5}, "invalid_type", "name"),
        ({**HTTP_MONITOR, "name": None}, "invalid_type", "name"),
        ({**HTTP_MONITOR, "name": ""}, "value_too_short", "name"),
        (
            {**HTTP_MONITOR, "expected_status_code": 99},
            "value_out_of_range",
            "expected_status_code",
        ),
        (
            {**HTTP_MONITOR, "expected_status_code": 600},
            "value_out_of_range",
            "expected_status_code",
        ),
        ({**HTTP_MONITOR, "failure_threshold": 0}, "value_out_of_range", "failure_threshold"),
        ({**HTTP_MONITOR, "url": "example.com"}, "invalid_url", "url"),
        ({"name": "x", "type": "tcp", "url": "db.example.com"}, "invalid_url", "url"),
        ({"name": "x", "type": "dns", "url": "192.0.2.1"}, "invalid_url", "url"),
        ({**HTTP_MONITOR, "metadata": []}, "metadata_invalid", "metadata"),
        ({**HTTP_MONITOR, "metadata": {"a": 1}}, "metadata_invalid", "metadata"),
        ({**HTTP_MONITOR, "metadata": {"a": None}}, "metadata_invalid", "metadata"),
    ]
    with trio.fail_after(15):
        for body, code, param in cases:
            assert_error(await api.post("/monitors", json=body), 422, code, param=param)
        assert_error(await api.post("/monitors", json=[HTTP_MONITOR]), 422, "invalid_type")
        assert expect(await api.get("/monitors"))["data"] == []


async def test_lengths_and_bounds_on_create(api: Api) -> None:
    base = "https://example.com/"
    accepted: list[dict[str, Any]] = [
        {"name": "n" * 200},
        {"url": base + "a" * (2048 - len(base))},
        {"interval_seconds": 1, "timeout_seconds": 1},
        {"interval_seconds": 86_400},
        {"timeout_seconds": 1},
        {"interval_seconds": 60, "timeout_seconds": 60},
        {"interval_seconds": 45, "timeout_seconds": 45},
    ]
    refused: list[tuple[dict[str, Any], str, str]] = [
        ({"name": "n" * 201}, "value_too_long", "name"),
        ({"url": base + "a" * (2049 - len(base))}, "value_too_long", "url"),
        ({"interval_seconds": 0}, "value_out_of_range", "interval_seconds"),
        ({"interval_seconds": -1}, "value_out_of_range", "interval_seconds"),
        ({"interval_seconds": 86_401}, "value_out_of_range", "interval_seconds"),
        ({"timeout_seconds": 0}, "value_out_of_range", "timeout_seconds"),
        ({"interval_seconds": 120, "timeout_seconds": 61}, "value_out_of_range", "timeout_seconds"),
        ({"interval_seconds": 10}, "timeout_exceeds_interval", "timeout_seconds"),
        (
            {"interval_seconds": 44, "timeout_seconds": 45},
            "timeout_exceeds_interval",
            "timeout_seconds",
        ),
    ]
    with trio.fail_after(15):
        for fields in accepted:
            monitor = await create_monitor(api, **fields)
            for key, value in fields.items():
                assert monitor[key] == value
        for fields, code, param in refused:
            assert_error(
                await api.post("/monitors", json={**HTTP_MONITOR, **fields}), 422, code, param=param
            )
        page = expect(await api.get("/monitors", query={"limit": 100}))
        assert len(page["data"]) == len(accepted)


async def test_bounds_on_patch_are_checked_against_the_stored_values(api: Api) -> None:
    with trio.fail_after(15):
        monitor = await create_monitor(api)  # interval 60, timeout 30
        path = f"/monitors/{monitor['id']}"
        base = "https://example.com/"
        refused: list[tuple[dict[str, Any], str, str]] = [
            ({"interval_seconds": 29}, "timeout_exceeds_interval", "timeout_seconds"),
            ({"timeout_seconds": 61}, "value_out_of_range", "timeout_seconds"),
            ({"timeout_seconds": 0}, "value_out_of_range", "timeout_seconds"),
            ({"interval_seconds": 0}, "value_out_of_range", "interval_seconds"),
            ({"interval_seconds": 86_401}, "value_out_of_range", "interval_seconds"),
            ({"name": "n" * 201}, "value_too_long", "name"),
            ({"name": ""}, "value_too_short", "name"),
            ({"url": base + "a" * (2049 - len(base))}, "value_too_long", "url"),
            ({"url": "ftp://example.com/"}, "invalid_url", "url"),
            (
                {"interval_seconds": 20, "timeout_seconds": 21},
                "timeout_exceeds_interval",
                "timeout_seconds",
            ),
            ({"status": "up"}, "parameter_unknown", "status"),
            ({"metadata": {"k": 5}}, "metadata_invalid", "metadata"),
        ]
        for fields, code, param in refused:
            assert_error(await api.patch(path, json=fields), 422, code, param=param)
        status, got, _ = await api.get(path)
        assert got == monitor, "a refused PATCH changes nothing"

        accepted: list[dict[str, Any]] = [
            {"interval_seconds": 30},  # equal to the stored timeout
            {"timeout_seconds": 31, "interval_seconds": 31},
            {"name": "n" * 200, "url": base + "a" * (2048 - len(base))},
            {"interval_seconds": 86_400},
            {"timeout_seconds": 60},
            {"interval_seconds": 1, "timeout_seconds": 1},
        ]
        for fields in accepted:
            status, body, _ = await api.patch(path, json=fields)
            assert status == 200, (fields, body)
            for key, value in fields.items():
                assert body[key] == value
        # now interval 1, timeout 1: raising the timeout alone passes the stored interval
        assert_error(
            await api.patch(path, json={"timeout_seconds": 2}),
            422,
            "timeout_exceeds_interval",
            param="timeout_seconds",
        )


async def test_metadata_limits_on_create(api: Api) -> None:
    with trio.fail_after(15):
        fifty = {f"k{i}": "v" for i in range(50)}
        ok = await create_monitor(
            api, metadata={**dict(list(fifty.items())[:48]), "a" * 40: "x" * 500, "b": "y"}
        )
        assert ok["metadata"]["a" * 40] == "x" * 500 and len(ok["metadata"]) == 50
        assert (await create_monitor(api, metadata=fifty))["metadata"] == fifty
        refused: list[tuple[dict[str, str], str]] = [
            ({**fifty, "k50": "v"}, "metadata_too_many_keys"),
            ({"a" * 41: "x"}, "metadata_key_too_long"),
            ({"": "x"}, "metadata_key_too_long"),
            ({"k": "x" * 501}, "metadata_value_too_long"),
        ]
        for metadata, code in refused:
            assert_error(
                await api.post("/monitors", json={**HTTP_MONITOR, "metadata": metadata}),
                422,
                code,
                param="metadata",
            )
        # an empty value on create sets nothing
        assert (await create_monitor(api, metadata={"a": "", "b": "1"}))["metadata"] == {"b": "1"}


async def test_metadata_merges_key_by_key_on_patch(api: Api) -> None:
    with trio.fail_after(15):
        monitor = await create_monitor(api, metadata={"a": "1", "b": "2"})
        path = f"/monitors/{monitor['id']}"

        status, body, _ = await api.patch(path, json={"metadata": {"b": "3", "c": "4"}})
        assert status == 200 and body["metadata"] == {"a": "1", "b": "3", "c": "4"}
        status, body, _ = await api.patch(path, json={"metadata": {"a": ""}})
        assert status == 200 and body["metadata"] == {"b": "3", "c": "4"}
        status, body, _ = await api.patch(path, json={"metadata": {"missing": ""}})
        assert status == 200 and body["metadata"] == {"b": "3", "c": "4"}
        status, body, _ = await api.patch(path, json={"name": "other"})
        assert body["metadata"] == {"b": "3", "c": "4"}, "metadata untouched when not sent"

        full = {f"k{i}": str(i) for i in range(48)}
        status, body, _ = await api.patch(path, json={"metadata": full})
        assert status == 200 and len(body["metadata"]) == 50

        # 50 stored + 1 new: refused after the merge, nothing stored
        assert_error(
            await api.patch(path, json={"metadata": {"new": "x"}}),
            422,
            "metadata_too_many_keys",
            param="metadata",
        )
        status, got, _ = await api.get(path)
        assert got == body
        # removing one and adding one in the same PATCH: allowed, still 50
        status, body, _ = await api.patch(path, json={"metadata": {"k0": "", "new": "x"}})
        assert status == 200, body
        assert len(body["metadata"]) == 50 and "k0" not in body["metadata"]
        assert body["metadata"]["new"] == "x" and body["metadata"]["b"] == "3"
        # limits on the keys and values a PATCH sends
        for metadata, code in (
            ({"a" * 41: "x"}, "metadata_key_too_long"),
            ({"k1": "x" * 501}, "metadata_value_too_long"),
        ):
            assert_error(await api.patch(path, json={"metadata": metadata}), 422, code)
        status, body, _ = await api.patch(path, json={"metadata": {"k1": "x" * 500, "b" * 40: ""}})
        assert status == 200 and body["metadata"]["k1"] == "x" * 500


async def test_every_monitor_type_can_be_created_and_filtered_by_type(api: Api) -> None:
    with trio.fail_after(10):
        ids = {}
        for kind, url in VALID_URLS.items():
            monitor = await create_monitor(api, type=kind, url=url, name=f"{kind}-mon")
            assert monitor["url"] == url and monitor["status"] == "pending"
            ids[kind] = monitor["id"]
        assert list(ids) == list(PROBE_TYPES)  # every probe type, through the API
        for kind, monitor_id in ids.items():
            status, page, _ = await api.get("/monitors", query={"type": kind})
            assert status == 200 and [m["id"] for m in page["data"]] == [monitor_id]
        error = assert_error(
            await api.get("/monitors", query={"type": "smtp"}), 400, "invalid_parameter"
        )
        assert error["param"] == "type"
        assert error["message"] == "type must be one of http, tcp, dns, ping; got 'smtp'"
