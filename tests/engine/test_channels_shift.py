"""A shift reminder (kind ``shift_starting``; docs/on-call.md, "Shift reminders") on every
channel type, against the local stand-ins of tests/engine/test_channels_http.py: it names
the schedule, the member and the shift's times in the schedule's time zone, asks nobody to
acknowledge, and pages nobody where the provider tells a page from a notice (a PagerDuty
change event, https://developer.pagerduty.com/docs/send-change-event; an Opsgenie P5
alert; ntfy's default priority)."""

from __future__ import annotations

import json

import pytest
import trio

from engine import Message
from engine.channels._email import compose
from engine.notifier import message_of
from store.notifications import Claimed, ShiftNotice
from store.records import NotificationRecord
from tests.engine.test_channels_http import sent

START = 1_796_630_400  # Mon 2026-12-07 09:00 in Berlin (08:00 UTC)
SHIFT = ShiftNotice(
    schedule_id="sch_web",
    schedule_name="Web <on-call>",
    time_zone="Europe/Berlin",
    member_id="mbr_ada",
    member_name="Ada",
    starts_at=START,
    ends_at=START + 7 * 86_400,
)
SUMMARY = (
    "Ada's on-call shift for Web <on-call> starts Mon 07 Dec 2026 09:00 CET "
    "and ends Mon 14 Dec 2026 09:00 CET"
)


def reminder() -> Message:
    """The message the notifier renders from a claimed shift reminder."""
    notification = NotificationRecord.from_row(
        {
            "id": "ntf_1",
            "account_id": "acct_1",
            "alert_id": None,
            "channel_id": "nch_1",
            "member_id": "mbr_ada",
            "kind": "shift_starting",
            "step": None,
            "status": "pending",
            "ack_token": None,
            "attempts": 0,
            "last_attempt_at": None,
            "next_attempt_at": START - 600.0,
            "give_up_at": START,
            "created": START - 600,
            "attempts_list": [],
        }
    )
    claimed = Claimed(
        notification=notification,
        channel_type="webhook",
        channel_config={},
        alert_status="",
        severity="",
        summary="",
        triggered_at=0,
        resource_id="",
        resource_name="",
        resource_url=None,
        error=None,
        claimed_until=START,
        shift=SHIFT,
    )
    return message_of(claimed, "https://uptrio.example")


def test_the_message_tells_the_shift_in_the_schedules_time_zone() -> None:
    message = reminder()
    assert message.summary == SUMMARY
    assert message.ack_url is None and message.alert_id is None
    assert message.resource_id == "sch_web" and message.severity == "info"


async def test_pagerduty_gets_a_change_event_that_pages_nobody(nursery: trio.Nursery) -> None:
    _, request = await sent(nursery, "pagerduty", {"routing_key": "k" * 32}, reminder(), 202)
    assert request.path == "/v2/change/enqueue"
    event = json.loads(request.body)
    assert set(event) == {"routing_key", "payload"}  # no event_action: not an alert event
    payload = event["payload"]
    assert payload["summary"] == SUMMARY and payload["source"] == "Web <on-call>"
    assert payload["timestamp"] == "2026-12-07T07:50:00+00:00"
    assert payload["custom_details"]["Starts"] == "Mon 07 Dec 2026 09:00 CET"


async def test_opsgenie_gets_an_informational_alert(nursery: trio.Nursery) -> None:
    _, request = await sent(nursery, "opsgenie", {"api_key": "key"}, reminder(), 202)
    assert request.path == "/v2/alerts"
    body = json.loads(request.body)
    assert body["priority"] == "P5" and "shift" in body["tags"]
    assert body["alias"] == f"uptrio-shift-sch_web-mbr_ada-{START}"
    assert body["message"] == SUMMARY and len(SUMMARY) <= 130


async def test_ntfy_rings_at_the_default_priority(nursery: trio.Nursery) -> None:
    _, request = await sent(nursery, "ntfy", {"topic_url": "https://ntfy.sh/t"}, reminder())
    assert request.headers["title"] == "[ON CALL SOON] Web <on-call>"
    assert request.headers["priority"] == "3"
    assert request.headers["tags"] == "calendar,info"
    assert "click" not in request.headers
    assert request.body.decode().startswith(SUMMARY)


async def test_the_webhook_body_carries_the_shift(nursery: trio.Nursery) -> None:
    _, request = await sent(nursery, "webhook", {"url": "https://hooks.example/x"}, reminder())
    body = json.loads(request.body)
    assert body["kind"] == "shift_starting" and body["alert"] is None
    assert body["ack_url"] is None
    assert body["resource"] == {"id": "sch_web", "name": "Web <on-call>", "url": None}
    assert body["shift"] == {
        "object": "shift",
        "schedule": "sch_web",
        "member": "mbr_ada",
        "member_name": "Ada",
        "start": START,
        "end": START + 7 * 86_400,
        "time_zone": "Europe/Berlin",
    }


@pytest.mark.parametrize(
    ("type", "config"),
    [
        ("slack", {"webhook_url": "https://hooks.slack.com/services/T0/B0/X"}),
        ("discord", {"webhook_url": "https://discord.com/api/webhooks/1/x"}),
        ("teams", {"webhook_url": "https://prod.logic.azure.com/workflows/1"}),
        ("telegram", {"bot_token": "123:abc", "chat_id": "42"}),
    ],
)
async def test_chat_messages_name_the_shift_without_a_button(
    nursery: trio.Nursery, type: str, config: dict[str, str]
) -> None:
    attempt, request = await sent(nursery, type, config, reminder())
    assert attempt.status == "succeeded"
    text = request.body.decode()
    assert "ON CALL SOON" in text and "Mon 07 Dec 2026 09:00 CET" in text
    assert "Acknowledge" not in text and "/alerts/ack/" not in text


def test_the_email_names_the_shift() -> None:
    mail = compose("ada@example.com", reminder(), "uptrio@example.com")
    assert mail["Subject"] == "[ON CALL SOON] Web <on-call>"
    text = mail.get_body(("plain",)).get_content()  # type: ignore[union-attr]
    assert SUMMARY in text and "Acknowledge" not in text
    html = mail.get_body(("html",)).get_content()  # type: ignore[union-attr]
    assert "Web &lt;on-call&gt;" in html and "Acknowledge" not in html
