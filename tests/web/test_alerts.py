"""The alerts API (docs/alerts.md, "Alerts"): list with its filters and cursors, read,
acknowledge and resolve with their rules and errors, the messages of an alert with their
attempts, the ``on_call`` permissions, and another account's alerts. Alerts are inserted
in SQL, as the engine raises them."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

import trio

from store import AlertRecord, Database, EventRecord
from tests.api import Api
from tests.web.alert_helpers import (
    account_id,
    alert_row,
    insert_alert,
    insert_attempt,
    insert_channel,
    insert_notification,
)
from tests.web.helpers import assert_error, create_monitor, expect
from web.api.alerts import AlertList, AlertObject, NotificationList, alert_object
from web.api.events import event_object

ApiFor = Callable[..., Awaitable[Api]]
SUMMARY = "web is down: connection refused"


async def test_list_is_newest_first_with_filters_and_cursors(api: Api, db: Database) -> None:
    with trio.fail_after(15):
        acme = await account_id(db)
        web = await create_monitor(api)
        t = int(time.time()) - 1000
        old = await insert_alert(db, acme, web["id"], created=t, status="resolved")
        beat = await insert_alert(db, acme, "hbt_" + "b" * 24, created=t + 1, status="resolved")
        ack = await insert_alert(
            db, acme, "hbt_" + "c" * 24, created=t + 2, status="acknowledged",
            acknowledged_by={"type": "member", "id": "mbr_x"},
        )  # fmt: skip
        new = await insert_alert(db, acme, web["id"], created=t + 3, severity="critical")
        body = expect(await api.get("/alerts"))
        AlertList.model_validate(body)
        assert [a["id"] for a in body["data"]] == [new, ack, beat, old]
        assert body["url"] == "/alerts" and body["has_more"] is False
        first = body["data"][0]
        assert first["object"] == "alert" and first["monitor"] == web["id"]
        assert first["status"] == "triggered" and first["severity"] == "critical"
        assert first["acknowledged_by"] is None and first["escalation_step"] == 0
        assert body["data"][1]["acknowledged_by"] == {"type": "member", "id": "mbr_x"}

        by_status = expect(await api.get("/alerts", query={"status": "resolved"}))["data"]
        assert [a["id"] for a in by_status] == [beat, old]
        by_monitor = expect(await api.get("/alerts", query={"monitor": web["id"]}))["data"]
        assert [a["id"] for a in by_monitor] == [new, old]
        both = {"monitor": web["id"], "status": "triggered"}
        assert [a["id"] for a in expect(await api.get("/alerts", query=both))["data"]] == [new]

        page = expect(await api.get("/alerts", query={"limit": 2}))
        assert [a["id"] for a in page["data"]] == [new, ack] and page["has_more"] is True
        rest = expect(await api.get("/alerts", query={"limit": 2, "starting_after": ack}))
        assert [a["id"] for a in rest["data"]] == [beat, old] and rest["has_more"] is False
        back = expect(await api.get("/alerts", query={"limit": 2, "ending_before": beat}))
        assert [a["id"] for a in back["data"]] == [new, ack]
        oldest = expect(await api.get("/alerts", query={"sort": "created", "limit": 1}))
        assert [a["id"] for a in oldest["data"]] == [old]

        assert_error(
            await api.get("/alerts", query={"status": "open"}), 400, "invalid_parameter",
            param="status",
        )  # fmt: skip
        assert_error(
            await api.get("/alerts", query={"monitor": "inc_1"}), 400, "invalid_parameter",
            param="monitor",
        )  # fmt: skip
        assert_error(
            await api.get("/alerts", query={"starting_after": "alt_nope"}), 400,
            "cursor_not_found", param="starting_after",
        )  # fmt: skip

        got = expect(await api.get(f"/alerts/{new}"))
        AlertObject.model_validate(got)
        assert got == first
        assert set(got) == {
            "id", "object", "monitor", "incident", "status", "severity", "summary",
            "escalation_policy", "escalation_step", "triggered_at", "acknowledged_at",
            "acknowledged_by", "resolved_at", "created", "updated", "metadata",
        }  # fmt: skip
        assert got["triggered_at"] == t + 3 and got["summary"] == "web is down: connection refused"
        assert_error(await api.get("/alerts/alt_nope"), 404, "resource_missing", param="id")
        assert_error(await api.get("/alerts/mon_nope"), 404, "resource_missing", param="id")


async def test_acknowledge_then_resolve_and_their_errors(
    api: Api, api_for: ApiFor, db: Database
) -> None:
    with trio.fail_after(15):
        acme = await account_id(db)
        t = int(time.time()) - 100
        alert = await insert_alert(db, acme, "mon_" + "a" * 24, created=t)
        channel = await insert_channel(db, acme, created=t)
        pending = await insert_notification(
            db, acme, alert, channel, created=t + 60, next_attempt_at=t + 70.0
        )

        acked = expect(await api.post(f"/alerts/{alert}/acknowledge"))
        AlertObject.model_validate(acked)
        assert acked["status"] == "acknowledged" and acked["acknowledged_at"] >= t
        assert acked["acknowledged_by"]["type"] == "token"
        assert acked["acknowledged_by"]["id"].startswith("tok_")
        assert acked["resolved_at"] is None
        # acknowledging stops the walk and the messages not yet sent
        assert await alert_row(db, alert, "next_step_at") is None
        status = expect(await api.get(f"/alerts/{alert}/notifications"))["data"][0]["status"]
        assert status == "cancelled", pending

        # a second acknowledge, by another token, is a no-op 200: the first one is kept
        other = await api_for(account="acme")
        again = expect(await other.post(f"/alerts/{alert}/acknowledge", json={}))
        assert again == acked

        assert_error(
            await api.post(f"/alerts/{alert}/acknowledge", json={"member": "mbr_x"}), 422,
            "parameter_unknown",
        )  # fmt: skip
        resolved = expect(await api.post(f"/alerts/{alert}/resolve"))
        assert resolved["status"] == "resolved" and resolved["resolved_at"] >= t
        assert resolved["acknowledged_by"] == acked["acknowledged_by"]
        for action in ("acknowledge", "resolve"):
            error = assert_error(
                await api.post(f"/alerts/{alert}/{action}"), 400, "alert_not_open", param="id"
            )
            assert alert in error["message"]
        assert expect(await api.get(f"/alerts/{alert}"))["status"] == "resolved"

        # a triggered alert may be resolved at once
        fresh = await insert_alert(db, acme, "mon_" + "b" * 24, created=t + 1)
        closed = expect(await api.post(f"/alerts/{fresh}/resolve", json={}))
        assert closed["status"] == "resolved" and closed["acknowledged_by"] is None
        for action in ("acknowledge", "resolve"):
            missing = await api.post(f"/alerts/alt_nope/{action}")
            assert_error(missing, 404, "resource_missing", param="id")


async def test_another_accounts_alert_is_a_404(api: Api, api_for: ApiFor, db: Database) -> None:
    with trio.fail_after(15):
        other = await api_for(account="globex")
        globex = await account_id(db, "globex")
        t = int(time.time()) - 100
        theirs = await insert_alert(db, globex, "mon_" + "g" * 24, created=t)
        assert expect(await api.get("/alerts"))["data"] == []
        for method, path in (
            ("GET", f"/alerts/{theirs}"),
            ("GET", f"/alerts/{theirs}/notifications"),
            ("POST", f"/alerts/{theirs}/acknowledge"),
            ("POST", f"/alerts/{theirs}/resolve"),
        ):
            assert_error(await api.request(method, path), 404, "resource_missing", param="id")
        assert expect(await other.get(f"/alerts/{theirs}"))["status"] == "triggered"
        assert [a["id"] for a in expect(await other.get("/alerts"))["data"]] == [theirs]


async def test_reading_needs_on_call_read_and_acting_on_call_update(
    api_for: ApiFor, db: Database
) -> None:
    with trio.fail_after(15):
        reader = await api_for(permissions=["on_call.read"])
        actor = await api_for(permissions=["on_call.update"])
        outsider = await api_for(permissions=["monitors.read", "incidents.update"])
        acme = await account_id(db)
        alert = await insert_alert(db, acme, "mon_" + "a" * 24, created=int(time.time()))
        for path in ("/alerts", f"/alerts/{alert}", f"/alerts/{alert}/notifications"):
            expect(await reader.get(path))
            assert_error(await actor.get(path), 403, "missing_permission")
            assert_error(await outsider.get(path), 403, "missing_permission")
        for action in ("acknowledge", "resolve"):
            path = f"/alerts/{alert}/{action}"
            assert_error(await reader.post(path), 403, "missing_permission")
            assert_error(await outsider.post(path), 403, "missing_permission")
        assert await alert_row(db, alert, "status") == "triggered"
        expect(await actor.post(f"/alerts/{alert}/acknowledge"))
        assert await alert_row(db, alert, "status") == "acknowledged"


async def test_the_messages_of_an_alert_with_their_attempts(api: Api, db: Database) -> None:
    with trio.fail_after(15):
        acme = await account_id(db)
        t = int(time.time()) - 100
        alert = await insert_alert(db, acme, "mon_" + "a" * 24, created=t)
        quiet = await insert_alert(db, acme, "mon_" + "q" * 24, created=t)
        channel = await insert_channel(db, acme, created=t)
        sent = await insert_notification(
            db, acme, alert, channel, created=t, status="succeeded", attempts=2,
            ack_token="f" * 32,
        )  # fmt: skip
        await insert_attempt(
            db, sent, at=t, status="failed", response_status=503, error="http_503",
            duration_ms=12.5,
        )  # fmt: skip
        await insert_attempt(
            db, sent, at=t + 5, status="succeeded", response_status=200, error=None,
            duration_ms=8.25,
        )  # fmt: skip
        waiting = await insert_notification(
            db, acme, alert, channel, created=t + 60, kind="escalation", next_attempt_at=t + 60.2
        )
        body = expect(await api.get(f"/alerts/{alert}/notifications"))
        NotificationList.model_validate(body)
        assert body["url"] == f"/alerts/{alert}/notifications" and body["has_more"] is False
        first, second = body["data"]
        assert first["id"] == sent and second["id"] == waiting
        assert first["object"] == "notification" and first["alert"] == alert
        assert first["channel"] == channel and first["member"] is None
        assert first["kind"] == "trigger" and first["status"] == "succeeded"
        assert first["attempts"] == 2 and first["next_attempt_at"] is None
        assert first["attempt_history"] == [
            {"object": "notification_attempt", "at": t, "status": "failed",
             "response_status": 503, "error": "http_503", "duration_ms": 12.5},
            {"object": "notification_attempt", "at": t + 5, "status": "succeeded",
             "response_status": 200, "error": None, "duration_ms": 8.25},
        ]  # fmt: skip
        assert first["last_attempt"] == first["attempt_history"][-1]
        assert "ack_token" not in first and "f" * 32 not in str(body)  # a capability
        assert second["kind"] == "escalation" and second["status"] == "pending"
        assert second["attempts"] == 0 and second["last_attempt"] is None
        assert second["attempt_history"] == [] and second["next_attempt_at"] == t + 61
        assert expect(await api.get(f"/alerts/{quiet}/notifications"))["data"] == []
        assert_error(
            await api.get(f"/alerts/{alert}/notifications", query={"limit": 1}), 400,
            "unknown_parameter",
        )  # fmt: skip
        missing = await api.get("/alerts/alt_nope/notifications")
        assert_error(missing, 404, "resource_missing", param="id")


def test_an_alert_event_carries_the_alert_as_the_api_shows_it() -> None:
    """``alert.*`` events (docs/alerts.md, "Alerts") show the alert object, and an
    acknowledgement's ``previous_attributes`` name what it changed."""
    t = 1_795_000_000
    alert = AlertRecord(
        id="alt_" + "a" * 24, account_id="acct_x", resource_id="mon_" + "m" * 24,
        incident_id=None, status="acknowledged", severity="major", summary=SUMMARY,
        escalation_policy="esc_" + "e" * 24, escalation_step=0, walks=0, next_step_at=None,
        triggered_at=t, acknowledged_at=t + 30, acknowledged_by={"type": "member", "id": "mbr_a"},
        resolved_at=None, created=t, updated=t + 30, metadata={},
    )  # fmt: skip
    event = EventRecord(
        id="evt_" + "e" * 24, account_id="acct_x", type="alert.acknowledged",
        resource_id=alert.id, created=t + 30, object=alert.snapshot(),
        previous={"status": "triggered", "acknowledged_at": None, "acknowledged_by": None},
        request_id=None, idempotency_key=None,
    )  # fmt: skip
    data = event_object(event, ping_base="")["data"]
    assert data["object"] == alert_object(alert)
    assert data["previous_attributes"] == {
        "status": "triggered", "acknowledged_at": None, "acknowledged_by": None,
    }  # fmt: skip


async def test_alert_events_are_listed_and_subscribed_to_with_on_call_read(
    api: Api, api_for: ApiFor, db: Database
) -> None:
    """``GET /events`` lists the ``alert.*`` events to a token with ``on_call.read`` only
    (docs/alerts.md, "Permissions"), and a webhook endpoint may subscribe to them with it
    (docs/webhooks.md, "Permissions")."""
    with trio.fail_after(15):
        acme = await account_id(db)
        web = await create_monitor(api)
        alert = await insert_alert(db, acme, web["id"], created=int(time.time()))
        acked = expect(await api.post(f"/alerts/{alert}/acknowledge"))
        on_call = await api_for(account="acme", permissions=["on_call.read"])
        listed = expect(await on_call.get("/events", query={"type": "alert.*"}))["data"]
        assert [e["type"] for e in listed] == ["alert.acknowledged"]
        assert listed[0]["data"]["object"] == acked
        assert listed[0]["data"]["previous_attributes"]["status"] == "triggered"
        monitors_only = await api_for(account="acme", permissions=["monitors.read"])
        shown = expect(await monitors_only.get("/events"))["data"]
        assert shown and not [e for e in shown if e["type"].startswith("alert.")]
        hooks = await api_for(account="acme", permissions=["webhooks.create", "on_call.read"])
        body = {"url": "https://hooks.example.com/", "enabled_events": ["alert.*"]}
        expect(await hooks.post("/webhook-endpoints", json=body), 201)
        no_alerts = await api_for(account="acme", permissions=["webhooks.create", "monitors.read"])
        refused = await no_alerts.post("/webhook-endpoints", json=body)
        assert_error(refused, 403, "missing_permission", param="enabled_events")
