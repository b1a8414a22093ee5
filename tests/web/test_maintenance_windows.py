"""The maintenance window endpoints (docs/maintenance.md): one-off and recurring windows,
their computed ``status`` and ``next_window``, the conventions of docs/api.md (ids,
metadata, sorts and cursors, idempotency, errors naming the field), ``end`` and ``cancel``,
another account's ids, and the ``maintenance.*`` events.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from tests.api import Api
from tests.web.helpers import assert_error, create_monitor, expect
from web.api.maintenance_windows import WindowList, WindowObject

ApiFor = Callable[..., Awaitable[Api]]
WEEKLY = {
    "rrule": "FREQ=WEEKLY;BYDAY=SU",
    "time_zone": "Europe/Berlin",
    "start": "2026-01-04T02:30:00",
    "duration_seconds": 3600,
}


async def _heartbeat(api: Api) -> dict[str, Any]:
    body = {"name": "backup", "period_seconds": 3600}
    return expect(await api.post("/heartbeats", json=body), 201)  # type: ignore[no-any-return]


async def _window(api: Api, monitors: list[str], **fields: Any) -> dict[str, Any]:
    """POST /maintenance-windows, one hour from an hour ahead unless ``fields`` say
    otherwise; asserts 201 and the object's shape."""
    at = int(time.time())
    body = {"title": "Upgrade", "monitors": monitors, **fields}
    if "recurrence" not in fields:
        body = {"starts_at": at + 3600, "ends_at": at + 7200, **body}
    created = expect(await api.post("/maintenance-windows", json=body), 201)
    WindowObject.model_validate(created)
    return created  # type: ignore[no-any-return]


async def test_a_one_off_window_is_created_with_its_defaults_and_read_back(api: Api) -> None:
    with trio.fail_after(10):
        monitor = await create_monitor(api)
        beat = await _heartbeat(api)
        at = int(time.time())
        window = await _window(
            api,
            [monitor["id"], beat["id"], monitor["id"]],
            starts_at=at + 600,
            ends_at=at + 4200,
            description="db upgrade",
            metadata={"ticket": "OPS-1"},
        )
        assert window["id"].startswith("mnt_")
        assert window["object"] == "maintenance_window"
        assert window["monitors"] == [monitor["id"], beat["id"]]  # the repeat counts once
        assert (window["starts_at"], window["ends_at"]) == (at + 600, at + 4200)
        assert window["recurrence"] is None
        assert window["suppress_alerts"] is True
        assert window["exclude_from_availability"] is True
        assert window["pause_checks"] is False
        assert window["status"] == "scheduled"
        assert window["next_window"] == {"starts_at": at + 600, "ends_at": at + 4200}
        assert window["metadata"] == {"ticket": "OPS-1"}
        assert window["created"] == window["updated"]
        got = expect(await api.get(f"/maintenance-windows/{window['id']}"))
        assert got == window


async def test_a_recurring_window_shows_its_next_occurrence_in_its_zone(api: Api) -> None:
    with trio.fail_after(10):
        monitor = await create_monitor(api)
        window = await _window(api, [monitor["id"]], recurrence=WEEKLY, pause_checks=True)
        assert window["starts_at"] is None and window["ends_at"] is None
        assert window["recurrence"] == WEEKLY
        assert window["status"] in ("scheduled", "in_progress")
        upcoming = window["next_window"]
        assert upcoming["ends_at"] - upcoming["starts_at"] == 3600
        # a Sunday, 02:30 on Berlin's wall clock (03:30 on a spring-forward day)
        local = time.gmtime(upcoming["starts_at"] + 3600)  # CET; CEST is an hour more
        assert local.tm_wday in (6, 0) and local.tm_min == 30


async def test_the_schedule_errors_name_their_field(api: Api) -> None:
    with trio.fail_after(10):
        monitor = await create_monitor(api)
        at = int(time.time())
        base = {"title": "t", "monitors": [monitor["id"]]}
        cases: list[tuple[dict[str, Any], str, str]] = [
            ({"starts_at": at, "ends_at": at}, "invalid_value", "ends_at"),
            ({"starts_at": at}, "invalid_value", "ends_at"),
            ({}, "invalid_value", "starts_at"),
            (
                {"starts_at": at, "ends_at": at + 60, "recurrence": WEEKLY},
                "invalid_value",
                "starts_at",
            ),
            ({"recurrence": {**WEEKLY, "rrule": "FREQ=MINUTELY"}}, "invalid_value",
             "recurrence.rrule"),
            ({"recurrence": {**WEEKLY, "rrule": "NOPE"}}, "invalid_value", "recurrence.rrule"),
            ({"recurrence": {**WEEKLY, "time_zone": "Mars/Olympus"}}, "invalid_time_zone",
             "recurrence.time_zone"),
            ({"recurrence": {**WEEKLY, "time_zone": "Europe"}}, "invalid_time_zone",
             "recurrence.time_zone"),
            ({"recurrence": {**WEEKLY, "start": "2026-01-04T02:30:00+01:00"}}, "invalid_value",
             "recurrence.start"),
            ({"recurrence": {**WEEKLY, "duration_seconds": 0}}, "invalid_value",
             "recurrence.duration_seconds"),
            ({"recurrence": {**WEEKLY, "extra": 1}}, "parameter_unknown", "recurrence"),
        ]  # fmt: skip
        for fields, code, param in cases:
            refused = await api.post("/maintenance-windows", json={**base, **fields})
            assert_error(refused, 422, code, param=param)
        assert expect(await api.get("/maintenance-windows"))["data"] == []


async def test_monitors_must_be_the_accounts_own(api: Api, api_for: ApiFor) -> None:
    with trio.fail_after(10):
        mine = await create_monitor(api)
        other = await api_for(account="other")
        theirs = await create_monitor(other)
        at = int(time.time())
        base = {"title": "t", "starts_at": at + 60, "ends_at": at + 120}
        body = {**base, "monitors": [mine["id"], theirs["id"]]}
        refused = await api.post("/maintenance-windows", json=body)
        error = assert_error(refused, 422, "unknown_monitor", param="monitors[1]")
        assert theirs["id"] in error["message"]
        refused = await api.post("/maintenance-windows", json={**base, "monitors": ["hbt_nope"]})
        assert_error(refused, 422, "unknown_monitor", param="monitors[0]")
        refused = await api.post("/maintenance-windows", json={**base, "monitors": []})
        assert_error(refused, 422, "value_too_short", param="monitors")
        refused = await api.post("/maintenance-windows", json={**base, "monitors": ["inc_x"]})
        assert_error(refused, 422, "invalid_value", param="monitors")
        window = await _window(api, [mine["id"]])
        patch = {"monitors": [mine["id"], theirs["id"]]}
        refused = await api.patch(f"/maintenance-windows/{window['id']}", json=patch)
        assert_error(refused, 422, "unknown_monitor", param="monitors[1]")


async def test_another_accounts_window_is_a_404_everywhere(api: Api, api_for: ApiFor) -> None:
    with trio.fail_after(10):
        window = await _window(api, [(await create_monitor(api))["id"]])
        other = await api_for(account="other")
        path = f"/maintenance-windows/{window['id']}"
        for response in (
            await other.get(path),
            await other.patch(path, json={"title": "x"}),
            await other.post(f"{path}/end"),
            await other.post(f"{path}/cancel"),
            await other.delete(path),
        ):
            assert_error(response, 404, "resource_missing", param="id")
        assert expect(await other.get("/maintenance-windows"))["data"] == []
        assert expect(await api.get(path))["title"] == "Upgrade"


async def test_lists_sort_filter_and_page_with_cursors(api: Api) -> None:
    with trio.fail_after(15):
        first = await create_monitor(api)
        second = await create_monitor(api)
        ids = []
        for title in ("b", "c", "a"):
            ids.append((await _window(api, [first["id"]], title=title))["id"])
        other = await _window(api, [second["id"]], title="d")
        page = expect(await api.get("/maintenance-windows", query={"sort": "title"}))
        WindowList.model_validate(page)
        assert [w["title"] for w in page["data"]] == ["a", "b", "c", "d"]
        page = expect(await api.get("/maintenance-windows", query={"sort": "-title", "limit": "2"}))
        assert [w["title"] for w in page["data"]] == ["d", "c"] and page["has_more"]
        after = page["data"][-1]["id"]
        rest = expect(
            await api.get("/maintenance-windows", query={"sort": "-title", "starting_after": after})
        )
        assert [w["title"] for w in rest["data"]] == ["b", "a"] and not rest["has_more"]
        covering = expect(await api.get("/maintenance-windows", query={"monitor": second["id"]}))
        assert [w["id"] for w in covering["data"]] == [other["id"]]
        refused = await api.get("/maintenance-windows", query={"sort": "name"})
        assert_error(refused, 400, "invalid_parameter", param="sort")
        refused = await api.get("/maintenance-windows", query={"monitor": "inc_x"})
        assert_error(refused, 400, "invalid_parameter", param="monitor")
        expect(await api.delete(f"/maintenance-windows/{ids[0]}"), 204)
        # a deleted window still serves as a cursor
        gone = expect(
            await api.get("/maintenance-windows", query={"sort": "title", "starting_after": ids[0]})
        )
        assert [w["title"] for w in gone["data"]] == ["c", "d"]


async def test_patch_changes_fields_and_schedule(api: Api) -> None:
    with trio.fail_after(10):
        monitor = await create_monitor(api)
        window = await _window(api, [monitor["id"]], metadata={"a": "1"})
        path = f"/maintenance-windows/{window['id']}"
        at = int(time.time())
        patched = expect(
            await api.patch(
                path,
                json={"title": "Later", "ends_at": at + 9000, "metadata": {"b": "2"},
                      "suppress_alerts": False, "description": None},
            )
        )  # fmt: skip
        assert patched["title"] == "Later"
        assert patched["ends_at"] == at + 9000 and patched["starts_at"] == window["starts_at"]
        assert patched["next_window"]["ends_at"] == at + 9000
        assert patched["metadata"] == {"a": "1", "b": "2"}
        assert patched["suppress_alerts"] is False
        recurring = expect(await api.patch(path, json={"recurrence": WEEKLY}))
        assert recurring["recurrence"] == WEEKLY and recurring["starts_at"] is None
        refused = await api.patch(path, json={"ends_at": window["starts_at"]})
        assert_error(refused, 422, "invalid_value", param="starts_at")
        refused = await api.patch(path, json={"recurrence": None})
        assert_error(refused, 422, "invalid_value", param="starts_at")
        refused = await api.patch(path, json={"title": None})
        assert_error(refused, 422, "invalid_type", param="title")
        one_off = expect(
            await api.patch(
                path, json={"recurrence": None, "starts_at": at + 60, "ends_at": at + 120}
            )
        )
        assert one_off["recurrence"] is None and one_off["starts_at"] == at + 60


async def test_end_stops_the_occurrence_in_progress(api: Api) -> None:
    with trio.fail_after(10):
        monitor = await create_monitor(api)
        at = int(time.time())
        window = await _window(api, [monitor["id"]], starts_at=at - 60, ends_at=at + 3600)
        assert window["status"] == "in_progress"
        assert window["next_window"]["starts_at"] == at - 60
        ended = expect(await api.post(f"/maintenance-windows/{window['id']}/end"))
        assert ended["status"] == "completed" and ended["next_window"] is None
        event = expect(await api.get("/events", query={"type": "maintenance.updated"}))["data"][0]
        assert event["data"]["object"] == ended
        assert event["data"]["previous_attributes"] == {
            "status": "in_progress",
            "next_window": {"starts_at": at - 60, "ends_at": at + 3600},
        }
        again = await api.post(f"/maintenance-windows/{window['id']}/end")
        assert_error(again, 400, "maintenance_not_in_progress", param=None)
        later = await _window(api, [monitor["id"]])
        refused = await api.post(f"/maintenance-windows/{later['id']}/end")
        assert_error(refused, 400, "maintenance_not_in_progress", param=None)
        refused = await api.post(f"/maintenance-windows/{later['id']}/end", json={"x": 1})
        assert_error(refused, 422, "parameter_unknown")


async def test_cancel_drops_the_later_occurrences(api: Api) -> None:
    with trio.fail_after(10):
        monitor = await create_monitor(api)
        window = await _window(api, [monitor["id"]], recurrence=WEEKLY)
        path = f"/maintenance-windows/{window['id']}"
        canceled = expect(await api.post(f"{path}/cancel"))
        if window["status"] == "scheduled":
            assert canceled["status"] == "canceled" and canceled["next_window"] is None
        again = await api.post(f"{path}/cancel")
        assert_error(again, 400, "maintenance_not_cancelable", param=None)
        upcoming = await _window(api, [monitor["id"]])
        key = {"Idempotency-Key": "cancel-upcoming-1"}
        first = await api.post(f"/maintenance-windows/{upcoming['id']}/cancel", headers=key)
        replay = await api.post(f"/maintenance-windows/{upcoming['id']}/cancel", headers=key)
        assert expect(first) == expect(replay)
        assert expect(first)["status"] == "canceled"


async def test_create_is_idempotent(api: Api) -> None:
    with trio.fail_after(10):
        monitor = await create_monitor(api)
        at = int(time.time())
        body = {"title": "t", "monitors": [monitor["id"]], "starts_at": at + 60,
                "ends_at": at + 120}  # fmt: skip
        key = {"Idempotency-Key": "window-1"}
        first = expect(await api.post("/maintenance-windows", json=body, headers=key), 201)
        again = expect(await api.post("/maintenance-windows", json=body, headers=key), 201)
        assert first == again
        assert len(expect(await api.get("/maintenance-windows"))["data"]) == 1


async def test_each_change_writes_its_event(api: Api, api_for: ApiFor) -> None:
    with trio.fail_after(15):
        monitor = await create_monitor(api)
        window = await _window(api, [monitor["id"]])
        path = f"/maintenance-windows/{window['id']}"
        patched = expect(await api.patch(path, json={"title": "Renamed"}))
        expect(await api.patch(path, json={"title": "Renamed"}))  # no change: no event
        canceled = expect(await api.post(f"{path}/cancel"))
        expect(await api.delete(path), 204)
        reader = await api_for(permissions=["maintenance.read"])
        listed = expect(await reader.get("/events", query={"type": "maintenance.*"}))["data"]
        assert [e["type"] for e in listed] == [
            "maintenance.deleted", "maintenance.canceled", "maintenance.updated",
            "maintenance.created",
        ]  # fmt: skip
        deleted, cancel, update, create = listed
        assert create["data"] == {"object": window, "previous_attributes": None}
        assert update["data"]["object"] == patched
        assert update["data"]["previous_attributes"] == {"title": "Upgrade"}
        assert cancel["data"]["object"] == canceled
        assert cancel["data"]["previous_attributes"]["status"] == "scheduled"
        assert deleted["data"]["object"]["id"] == window["id"]
        assert all(e["request"]["id"] for e in listed)
        monitors_only = await api_for(permissions=["monitors.read"])
        shown = expect(await monitors_only.get("/events"))["data"]
        assert not [e for e in shown if e["type"].startswith("maintenance.")]


async def test_a_deleted_monitor_or_heartbeat_leaves_the_windows_that_covered_it(
    api: Api,
) -> None:
    """Its id is no longer shown (a PATCH sending the list back is not refused for it)."""
    with trio.fail_after(10):
        monitor = await create_monitor(api)
        kept = await create_monitor(api)
        beat = await _heartbeat(api)
        window = await _window(api, [monitor["id"], beat["id"], kept["id"]])
        expect(await api.delete(f"/monitors/{monitor['id']}"), 204)
        expect(await api.delete(f"/heartbeats/{beat['id']}"), 204)
        path = f"/maintenance-windows/{window['id']}"
        left = expect(await api.get(path))["monitors"]
        assert left == [kept["id"]]
        expect(await api.patch(path, json={"monitors": left}))
