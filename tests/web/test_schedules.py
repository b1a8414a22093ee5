"""On-call schedules through the API (docs/on-call.md, "Schedules through the API"):
CRUD, validation naming the field, other accounts' ids, overrides, who is on call and
the shifts of a weekly rotation at fixed instants, the calendar feed parsed back with
``icalendar`` and its key, events, and what deleting a member does."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

import pytest
import trio
from icalendar import Calendar

from store import Database, schedules
from tests.api import Api, EngineLike, web_deps
from tests.web.helpers import assert_error, expect
from web.http.deps import Dependencies

# 2026-01-05 is a Monday; 09:00 in Berlin is 08:00 UTC in winter (no change of offset
# before the end of March, so every instant below is a plain multiple of a week)
MONDAY = int(datetime(2026, 1, 5, 8, tzinfo=UTC).timestamp())
DAY = 86_400
WEEK = 7 * DAY
NOW = MONDAY + 2 * DAY + 3600  # the service's clock: Wednesday 2026-01-07, 09:00 UTC


@pytest.fixture
def deps(db: Database, engine: EngineLike) -> Dependencies:
    """The app's dependencies with its clock stopped at :data:`NOW`: what "now" and
    "today" mean to the on-call answer and the calendar feed."""
    return web_deps(db, engine, clock=lambda: float(NOW))


async def _members(api: Api, *names: str) -> list[str]:
    return [expect(await api.post("/members", json={"name": n}), 201)["id"] for n in names]


def _weekly(*members: str, **extra: Any) -> dict[str, Any]:
    layer = {
        "name": "primary",
        "members": list(members),
        "rotation": {"type": "weekly", "handoff": "2026-01-05T09:00"},
    }
    return {"name": "ops", "time_zone": "Europe/Berlin", "layers": [layer], **extra}


async def _schedule(api: Api, *members: str) -> dict[str, Any]:
    return expect(await api.post("/schedules", json=_weekly(*members)), 201)  # type: ignore[no-any-return]


async def test_crud_and_the_object(api: Api) -> None:
    with trio.fail_after(20):
        ann, bob = await _members(api, "Ann", "Bob")
        created = await _schedule(api, ann, bob)
        assert created["object"] == "schedule" and created["id"].startswith("sch_")
        assert created["time_zone"] == "Europe/Berlin" and created["metadata"] == {}
        layer = created["layers"][0]
        assert layer["members"] == [ann, bob] and layer["rotation"]["type"] == "weekly"
        assert layer["rotation"]["handoff"].startswith("2026-01-05T09:00")
        assert len(created["calendar_key"]) == 32
        assert expect(await api.get(f"/schedules/{created['id']}")) == created
        renamed = expect(
            await api.patch(
                f"/schedules/{created['id']}", json={"name": "web", "metadata": {"team": "a"}}
            )
        )
        assert renamed["name"] == "web" and renamed["layers"] == created["layers"]
        moved = expect(
            await api.patch(f"/schedules/{created['id']}", json={"time_zone": "America/New_York"})
        )
        assert moved["time_zone"] == "America/New_York" and moved["layers"] == created["layers"]
        business = {
            **layer,
            "members": [bob],
            "restrictions": [{"days": ["mon", "fri"], "start": "09:00", "end": "17:00"}],
        }
        relayered = expect(
            await api.patch(f"/schedules/{created['id']}", json={"layers": [layer, business]})
        )
        assert [la["members"] for la in relayered["layers"]] == [[ann, bob], [bob]]
        assert relayered["layers"][1]["restrictions"] == business["restrictions"]
        listed = expect(await api.get("/schedules", query={"sort": "name"}))
        assert [s["id"] for s in listed["data"]] == [created["id"]]
        expect(await api.delete(f"/schedules/{created['id']}"), 204)
        assert_error(await api.get(f"/schedules/{created['id']}"), 404, "resource_missing")


async def test_validation_names_the_field(api: Api) -> None:
    with trio.fail_after(20):
        (ann,) = await _members(api, "Ann")
        bad_zone = _weekly(ann, time_zone="Mars/Olympus")
        assert_error(
            await api.post("/schedules", json=bad_zone), 422, "invalid_time_zone", param="time_zone"
        )
        stranger = _weekly(ann, ann, "mbr_nobody")
        assert_error(
            await api.post("/schedules", json=stranger),
            422,
            "unknown_member",
            param="layers[0].members[2]",
        )
        handoff = _weekly(ann)
        handoff["layers"][0]["rotation"]["handoff"] = "next monday"
        assert_error(
            await api.post("/schedules", json=handoff),
            422,
            "invalid_value",
            param="layers[0].rotation.handoff",
        )
        backwards = _weekly(ann)
        backwards["layers"][0]["restrictions"] = [
            {"days": ["mon"], "start": "09:00", "end": "17:00"},
            {"days": ["tue"], "start": "17:00", "end": "09:00"},
        ]
        response = await api.post("/schedules", json=backwards)
        assert_error(response, 422, "invalid_value", param="layers[0].restrictions[1].end")
        # a PATCH of the zone alone is checked with the stored layers
        schedule = await _schedule(api, ann)
        assert_error(
            await api.patch(f"/schedules/{schedule['id']}", json={"time_zone": "Nowhere/X"}),
            422,
            "invalid_time_zone",
            param="time_zone",
        )


async def test_another_accounts_ids_are_unknown(
    api: Api, api_for: Callable[..., Awaitable[Api]]
) -> None:
    with trio.fail_after(20):
        (ann,) = await _members(api, "Ann")
        schedule = await _schedule(api, ann)
        other = await api_for(account="other")
        (olga,) = await _members(other, "Olga")
        path = f"/schedules/{schedule['id']}"
        for response in (
            await other.get(path),
            await other.patch(path, json={"name": "x"}),
            await other.get(f"{path}/on-call"),
            await other.get(f"{path}/shifts"),
            await other.get(f"{path}/overrides"),
            await other.post(f"{path}/overrides", json={"member": olga, "start": 1, "end": 2}),
            await other.post(f"{path}/rotate-calendar-key"),
            await other.delete(path),
        ):
            assert_error(response, 404, "resource_missing")
        # nor may a schedule name another account's member
        assert_error(
            await other.post("/schedules", json=_weekly(olga, ann)),
            422,
            "unknown_member",
            param="layers[0].members[1]",
        )
        override = {"member": olga, "start": MONDAY, "end": MONDAY + DAY}
        assert_error(
            await api.post(f"{path}/overrides", json=override),
            422,
            "unknown_member",
            param="member",
        )
        # nor a policy step target another account's schedule
        step = {"delay_seconds": 0, "targets": [{"type": "schedule", "id": schedule["id"]}]}
        policy = {"name": "p", "steps": [step]}
        assert_error(
            await other.post("/escalation-policies", json=policy),
            422,
            "unknown_schedule",
            param="steps[0].targets[0].id",
        )
        used = expect(await api.post("/escalation-policies", json=policy), 201)
        # a schedule a policy pages through is kept until the policy lets go of it
        error = assert_error(await api.delete(path), 409, "schedule_in_use")
        assert used["id"] in error["message"]
        expect(await api.delete(f"/escalation-policies/{used['id']}"), 204)
        expect(await api.delete(path), 204)


async def test_on_call_and_shifts_of_a_weekly_rotation(api: Api) -> None:
    with trio.fail_after(20):
        ann, bob, cid = await _members(api, "Ann", "Bob", "Cid")
        schedule = await _schedule(api, ann, bob, cid)
        path = f"/schedules/{schedule['id']}"
        now = expect(await api.get(f"{path}/on-call", query={"at": MONDAY + 2 * DAY}))
        assert now["object"] == "on_call" and now["schedule"] == schedule["id"]
        assert [m["id"] for m in now["members"]] == [ann]
        assert now["members"][0]["name"] == "Ann" and now["members"][0]["object"] == "member"
        assert now["until"] == MONDAY + WEEK
        later = expect(await api.get(f"{path}/on-call", query={"at": MONDAY + WEEK + DAY}))
        assert [m["id"] for m in later["members"]] == [bob]
        # an override for Cid on the Tuesday wins over Ann's week
        body = {"member": cid, "start": MONDAY + DAY, "end": MONDAY + 2 * DAY}
        override = expect(await api.post(f"{path}/overrides", json=body), 201)
        assert override["object"] == "schedule_override" and override["member"] == cid
        assert (override["start"], override["end"]) == (MONDAY + DAY, MONDAY + 2 * DAY)
        during = expect(await api.get(f"{path}/on-call", query={"at": MONDAY + DAY + 60}))
        assert [m["id"] for m in during["members"]] == [cid]
        assert during["until"] == MONDAY + 2 * DAY
        shifts = expect(
            await api.get(f"{path}/shifts", query={"start": MONDAY, "end": MONDAY + 3 * WEEK})
        )
        got = [
            (s["member"], s["start"], s["end"], s["layer"], s["override"]) for s in shifts["data"]
        ]
        assert got == [
            (ann, MONDAY, MONDAY + DAY, 0, None),
            (cid, MONDAY + DAY, MONDAY + 2 * DAY, None, override["id"]),
            (ann, MONDAY + 2 * DAY, MONDAY + WEEK, 0, None),
            (bob, MONDAY + WEEK, MONDAY + 2 * WEEK, 0, None),
            (cid, MONDAY + 2 * WEEK, MONDAY + 3 * WEEK, 0, None),
        ]
        listed = expect(await api.get(f"{path}/overrides"))
        assert [o["id"] for o in listed["data"]] == [override["id"]]
        expect(await api.delete(f"{path}/overrides/{override['id']}"), 204)
        assert_error(
            await api.delete(f"{path}/overrides/{override['id']}"), 404, "resource_missing"
        )
        again = expect(await api.get(f"{path}/on-call", query={"at": MONDAY + DAY + 60}))
        assert [m["id"] for m in again["members"]] == [ann]


async def test_overrides_and_ranges_are_checked(api: Api) -> None:
    with trio.fail_after(20):
        (ann,) = await _members(api, "Ann")
        path = f"/schedules/{(await _schedule(api, ann))['id']}"
        backwards = {"member": ann, "start": MONDAY, "end": MONDAY}
        assert_error(
            await api.post(f"{path}/overrides", json=backwards), 422, "invalid_value", param="end"
        )
        for query in (
            {"start": MONDAY, "end": MONDAY},
            {"start": MONDAY, "end": MONDAY + 91 * DAY},
        ):
            assert_error(
                await api.get(f"{path}/shifts", query=query), 400, "invalid_parameter", param="end"
            )
        # overrides list by start, with cursors
        for day in (3, 1, 2):
            body = {"member": ann, "start": MONDAY + day * DAY, "end": MONDAY + day * DAY + 60}
            expect(await api.post(f"{path}/overrides", json=body), 201)
        first = expect(await api.get(f"{path}/overrides", query={"limit": 2}))
        assert [o["start"] for o in first["data"]] == [MONDAY + DAY, MONDAY + 2 * DAY]
        assert first["has_more"] is True
        rest = expect(
            await api.get(f"{path}/overrides", query={"starting_after": first["data"][-1]["id"]})
        )
        assert [o["start"] for o in rest["data"]] == [MONDAY + 3 * DAY]
        upcoming = expect(
            await api.get(f"{path}/overrides", query={"ends_after": MONDAY + 2 * DAY + 60})
        )
        assert [o["start"] for o in upcoming["data"]] == [MONDAY + 3 * DAY]


async def _calendar(api: Api, schedule_id: str, key: str | None) -> tuple[int, bytes, Any]:
    query = {} if key is None else {"key": key}
    response = await api.client.open(
        f"/schedules/{schedule_id}/calendar.ics", method="GET", query_string=query
    )
    return response.status_code, await response.get_data(), response.headers


async def test_the_calendar_feed_and_its_key(api: Api) -> None:
    with trio.fail_after(20):
        ann, bob, cid = await _members(api, "Ann", "Bob", "Cid")
        schedule = await _schedule(api, ann, bob, cid)
        status, raw, headers = await _calendar(api, schedule["id"], schedule["calendar_key"])
        assert status == 200, raw
        assert headers["Content-Type"] == "text/calendar; charset=utf-8"
        calendar = Calendar.from_ical(raw)
        assert str(calendar["X-WR-CALNAME"]) == "ops" and "Uptrio" in str(calendar["PRODID"])
        events = calendar.walk("VEVENT")
        # the 90 days from 00:00 UTC on Wednesday 7 January: the shift under way cut at
        # their start, the 13 Monday handoffs up to 6 April, the last shift cut at the end
        assert len(events) == 14
        assert events[0].decoded("DTSTART") == datetime(2026, 1, 7, tzinfo=UTC)
        assert events[-1].decoded("DTEND") == datetime(2026, 4, 7, tzinfo=UTC)
        summaries = {str(e["SUMMARY"]) for e in events}
        assert summaries == {"On call: Ann", "On call: Bob", "On call: Cid"}
        for event in events:
            start, end = event.decoded("DTSTART"), event.decoded("DTEND")
            assert start.tzinfo is not None and start.utcoffset().total_seconds() == 0
            assert 0 < (end - start).total_seconds() <= WEEK
        whole = events[1:-1]
        lengths = [(e.decoded("DTEND") - e.decoded("DTSTART")).total_seconds() for e in whole]
        # a week each, but the one across Berlin's spring-forward night of 29 March
        assert lengths == [WEEK] * 10 + [WEEK - 3600] + [WEEK]
        berlin = ZoneInfo("Europe/Berlin")
        assert {e.decoded("DTSTART").astimezone(berlin).hour for e in whole} == {9}
        assert len({str(e["UID"]) for e in events}) == len(events)
        # the same feed twice: the same UIDs (a calendar application updates in place)
        again = Calendar.from_ical(
            (await _calendar(api, schedule["id"], schedule["calendar_key"]))[1]
        )
        assert [str(e["UID"]) for e in again.walk("VEVENT")] == [str(e["UID"]) for e in events]
        assert "calendar_key" not in raw.decode() and schedule["calendar_key"] not in raw.decode()
        # a wrong, missing or old key is a 404 like an unknown schedule's
        unknown = await _calendar(api, "sch_nothere", schedule["calendar_key"])
        for key in ("0" * 32, None, schedule["calendar_key"][:-1]):
            assert (await _calendar(api, schedule["id"], key))[:2] == unknown[:2]
        assert unknown[:2] == (404, b"no such calendar\n")
        rotated = expect(await api.post(f"/schedules/{schedule['id']}/rotate-calendar-key"))
        assert rotated["calendar_key"] != schedule["calendar_key"]
        assert (await _calendar(api, schedule["id"], schedule["calendar_key"]))[0] == 404
        assert (await _calendar(api, schedule["id"], rotated["calendar_key"]))[0] == 200


async def test_events_leave_the_key_out(api: Api, api_for: Callable[..., Awaitable[Api]]) -> None:
    with trio.fail_after(20):
        ann, bob = await _members(api, "Ann", "Bob")
        schedule = await _schedule(api, ann)
        path = f"/schedules/{schedule['id']}"
        expect(await api.patch(path, json={"name": "renamed"}))
        body = {"member": bob, "start": MONDAY, "end": MONDAY + DAY}
        override = expect(await api.post(f"{path}/overrides", json=body), 201)
        expect(await api.delete(f"{path}/overrides/{override['id']}"), 204)
        expect(await api.delete(path), 204)
        reader = await api_for(permissions=["on_call.read"])
        listed = expect(await reader.get("/events", query={"type": "schedule.*"}))["data"]
        assert [e["type"] for e in listed] == [
            "schedule.deleted",
            "schedule.override_deleted",
            "schedule.override_created",
            "schedule.updated",
            "schedule.created",
        ]
        assert listed[3]["data"]["previous_attributes"] == {"name": "ops"}
        assert listed[1]["data"]["object"]["id"] == override["id"]
        for event in listed:
            assert schedule["calendar_key"] not in str(event)
        monitors_only = await api_for(permissions=["monitors.read"])
        assert (
            expect(await monitors_only.get("/events", query={"type": "schedule.*"}))["data"] == []
        )


async def test_deleting_a_member_takes_them_out_of_schedules(api: Api) -> None:
    with trio.fail_after(20):
        ann, bob = await _members(api, "Ann", "Bob")
        schedule = await _schedule(api, ann, bob)
        path = f"/schedules/{schedule['id']}"
        body = {"member": bob, "start": MONDAY, "end": MONDAY + DAY}
        expect(await api.post(f"{path}/overrides", json=body), 201)
        expect(await api.delete(f"/members/{bob}"), 204)
        after = expect(await api.get(path))
        assert after["layers"][0]["members"] == [ann]
        assert expect(await api.get(f"{path}/overrides"))["data"] == []
        # Ann is now the layer's only member: her deletion is refused, nothing changes
        error = assert_error(await api.delete(f"/members/{ann}"), 409, "member_in_use")
        assert schedule["id"] in error["message"]
        expect(await api.get(f"/members/{ann}"))
        assert expect(await api.get(path))["layers"][0]["members"] == [ann]


async def test_load_plan_gives_the_overrides_that_overlap_the_range(api: Api, db: Database) -> None:
    with trio.fail_after(20):
        ann, bob = await _members(api, "Ann", "Bob")
        schedule = await _schedule(api, ann)
        path = f"/schedules/{schedule['id']}/overrides"
        made = []
        for start, end in ((0, 10), (10, 20), (15, 30), (30, 40)):
            body = {"member": bob, "start": MONDAY + start, "end": MONDAY + end}
            made.append(expect(await api.post(path, json=body), 201)["id"])
        loaded = await db.run(schedules.load_plan, schedule["id"], MONDAY + 10, MONDAY + 30)
        assert loaded is not None
        plan, overrides = loaded
        assert plan.time_zone == "Europe/Berlin" and plan.layers[0].members == (ann,)
        assert [o.id for o in overrides] == made[1:3]  # [10, 20) and [15, 30) only
        assert (overrides[0].member, overrides[0].start, overrides[0].end) == (
            bob,
            MONDAY + 10,
            MONDAY + 20,
        )
        assert await db.run(schedules.load_plan, "sch_gone", 0, 1) is None
