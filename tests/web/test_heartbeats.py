"""Heartbeats through the API (docs/heartbeats.md, API): CRUD, pause and resume, the
conventions of docs/api.md (ids, metadata, bounds, pagination, idempotency, errors), their
events, and the ping URL. Real app, real Postgres, no engine (the pings are
tests/web/test_pings.py's); a time limit inside each test.
"""

from __future__ import annotations

from typing import Any

import trio

from tests.api import Api
from tests.web.helpers import assert_error, expect
from web.api.events import EventList
from web.api.heartbeats import HeartbeatList, HeartbeatObject


async def create_heartbeat(api: Api, **fields: Any) -> dict[str, Any]:
    """POST /heartbeats; asserts 201 and the object's shape."""
    body = expect(
        await api.post("/heartbeats", json={"name": "backup", "period_seconds": 86_400, **fields}),
        201,
    )
    HeartbeatObject.model_validate(body)
    return body  # type: ignore[no-any-return]


async def test_heartbeat_crud_round_trip(api: Api) -> None:
    with trio.fail_after(15):
        beat = await create_heartbeat(api, metadata={"team": "ops"})
        assert beat["id"].startswith("hbt_") and beat["object"] == "heartbeat"
        assert beat["status"] == "pending" and beat["last_ping_at"] is None
        assert beat["grace_seconds"] == 60 and beat["period_seconds"] == 86_400
        assert beat["auto_incidents"] is True and beat["incident_severity"] == "major"
        # <base>/ping/<key>: the base URL the request came to, the key 128 random bits
        base, _, key = beat["ping_url"].rpartition("/ping/")
        assert base == "http://localhost" and len(key) == 32 and int(key, 16) >= 0
        other = await create_heartbeat(api, name="nightly")
        assert other["ping_url"] != beat["ping_url"]
        assert expect(await api.get(f"/heartbeats/{beat['id']}")) == beat

        listed = expect(await api.get("/heartbeats", query={"sort": "name", "limit": 1}))
        HeartbeatList.model_validate(listed)
        assert listed["url"] == "/heartbeats" and listed["has_more"]
        assert [b["id"] for b in listed["data"]] == [beat["id"]]

        patched = expect(
            await api.patch(
                f"/heartbeats/{beat['id']}",
                json={
                    "period_seconds": 3600,
                    "grace_seconds": 0,
                    "incident_severity": "critical",
                    "metadata": {"team": "", "tier": "1"},
                },
            )
        )
        assert patched["period_seconds"] == 3600 and patched["grace_seconds"] == 0
        assert patched["metadata"] == {"tier": "1"} and patched["ping_url"] == beat["ping_url"]
        unchanged = expect(await api.patch(f"/heartbeats/{beat['id']}", json={"grace_seconds": 0}))
        assert unchanged["updated"] == patched["updated"]

        paused = expect(await api.post(f"/heartbeats/{beat['id']}/pause"))
        assert paused["status"] == "paused"
        assert expect(await api.post(f"/heartbeats/{beat['id']}/pause")) == paused  # no-op
        assert [b["id"] for b in expect(await api.get("/heartbeats?status=paused"))["data"]] == [
            beat["id"]
        ]
        resumed = expect(await api.post(f"/heartbeats/{beat['id']}/resume"))
        assert resumed["status"] == "pending"

        assert (await api.delete(f"/heartbeats/{beat['id']}"))[0] == 204
        assert_error(await api.get(f"/heartbeats/{beat['id']}"), 404, "resource_missing")
        assert_error(await api.get(f"/heartbeats/{beat['id']}/pings"), 404, "resource_missing")
        assert_error(await api.delete(f"/heartbeats/{beat['id']}"), 404, "resource_missing")
        assert_error(await api.get("/heartbeats/mon_nothing"), 404, "resource_missing")

        events = expect(await api.get("/events", query={"type": "heartbeat.*"}))
        EventList.model_validate(events)
        assert [e["type"] for e in events["data"]] == [
            "heartbeat.deleted",
            "heartbeat.resumed",
            "heartbeat.paused",
            "heartbeat.updated",
            "heartbeat.created",
            "heartbeat.created",
        ]
        updated = events["data"][3]["data"]
        assert updated["previous_attributes"] == {
            "period_seconds": 86_400,
            "grace_seconds": 60,
            "incident_severity": "major",
            "metadata": {"team": "ops"},
        }
        assert updated["object"]["ping_url"] == beat["ping_url"]


async def test_bounds_and_fields_are_checked(api: Api) -> None:
    with trio.fail_after(15):
        cases: list[tuple[dict[str, Any], str, str]] = [
            ({"name": "n"}, "parameter_missing", "period_seconds"),
            ({"name": "n", "period_seconds": 29}, "value_out_of_range", "period_seconds"),
            ({"name": "n", "period_seconds": 2_592_001}, "value_out_of_range", "period_seconds"),
            ({"name": "n", "period_seconds": 60, "grace_seconds": -1}, "value_out_of_range",
             "grace_seconds"),
            ({"name": "n", "period_seconds": 60, "grace_seconds": 86_401},
             "value_out_of_range", "grace_seconds"),
            ({"name": "", "period_seconds": 60}, "value_too_short", "name"),
            ({"name": "n", "period_seconds": "60"}, "invalid_type", "period_seconds"),
            ({"name": "n", "period_seconds": 60, "status": "up"}, "parameter_unknown", "status"),
            ({"name": "n", "period_seconds": 60, "ping_url": "x"}, "parameter_unknown",
             "ping_url"),
            ({"name": "n", "period_seconds": 60, "incident_severity": "low"}, "invalid_value",
             "incident_severity"),
        ]  # fmt: skip
        for body, code, param in cases:
            assert_error(await api.post("/heartbeats", json=body), 422, code, param=param)
        beat = await create_heartbeat(api, period_seconds=30, grace_seconds=86_400)
        assert beat["period_seconds"] == 30 and beat["grace_seconds"] == 86_400
        assert_error(
            await api.patch(f"/heartbeats/{beat['id']}", json={"name": None}),
            422,
            "invalid_type",
            param="name",
        )
        assert_error(
            await api.patch(f"/heartbeats/{beat['id']}", json={"period_seconds": 10}),
            422,
            "value_out_of_range",
            param="period_seconds",
        )
        assert_error(
            await api.get("/heartbeats", query={"status": "late"}), 400, "invalid_parameter"
        )
        assert_error(
            await api.get(f"/heartbeats/{beat['id']}/pings", query={"kind": "ok"}),
            400,
            "invalid_parameter",
            param="kind",
        )
        assert_error(
            await api.get(f"/heartbeats/{beat['id']}/pings", query={"starting_after": "png_x"}),
            400,
            "cursor_not_found",
        )


async def test_idempotent_create_and_other_accounts(api: Api, api_for: Any) -> None:
    with trio.fail_after(15):
        key = {"Idempotency-Key": "create-backup-1"}
        body = {"name": "backup", "period_seconds": 3600}
        first = expect(await api.post("/heartbeats", json=body, headers=key), 201)
        status, again, headers = await api.post("/heartbeats", json=body, headers=key)
        assert status == 201 and again == first and headers["Idempotent-Replayed"] == "true"
        assert len(expect(await api.get("/heartbeats"))["data"]) == 1
        stranger = await api_for(account="other")
        assert_error(await stranger.get(f"/heartbeats/{first['id']}"), 404, "resource_missing")
        assert_error(
            await stranger.post(f"/heartbeats/{first['id']}/pause"), 404, "resource_missing"
        )
        assert expect(await stranger.get("/heartbeats"))["data"] == []
        assert expect(await stranger.get("/events", query={"type": "heartbeat.*"}))["data"] == []


async def test_an_incident_may_name_the_accounts_own_heartbeats(api: Api, api_for: Any) -> None:
    # The incident a heartbeat opens names its hbt_ id in `monitors`; a client that sends
    # that list back in a PATCH (or names a heartbeat itself) is not refused. A status
    # page's components stay monitors: they are drawn from monitors' rollups.
    with trio.fail_after(15):
        beat = await create_heartbeat(api)
        incident = expect(
            await api.post("/incidents", json={"title": "backup late", "monitors": [beat["id"]]}),
            201,
        )
        assert incident["monitors"] == [beat["id"]]
        path = f"/incidents/{incident['id']}"
        patched = expect(await api.patch(path, json={"monitors": incident["monitors"]}))
        assert patched["monitors"] == [beat["id"]]
        stranger = await api_for(account="other")
        assert_error(
            await stranger.post("/incidents", json={"title": "x", "monitors": [beat["id"]]}),
            422,
            "unknown_monitor",
        )
        page = {"name": "p", "slug": "page-one", "components": [{"monitor": beat["id"]}]}
        assert_error(await api.post("/status-pages", json=page), 422, "invalid_value")
