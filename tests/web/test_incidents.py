"""Incident endpoints and the decisions on them (docs/incidents.md, Incidents): defaults,
resolve and ``incident_not_open``, PATCH status moves and ``resolved_at``,
``resolution_message``, lengths, metadata.
"""

from __future__ import annotations

import time
from typing import Any

import trio

from store import Database
from tests.api import Api
from tests.web.helpers import assert_error, create_incident, expect, set_times, sql
from web.api.incidents import IncidentList, IncidentObject

OLD = 1_000_000_000


async def test_every_incident_endpoint_answers_with_its_success_status(api: Api) -> None:
    with trio.fail_after(10):
        before = int(time.time())
        status, created, _ = await api.post("/incidents", json={"title": "API down"})
        assert status == 201, created
        IncidentObject.model_validate(created)
        assert created["id"].startswith("inc_") and created["object"] == "incident"
        assert created["status"] == "investigating" and created["severity"] == "major"
        for field in ("description", "resolved_at", "resolution_message"):
            assert field in created and created[field] is None
        assert created["metadata"] == {}
        assert type(created["created"]) is int and type(created["updated"]) is int
        assert before <= created["created"] == created["updated"] <= int(time.time())
        path = f"/incidents/{created['id']}"

        assert expect(await api.get(path)) == created
        page = expect(await api.get("/incidents"))
        IncidentList.model_validate(page)
        assert page == {"object": "list", "data": [created], "has_more": False, "url": "/incidents"}

        patched = expect(
            await api.patch(path, json={"description": "500s", "severity": "critical"})
        )
        IncidentObject.model_validate(patched)
        assert patched["description"] == "500s" and patched["severity"] == "critical"
        assert patched["title"] == "API down" and patched["status"] == "investigating"

        resolved = expect(await api.post(f"{path}/resolve"))
        IncidentObject.model_validate(resolved)
        assert resolved["status"] == "resolved"
        assert created["created"] <= resolved["resolved_at"] <= int(time.time())
        assert resolved["resolution_message"] is None

        status, body, _ = await api.delete(path)
        assert status == 204 and body is None
        assert_error(await api.get(path), 404, "resource_missing", param="id")
        assert_error(await api.delete(path), 404, "resource_missing")
        assert_error(await api.post(f"{path}/resolve"), 404, "resource_missing")
        assert expect(await api.get("/incidents"))["data"] == []


async def test_create_accepts_every_field_and_a_resolved_status(api: Api) -> None:
    with trio.fail_after(10):
        incident = await create_incident(
            api,
            title="db",
            description="replica lag",
            severity="minor",
            status="identified",
            metadata={"region": "eu"},
        )
        assert incident["description"] == "replica lag" and incident["severity"] == "minor"
        assert incident["status"] == "identified" and incident["resolved_at"] is None
        assert incident["metadata"] == {"region": "eu"}
        resolved = await create_incident(api, status="resolved")
        assert resolved["resolved_at"] == resolved["created"]
        assert_error(
            await api.post(f"/incidents/{resolved['id']}/resolve"), 400, "incident_not_open"
        )


async def test_resolve_on_a_resolved_incident_is_400_incident_not_open(
    api: Api, db: Database
) -> None:
    with trio.fail_after(10):
        incident = await create_incident(api)
        path = f"/incidents/{incident['id']}"
        first = expect(await api.post(f"{path}/resolve", json={"resolution_message": "fixed"}))
        await set_times(db, "incidents", incident["id"], created=OLD, updated=OLD)
        assert_error(
            await api.post(f"{path}/resolve", json={"resolution_message": "again"}),
            400,
            "incident_not_open",
            param="id",
        )
        got = expect(await api.get(path))
        assert got["resolution_message"] == "fixed" and got["updated"] == OLD
        assert got["resolved_at"] == first["resolved_at"]


async def test_resolution_message_is_stored_and_shown(api: Api) -> None:
    with trio.fail_after(10):
        incident = await create_incident(api)
        path = f"/incidents/{incident['id']}"
        resolved = expect(
            await api.post(f"{path}/resolve", json={"resolution_message": "m" * 10_000})
        )
        assert resolved["resolution_message"] == "m" * 10_000
        assert expect(await api.get(path))["resolution_message"] == "m" * 10_000
        listed = expect(await api.get("/incidents"))["data"]
        assert listed[0]["resolution_message"] == "m" * 10_000

        other = await create_incident(api)
        other_path = f"/incidents/{other['id']}"
        assert_error(
            await api.post(f"{other_path}/resolve", json={"resolution_message": "m" * 10_001}),
            422,
            "value_too_long",
            param="resolution_message",
        )
        assert_error(
            await api.post(f"{other_path}/resolve", json={"message": "x"}),
            422,
            "parameter_unknown",
            param="message",
        )
        assert_error(
            await api.post(f"{other_path}/resolve", json={"resolution_message": 5}),
            422,
            "invalid_type",
            param="resolution_message",
        )
        assert expect(await api.get(other_path))["status"] == "investigating"
        # an empty object is a resolve without a message
        assert expect(await api.post(f"{other_path}/resolve", json={}))["status"] == "resolved"


async def test_patch_may_move_status_anywhere_and_keeps_resolved_at_in_step(
    api: Api, db: Database
) -> None:
    with trio.fail_after(10):
        incident = await create_incident(api)
        path = f"/incidents/{incident['id']}"
        await set_times(db, "incidents", incident["id"], created=OLD, updated=OLD)

        moved = expect(await api.patch(path, json={"status": "identified"}))
        assert moved["status"] == "identified" and moved["resolved_at"] is None
        assert moved["updated"] > OLD

        resolved = expect(await api.patch(path, json={"status": "resolved"}))
        assert resolved["status"] == "resolved"
        assert OLD < resolved["resolved_at"] <= int(time.time())

        # resolved -> resolved changes nothing: resolved_at and updated are kept
        await sql(
            db,
            "UPDATE incidents SET resolved_at = $2, updated = $2 WHERE id = $1",
            incident["id"],
            OLD,
        )
        same = expect(await api.patch(path, json={"status": "resolved"}))
        assert same["resolved_at"] == OLD and same["updated"] == OLD

        reopened = expect(await api.patch(path, json={"status": "monitoring"}))
        assert reopened["status"] == "monitoring" and reopened["resolved_at"] is None

        # resolve with a message, then reopen: the message goes with resolved_at
        expect(await api.post(f"{path}/resolve", json={"resolution_message": "rolled back"}))
        reopened = expect(await api.patch(path, json={"status": "investigating"}))
        assert reopened["resolved_at"] is None and reopened["resolution_message"] is None
        assert expect(await api.get(path)) == reopened

        assert_error(
            await api.patch(path, json={"status": "closed"}), 422, "invalid_value", param="status"
        )


async def test_incident_validation_lengths_and_metadata(api: Api) -> None:
    with trio.fail_after(15):
        ok = await create_incident(api, title="t" * 200, description="d" * 10_000)
        assert ok["title"] == "t" * 200 and ok["description"] == "d" * 10_000
        refused: list[tuple[dict[str, Any], str, str]] = [
            ({}, "parameter_missing", "title"),
            ({"title": "t" * 201}, "value_too_long", "title"),
            ({"title": ""}, "value_too_short", "title"),
            ({"title": "x", "description": "d" * 10_001}, "value_too_long", "description"),
            ({"title": "x", "severity": "huge"}, "invalid_value", "severity"),
            ({"title": "x", "status": "open"}, "invalid_value", "status"),
            ({"title": "x", "resolved_at": 5}, "parameter_unknown", "resolved_at"),
            ({"title": "x", "resolution_message": "m"}, "parameter_unknown", "resolution_message"),
            ({"title": 1}, "invalid_type", "title"),
            ({"title": "x", "metadata": {"a" * 41: "v"}}, "metadata_key_too_long", "metadata"),
            ({"title": "x", "metadata": {"a": "v" * 501}}, "metadata_value_too_long", "metadata"),
            (
                {"title": "x", "metadata": {f"k{i}": "v" for i in range(51)}},
                "metadata_too_many_keys",
                "metadata",
            ),
        ]
        for body, code, param in refused:
            assert_error(await api.post("/incidents", json=body), 422, code, param=param)

        path = f"/incidents/{ok['id']}"
        for fields, code, param in (
            ({"title": "t" * 201}, "value_too_long", "title"),
            ({"description": "d" * 10_001}, "value_too_long", "description"),
            ({"title": None}, "invalid_type", "title"),
            ({"severity": None}, "invalid_type", "severity"),
            ({"resolved_at": 1}, "parameter_unknown", "resolved_at"),
        ):
            assert_error(await api.patch(path, json=fields), 422, code, param=param)
        assert expect(await api.get(path)) == ok
        # description may be cleared with null
        cleared = expect(await api.patch(path, json={"description": None}))
        assert "description" in cleared and cleared["description"] is None


async def test_incident_metadata_merges_and_keeps_the_50_key_limit(api: Api) -> None:
    with trio.fail_after(10):
        incident = await create_incident(api, metadata={f"k{i}": "v" for i in range(50)})
        path = f"/incidents/{incident['id']}"
        assert_error(
            await api.patch(path, json={"metadata": {"extra": "v"}}),
            422,
            "metadata_too_many_keys",
            param="metadata",
        )
        body = expect(await api.patch(path, json={"metadata": {"k0": "", "k1": "", "x": "1"}}))
        assert len(body["metadata"]) == 49
        assert body["metadata"]["x"] == "1" and body["metadata"]["k2"] == "v"
        assert "k0" not in body["metadata"] and "k1" not in body["metadata"]
