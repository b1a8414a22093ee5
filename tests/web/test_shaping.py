"""The shapers derived from the response models (web/api/shaping.py) serve each API
object exactly as the hand-written shapers did: same keys, same order, same values, down
to the JSON's bytes. The expected objects below are those hand-written shapers' output
written out literally, for records made of real stored rows (created through the API, or
written with the store's own batch writers where only the engine writes them), and
compared as JSON text, so that a key out of order fails as surely as a wrong value.

Also: every response model the routes declare has a derived shaper, and a model field
whose source the record lacks is refused when the shaper is derived (at import).
"""

from __future__ import annotations

import importlib
import json
import math
import pkgutil
from typing import Annotated, Any, Literal

import pytest
import trio
from pydantic import BaseModel

import web.api
from store import CheckRecord, Database, PingRecord, checks, new_check_id, new_id, pings
from store.records import MonitorRecord
from tests.api import Api
from tests.web.helpers import create_incident, create_monitor, expect
from web.api.common import ListObject
from web.api.shaping import From, ShapeError, shaped_model, shaper
from web.routes import ROUTES

ASSERTIONS = [
    {"source": "json_body", "property": "$.status", "comparison": "equals", "target": "ok"},
    {"source": "status_code", "comparison": "less_than", "target": 400},
]


def same_json(served: Any, expected: Any) -> None:
    """``served`` and ``expected`` are the same JSON text (key order included)."""
    got, want = json.dumps(served), json.dumps(expected)
    at = next((i for i, (a, b) in enumerate(zip(got, want, strict=False)) if a != b), 0)
    where = f"first difference at {at}:\nserved:   {got[at:][:160]}\nexpected: {want[at:][:160]}"
    assert got == want, where


async def _row(db: Database, sql: str, *args: Any) -> Any:
    async def fetch(connection: Any) -> Any:
        return await connection.fetchrow(sql, *args)

    return await db.run(fetch)


async def _execute(db: Database, sql: str, *args: Any) -> None:
    async def run(connection: Any) -> None:
        await connection.execute(sql, *args)

    await db.run(run)


def _monitor(m: dict[str, Any], **changed: Any) -> dict[str, Any]:
    """The monitor created by the test below, as the hand-written shaper showed it."""
    expected = {
        "id": m["id"],
        "object": "monitor",
        "name": "web",
        "url": "https://example.com/health",
        "type": "http",
        "status": "pending",
        "interval_seconds": 60,
        "timeout_seconds": 30,
        "method": "GET",
        "expected_status_code": 200,
        "failure_threshold": 2,
        "success_threshold": 1,
        "auto_incidents": True,
        "incident_severity": "major",
        "request_headers": {"X-Token": "t"},
        "request_body": None,
        "assertions": [
            {"source": "json_body", "property": "$.status", "comparison": "equals", "target": "ok"},
            {"source": "status_code", "property": None, "comparison": "less_than", "target": 400},
        ],
        "tls_expiry_days": 14,
        "tls_verify": True,
        "tls_ca_bundle": None,
        "escalation_policy": None,
        "depends_on": [],
        "regions": None,
        "region_quorum": None,
        "region_status": None,
        "suppressed_by": None,
        "in_maintenance": False,
        "last_checked_at": None,
        "badge_key": None,
        "created": m["created"],
        "updated": m["updated"],
        "metadata": {"team": "core"},
    }
    return {**expected, **changed}


async def test_monitor_its_event_and_its_checks_are_shaped_as_before(
    api: Api, db: Database
) -> None:
    with trio.fail_after(20):
        created = await create_monitor(
            api,
            url="https://example.com/health",
            request_headers={"X-Token": "t"},
            assertions=ASSERTIONS,
            metadata={"team": "core"},
        )
        same_json(created, _monitor(created))
        mid = created["id"]
        status, patched, headers = await api.patch(f"/monitors/{mid}", json={"name": "www"})
        assert status == 200
        same_json(patched, _monitor(created, name="www", updated=patched["updated"]))
        (event,) = expect(await api.get("/events", query={"type": "monitor.updated"}))["data"]
        same_json(
            event,
            {
                "id": event["id"],
                "object": "event",
                "type": "monitor.updated",
                "created": event["created"],
                "data": {
                    "object": _monitor(created, name="www", updated=patched["updated"]),
                    "previous_attributes": {"name": "web"},
                },
                "request": {"id": headers["Request-Id"], "idempotency_key": None},
            },
        )

        at = created["created"]
        await db.run(checks.ensure_partitions, at, at + 1, 86_400)
        failed = CheckRecord(
            id=new_check_id(at),
            monitor_id=mid,
            status="down",
            response_time_ms=30_000.0,
            status_code=None,
            error_code="timeout",
            error_message=None,
            created=at,
        )
        good = CheckRecord(
            id=new_check_id(at + 1),
            monitor_id=mid,
            status="up",
            response_time_ms=12.5,
            status_code=200,
            error_code=None,
            error_message=None,
            created=at + 1,
            tls_expires_at=at + 86_400,
        )
        await db.transaction(checks.write_check_batch, [failed, good], [])
        listed = expect(await api.get(f"/monitors/{mid}/checks"))
        same_json(
            listed,
            {
                "object": "list",
                "data": [
                    {
                        "id": good.id,
                        "object": "check",
                        "monitor": mid,
                        "status": "up",
                        "response_time_ms": 12.5,
                        "status_code": 200,
                        "error": None,
                        "tls_expires_at": at + 86_400,
                        "region": None,
                        "created": at + 1,
                    },
                    {
                        "id": failed.id,
                        "object": "check",
                        "monitor": mid,
                        "status": "down",
                        "response_time_ms": 30_000.0,
                        "status_code": None,
                        "error": {"code": "timeout", "message": ""},
                        "tls_expires_at": None,
                        "region": None,
                        "created": at,
                    },
                ],
                "has_more": False,
                "url": f"/monitors/{mid}/checks",
            },
        )


_FIGURES = (
    "start",
    "end",
    "uptime_percent",
    "up_seconds",
    "down_seconds",
    "paused_seconds",
    "unknown_seconds",
    "maintenance_seconds",
    "checks",
    "failed_checks",
    "incidents",
    "longest_down_seconds",
    "response_time_ms",
)
"""An availability range's keys in the order the hand-written shaper gave them."""


async def test_availability_keeps_its_key_order_and_has_no_series_without_granularity(
    api: Api,
) -> None:
    with trio.fail_after(10):
        mid = (await create_monitor(api))["id"]
        whole = expect(await api.get(f"/monitors/{mid}/availability"))
        assert list(whole) == ["object", "monitor", *_FIGURES]
        assert whole["object"] == "availability" and whole["monitor"] == mid
        assert list(whole["response_time_ms"]) == ["mean", "p50", "p90", "p95", "p99"]
        hourly = expect(
            await api.get(f"/monitors/{mid}/availability", query={"granularity": "hour"})
        )
        assert list(hourly) == ["object", "monitor", *_FIGURES, "series"]
        assert hourly["series"] and all(list(part) == list(_FIGURES) for part in hourly["series"])


async def test_heartbeat_its_event_and_its_pings_are_shaped_as_before(
    api: Api, db: Database
) -> None:
    with trio.fail_after(10):
        beat = expect(
            await api.post("/heartbeats", json={"name": "backup", "period_seconds": 60}), 201
        )
        key = (await _row(db, "SELECT ping_key FROM heartbeats WHERE id = $1", beat["id"]))[0]
        base, _, served_key = beat["ping_url"].rpartition("/ping/")
        assert served_key == key and base.startswith("http")
        expected = {
            "id": beat["id"],
            "object": "heartbeat",
            "name": "backup",
            "period_seconds": 60,
            "grace_seconds": 60,
            "status": "pending",
            "ping_url": f"{base}/ping/{key}",
            "last_ping_at": None,
            "auto_incidents": True,
            "incident_severity": "major",
            "escalation_policy": None,
            "suppressed_by": None,
            "in_maintenance": False,
            "created": beat["created"],
            "updated": beat["updated"],
            "metadata": {},
        }
        same_json(beat, expected)
        same_json(expect(await api.get(f"/heartbeats/{beat['id']}")), expected)
        (event,) = expect(await api.get("/events", query={"type": "heartbeat.created"}))["data"]
        same_json(event["data"], {"object": expected, "previous_attributes": None})

        ping = PingRecord(
            id=new_id("png"),
            heartbeat_id=beat["id"],
            kind="success",
            created=beat["created"],
            duration_ms=1500.25,
            source_ip="127.0.0.1",
        )
        await db.transaction(pings.write_ping_batch, [ping], [])
        (served,) = expect(await api.get(f"/heartbeats/{beat['id']}/pings"))["data"]
        same_json(
            served,
            {
                "id": ping.id,
                "object": "ping",
                "heartbeat": beat["id"],
                "kind": "success",
                "created": beat["created"],
                "duration_ms": 1500.25,
                "source_ip": "127.0.0.1",
            },
        )


async def test_incident_and_its_timeline_are_shaped_as_before(api: Api) -> None:
    with trio.fail_after(10):
        mid = (await create_monitor(api))["id"]
        incident = await create_incident(
            api, description="db down", monitors=[mid], metadata={"k": "v"}
        )
        same_json(
            incident,
            {
                "id": incident["id"],
                "object": "incident",
                "title": "outage",
                "description": "db down",
                "status": "investigating",
                "severity": "major",
                "created": incident["created"],
                "updated": incident["updated"],
                "resolved_at": None,
                "resolution_message": None,
                "monitor": None,
                "monitors": [mid],
                "postmortem": None,
                "metadata": {"k": "v"},
            },
        )
        update = expect(
            await api.post(
                f"/incidents/{incident['id']}/updates",
                json={"message": "found it", "status": "identified"},
            ),
            201,
        )
        same_json(
            update,
            {
                "id": update["id"],
                "object": "incident_update",
                "incident": incident["id"],
                "status": "identified",
                "message": "found it",
                "created": update["created"],
            },
        )


async def test_webhook_endpoint_and_delivery_are_shaped_as_before(api: Api, db: Database) -> None:
    with trio.fail_after(10):
        body = {"url": "https://example.com/hook", "enabled_events": ["incident.*"]}
        created = expect(await api.post("/webhook-endpoints", json=body), 201)
        row = await _row(db, "SELECT secret FROM webhook_endpoints WHERE id = $1", created["id"])
        expected = {
            "id": created["id"],
            "object": "webhook_endpoint",
            "url": "https://example.com/hook",
            "enabled_events": ["incident.*"],
            "description": None,
            "status": "enabled",
            "created": created["created"],
            "updated": created["updated"],
            "metadata": {},
        }
        same_json(created, {**expected, "secret": row["secret"]})
        same_json(expect(await api.get(f"/webhook-endpoints/{created['id']}")), expected)

        await create_incident(api)
        (event,) = expect(await api.get("/events"))["data"]
        deliveries = f"/webhook-endpoints/{created['id']}/deliveries"
        (pending,) = expect(await api.get(deliveries))["data"]
        due = await _row(db, "SELECT next_attempt_at FROM webhook_deliveries")
        shown = {
            "id": pending["id"],
            "object": "webhook_delivery",
            "event": event["id"],
            "endpoint": created["id"],
            "status": "pending",
            "attempts": 0,
            "last_attempt": None,
            "next_attempt_at": math.ceil(due[0]),
            "created": pending["created"],
        }
        same_json(pending, shown)
        at = pending["created"] + 1
        await _execute(
            db,
            "UPDATE webhook_deliveries SET attempts = 1, last_attempt_at = $1, "
            "last_response_status = 500, last_error = 'http_status', last_duration_ms = NULL, "
            "next_attempt_at = $2",
            at,
            at + 30.25,
        )
        (retried,) = expect(await api.get(deliveries))["data"]
        same_json(
            retried,
            {
                **shown,
                "attempts": 1,
                "last_attempt": {
                    "at": at,
                    "response_status": 500,
                    "error": "http_status",
                    "duration_ms": 0.0,
                },
                "next_attempt_at": at + 31,
            },
        )


async def test_status_page_components_keep_their_documented_key_order(api: Api) -> None:
    with trio.fail_after(10):
        mid = (await create_monitor(api))["id"]
        components = [
            {"monitor": mid, "name": "API", "group": "Core"},
            {"monitor": mid, "name": "Web"},
        ]
        page = expect(
            await api.post(
                "/status-pages", json={"name": "Acme", "slug": "acme", "components": components}
            ),
            201,
        )
        same_json(
            expect(await api.get(f"/status-pages/{page['id']}")),
            {
                "id": page["id"],
                "object": "status_page",
                "name": "Acme",
                "slug": "acme",
                "description": None,
                "components": [
                    {"monitor": mid, "name": "API", "group": "Core"},
                    {"monitor": mid, "name": "Web", "group": None},
                ],
                "created": page["created"],
                "updated": page["updated"],
                "metadata": {},
            },
        )


def _response_objects() -> set[type[BaseModel]]:
    """The objects the routes answer with: their response models, a list's items."""
    found: set[type[BaseModel]] = set()
    for route in ROUTES:
        model = route.response_model
        if model is None:
            continue
        if issubclass(model, ListObject):
            item = model.model_fields["data"].annotation
            (model,) = item.__args__  # type: ignore[union-attr]
        found.add(model)
    return found


def _derived_shapers() -> set[type[BaseModel]]:
    """The models of the shapers the modules of web.api derive."""
    found: set[type[BaseModel]] = set()
    for module in pkgutil.iter_modules(web.api.__path__):
        namespace = vars(importlib.import_module(f"web.api.{module.name}"))
        found.update(m for m in map(shaped_model, namespace.values()) if m is not None)
    return found


def test_every_response_object_has_a_derived_shaper() -> None:
    objects = _response_objects()
    assert len(objects) >= 10, objects
    missing = objects - _derived_shapers()
    assert not missing, f"response models without a derived shaper: {missing}"


def test_a_field_the_record_lacks_is_refused_when_the_shaper_is_derived() -> None:
    class Unknown(BaseModel):
        object: Literal["monitor"]
        nickname: str

    with pytest.raises(ShapeError, match=r"Unknown.nickname: MonitorRecord has no attribute"):
        shaper(Unknown, MonitorRecord)

    class Renamed(BaseModel):
        id: str
        owner: Annotated[str, From("owner_id")]

    with pytest.raises(ShapeError, match="'owner_id'"):
        shaper(Renamed, MonitorRecord)
