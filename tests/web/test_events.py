"""``GET /events`` and ``GET /events/:id`` (docs/incidents.md, Events): the event each API
mutation writes, its shape, filters, pagination and the permission filter."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import trio

from tests.api import Api
from tests.web.helpers import assert_error, create_incident, create_monitor, expect
from web.api.events import EventList, EventObject


async def _events(api: Api, **query: Any) -> list[dict[str, Any]]:
    page = expect(await api.get("/events", query=query or None))
    EventList.model_validate(page)
    return page["data"]  # type: ignore[no-any-return]


async def test_every_monitor_mutation_writes_its_event_with_its_request(api: Api) -> None:
    with trio.fail_after(15):
        key = "5b0c8f0e-9d2c-4d7e-8f1a-2b3c4d5e6f70"
        status, monitor, headers = await api.post(
            "/monitors",
            json={"name": "web", "url": "https://example.com/", "type": "http"},
            headers={"Idempotency-Key": key},
        )
        assert status == 201
        mid = monitor["id"]
        expect(await api.patch(f"/monitors/{mid}", json={"name": "web 2", "metadata": {"a": "1"}}))
        expect(await api.patch(f"/monitors/{mid}", json={"name": "web 2"}))  # no change
        expect(await api.post(f"/monitors/{mid}/pause"))
        expect(await api.post(f"/monitors/{mid}/pause"))  # a no-op: no event
        expect(await api.post(f"/monitors/{mid}/resume"))
        expect(await api.delete(f"/monitors/{mid}"), 204)
        events = await _events(api)
        assert [e["type"] for e in events] == [
            "monitor.deleted",
            "monitor.resumed",
            "monitor.paused",
            "monitor.updated",
            "monitor.created",
        ]
        created = events[-1]
        EventObject.model_validate(created)
        assert created["request"] == {"id": headers["Request-Id"], "idempotency_key": key}
        assert created["data"] == {"object": monitor, "previous_attributes": None}
        updated = events[-2]["data"]
        assert updated["object"]["name"] == "web 2"
        assert updated["previous_attributes"] == {"name": "web", "metadata": {}}
        assert events[-3]["data"]["previous_attributes"] == {"status": "pending"}
        assert events[-4]["data"]["previous_attributes"] == {"status": "paused"}
        assert events[0]["data"]["object"]["id"] == mid
        assert events[0]["request"]["idempotency_key"] is None
        one = expect(await api.get(f"/events/{events[1]['id']}"))
        assert one == events[1]


async def test_incident_mutations_write_their_events(api: Api) -> None:
    with trio.fail_after(15):
        incident = await create_incident(api, description="slow")
        iid = incident["id"]
        expect(await api.patch(f"/incidents/{iid}", json={"severity": "minor"}))
        expect(await api.post(f"/incidents/{iid}/updates", json={"message": "found it"}), 201)
        expect(await api.post(f"/incidents/{iid}/resolve", json={"resolution_message": "ok"}))
        expect(await api.delete(f"/incidents/{iid}"), 204)
        events = await _events(api, type="incident.*")
        assert [e["type"] for e in events] == [
            "incident.deleted",
            "incident.resolved",
            "incident.update_posted",
            "incident.updated",
            "incident.created",
        ]
        resolved = events[1]["data"]
        assert resolved["object"]["status"] == "resolved"
        assert resolved["previous_attributes"]["status"] == "investigating"
        assert resolved["previous_attributes"]["resolved_at"] is None
        posted = events[2]["data"]["object"]
        assert posted["object"] == "incident_update" and posted["message"] == "found it"
        assert events[3]["data"]["previous_attributes"] == {"severity": "major"}


async def test_filters_by_type_and_time_and_pages_both_ways(api: Api) -> None:
    with trio.fail_after(20):
        for n in range(5):
            await create_monitor(api, name=f"m{n}")
        await create_incident(api)
        assert len(await _events(api, type="monitor.created")) == 5
        assert len(await _events(api, type="monitor.*")) == 5
        assert len(await _events(api, type="incident.*")) == 1
        assert len(await _events(api, type="*")) == 6
        assert await _events(api, type="monitor.deleted") == []
        everything = await _events(api, limit=100)
        newest = everything[0]["created"]
        assert await _events(api, **{"created[gt]": newest}) == []
        assert len(await _events(api, **{"created[gte]": newest})) >= 1
        assert len(await _events(api, **{"created[lte]": newest})) == 6
        first = expect(await api.get("/events", query={"limit": 2}))
        assert first["has_more"] is True
        second = expect(
            await api.get("/events", query={"limit": 2, "starting_after": first["data"][-1]["id"]})
        )
        back = expect(
            await api.get("/events", query={"limit": 2, "ending_before": second["data"][0]["id"]})
        )
        assert back["data"] == first["data"]
        ids = [e["id"] for e in first["data"] + second["data"]]
        assert ids == [e["id"] for e in everything[:4]]
        for bad, code in (
            ({"type": "mon*itor"}, "invalid_parameter"),
            ({"created[gt]": "soon"}, "invalid_parameter"),
            ({"color": "red"}, "unknown_parameter"),
        ):
            assert_error(await api.get("/events", query=bad), 400, code)
        assert_error(
            await api.get("/events", query={"starting_after": "evt_nothere"}),
            400,
            "cursor_not_found",
        )


async def test_a_token_sees_only_the_events_of_resources_it_may_read(
    api: Api, api_for: Callable[..., Awaitable[Api]]
) -> None:
    with trio.fail_after(15):
        await create_monitor(api)
        await create_incident(api)
        everything = await _events(api)
        by_type = {e["type"]: e["id"] for e in everything}
        monitors_only = await api_for(permissions=["monitors.read"])
        incidents_only = await api_for(permissions=["incidents.read"])
        writer = await api_for(permissions=["monitors.create", "incidents.create"])
        assert [e["type"] for e in await _events(monitors_only)] == ["monitor.created"]
        assert [e["type"] for e in await _events(incidents_only)] == ["incident.created"]
        assert_error(
            await monitors_only.get(f"/events/{by_type['incident.created']}"),
            404,
            "resource_missing",
        )
        expect(await incidents_only.get(f"/events/{by_type['incident.created']}"))
        assert_error(
            await monitors_only.get(
                "/events", query={"starting_after": by_type["incident.created"]}
            ),
            400,
            "cursor_not_found",
        )
        for path in ("/events", f"/events/{by_type['monitor.created']}"):
            assert_error(await writer.get(path), 403, "missing_permission")
        other = await api_for(account="globex")
        assert await _events(other) == []
        assert_error(
            await other.get(f"/events/{by_type['monitor.created']}"), 404, "resource_missing"
        )
