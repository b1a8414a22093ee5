"""Incident timelines and the incident fields of docs/incidents.md (Incidents, Timelines):
``monitors``, ``monitor``, ``postmortem``, ``POST`` and ``GET /incidents/:id/updates``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import trio

from store import Database, incidents
from tests.api import Api
from tests.web.helpers import assert_error, create_incident, create_monitor, expect, sql
from web.api.incidents import IncidentUpdateList, IncidentUpdateObject


async def _timeline(api: Api, incident_id: str, **query: Any) -> list[dict[str, Any]]:
    page = expect(await api.get(f"/incidents/{incident_id}/updates", query=query or None))
    IncidentUpdateList.model_validate(page)
    return page["data"]  # type: ignore[no-any-return]


async def test_the_timeline_tells_the_story_oldest_first(api: Api) -> None:
    with trio.fail_after(15):
        incident = await create_incident(api, description="Checkout fails")
        iid = incident["id"]
        expect(await api.patch(f"/incidents/{iid}", json={"title": "Checkout 500s"}))
        expect(await api.patch(f"/incidents/{iid}", json={"status": "identified"}))
        status, posted, _ = await api.post(
            f"/incidents/{iid}/updates",
            json={"message": "Fix deployed", "status": "monitoring"},
        )
        assert status == 201
        IncidentUpdateObject.model_validate(posted)
        expect(await api.post(f"/incidents/{iid}/updates", json={"message": "Still fine"}), 201)
        expect(await api.post(f"/incidents/{iid}/resolve", json={"resolution_message": "Done"}))
        timeline = await _timeline(api, iid)
        assert [(u["status"], u["message"]) for u in timeline] == [
            ("investigating", "Checkout fails"),
            ("identified", None),
            ("monitoring", "Fix deployed"),
            ("monitoring", "Still fine"),
            ("resolved", "Done"),
        ]
        assert timeline[2] == posted
        assert all(u["incident"] == iid for u in timeline)
        assert expect(await api.get(f"/incidents/{iid}"))["status"] == "resolved"
        page = expect(await api.get(f"/incidents/{iid}/updates", query={"limit": 2}))
        assert page["has_more"] is True
        rest = await _timeline(api, iid, starting_after=page["data"][-1]["id"])
        assert [u["id"] for u in page["data"] + rest] == [u["id"] for u in timeline]
        assert await _timeline(api, iid, ending_before=timeline[2]["id"]) == timeline[:2]
        assert_error(
            await api.get(f"/incidents/{iid}/updates", query={"sort": "-created"}),
            400,
            "unknown_parameter",
        )


async def test_posting_an_update_validates_and_404s(
    api: Api, api_for: Callable[..., Awaitable[Api]]
) -> None:
    with trio.fail_after(15):
        iid = (await create_incident(api))["id"]
        for body, code in (
            ({}, "parameter_missing"),
            ({"message": ""}, "value_too_short"),
            ({"message": "x", "status": "fixed"}, "invalid_value"),
            ({"message": 1}, "invalid_type"),
        ):
            assert_error(await api.post(f"/incidents/{iid}/updates", json=body), 422, code)
        missing = "inc_" + "a" * 24
        assert_error(
            await api.post(f"/incidents/{missing}/updates", json={"message": "x"}),
            404,
            "resource_missing",
        )
        assert_error(await api.get(f"/incidents/{missing}/updates"), 404, "resource_missing")
        other = await api_for(account="globex")
        assert_error(await other.get(f"/incidents/{iid}/updates"), 404, "resource_missing")
        assert len(await _timeline(api, iid)) == 1


async def test_a_timeline_holds_at_most_1000_entries_and_can_always_be_resolved(
    api: Api, db: Database
) -> None:
    with trio.fail_after(30):
        iid = (await create_incident(api))["id"]
        await sql(
            db,
            "INSERT INTO incident_updates (id, account_id, incident_id, status, message, "
            "created) SELECT 'inu_' || md5(random()::text), account_id, id, status, 'x', "
            "created FROM incidents, generate_series(1, 998) WHERE id = $1",
            iid,
        )
        expect(await api.post(f"/incidents/{iid}/updates", json={"message": "last"}), 201)
        full = "too_many_updates"
        for method, path, body in (
            ("POST", f"/incidents/{iid}/updates", {"message": "one more"}),
            ("POST", f"/incidents/{iid}/updates", {"message": "m", "status": "identified"}),
            ("PATCH", f"/incidents/{iid}", {"status": "identified"}),
        ):
            error = assert_error(await api.request(method, path, json=body), 400, full)
            assert "1,000" in error["message"]
        # other fields still change; a move into resolved is always taken (one more entry)
        expect(await api.patch(f"/incidents/{iid}", json={"title": "Checkout 500s"}))
        expect(await api.post(f"/incidents/{iid}/resolve", json={"resolution_message": "ok"}))
        assert_error(await api.patch(f"/incidents/{iid}", json={"status": "monitoring"}), 400, full)
        assert await _count(db, iid) == 1001
        incident = expect(await api.get(f"/incidents/{iid}"))
        assert incident["status"] == "resolved" and incident["title"] == "Checkout 500s"
        assert incidents.MAX_UPDATES == 1000


async def _count(db: Database, incident_id: str) -> int:
    async def count(connection: Any) -> int:
        return int(
            await connection.fetchval(
                "SELECT count(*) FROM incident_updates WHERE incident_id = $1", incident_id
            )
        )

    return await db.run(count)


async def test_affected_monitors_must_be_the_accounts_own(
    api: Api, api_for: Callable[..., Awaitable[Api]]
) -> None:
    with trio.fail_after(15):
        mine = [(await create_monitor(api, name=f"m{n}"))["id"] for n in range(2)]
        theirs = (await create_monitor(await api_for(account="globex")))["id"]
        incident = await create_incident(api, monitors=[mine[0], mine[0], mine[1]])
        assert incident["monitors"] == mine
        assert incident["monitor"] is None and incident["postmortem"] is None
        error = assert_error(
            await api.post("/incidents", json={"title": "t", "monitors": [mine[0], theirs]}),
            422,
            "unknown_monitor",
            param="monitors",
        )
        assert theirs in error["message"]
        too_many = [f"mon_{n:024d}" for n in range(101)]
        for monitors, code in ((too_many, "value_too_long"), (["x"], "invalid_value")):
            body = {"title": "t", "monitors": monitors}
            assert_error(await api.post("/incidents", json=body), 422, code)
        iid = incident["id"]
        assert_error(
            await api.patch(f"/incidents/{iid}", json={"monitors": [theirs]}),
            422,
            "unknown_monitor",
        )
        patched = expect(
            await api.patch(f"/incidents/{iid}", json={"monitors": [mine[1]], "postmortem": "RCA"})
        )
        assert (patched["monitors"], patched["postmortem"]) == ([mine[1]], "RCA")
        long = {"postmortem": "x" * 50_001}
        assert_error(await api.patch(f"/incidents/{iid}", json=long), 422, "value_too_long")
        cleared = expect(await api.patch(f"/incidents/{iid}", json={"postmortem": None}))
        assert cleared["postmortem"] is None
        assert_error(
            await api.patch(f"/incidents/{iid}", json={"monitor": mine[0]}),
            422,
            "parameter_unknown",
        )


async def test_monitor_incident_settings(api: Api) -> None:
    with trio.fail_after(15):
        monitor = await create_monitor(api)
        assert (monitor["auto_incidents"], monitor["incident_severity"]) == (True, "major")
        mid = monitor["id"]
        patched = expect(
            await api.patch(
                f"/monitors/{mid}", json={"auto_incidents": False, "incident_severity": "minor"}
            )
        )
        assert (patched["auto_incidents"], patched["incident_severity"]) == (False, "minor")
        for bad, code in (
            ({"auto_incidents": "yes"}, "invalid_type"),
            ({"incident_severity": "huge"}, "invalid_value"),
        ):
            assert_error(await api.patch(f"/monitors/{mid}", json=bad), 422, code)
