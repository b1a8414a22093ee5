"""The HTTP channel types (engine.channels; docs/alerts.md) against local stand-ins of
each provider: a real HTTP server on 127.0.0.1 (tests/receiver.py) named as the
provider's base with ``--provider-base``, checking the documented request exactly.

References: Slack https://api.slack.com/messaging/webhooks, Discord
https://discord.com/developers/docs/resources/webhook#execute-webhook, Teams workflows
with Adaptive Cards https://adaptivecards.io/explorer/, Telegram
https://core.telegram.org/bots/api#sendmessage, PagerDuty Events API v2
https://developer.pagerduty.com/docs/send-alert-event, Opsgenie
https://docs.opsgenie.com/docs/alert-api, ntfy https://docs.ntfy.sh/publish/.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
import trio

from engine import ChannelSettings, Message, TargetPolicy, send, validate_config
from tests.receiver import HANG, Receiver, expected_signature, signatures

ALERT = Message(
    kind="trigger",
    alert_id="alt_123",
    resource_id="mon_abc",
    resource_name="Checkout <API> & co",
    resource_url="https://user:hunter2@shop.example/health",
    status="triggered",
    severity="major",
    summary="Checkout <API> & co is down: connection refused",
    error="connection refused",
    triggered_at=1_700_000_000,
    ack_url="https://uptrio.example/alerts/ack/tok123",
    step=0,
)


async def stand_in(nursery: trio.Nursery, status: int = 200) -> Receiver:
    receiver = Receiver(status=status)
    await nursery.start(receiver.serve)
    return receiver


def settings_for(receiver: Receiver, type: str, **kw: Any) -> ChannelSettings:
    return ChannelSettings(
        provider_bases={type: f"http://127.0.0.1:{receiver.port}"},
        timeout_seconds=kw.pop("timeout_seconds", 2.0),
        **kw,
    )


async def sent(
    nursery: trio.Nursery,
    type: str,
    config: dict[str, Any],
    message: Message = ALERT,
    status: int = 200,
) -> tuple[Any, Any]:
    """Send ``message`` to a fresh stand-in; (the attempt, the one request received)."""
    receiver = await stand_in(nursery, status)
    normalized = validate_config(type, config, smtp=False)
    with trio.fail_after(5):
        attempt = await send(
            type, normalized, message, settings_for(receiver, type), channel_id="nch_1"
        )
    assert len(receiver.received) == 1, attempt
    return attempt, receiver.received[0]


def no_secret_of_the_monitor(body: bytes) -> None:
    assert b"hunter2" not in body


async def test_slack_incoming_webhook(nursery: trio.Nursery) -> None:
    url = "https://hooks.slack.com/services/T000/B000/XXXX?x=1"
    attempt, request = await sent(nursery, "slack", {"webhook_url": url})
    assert attempt.status == "succeeded" and attempt.response_status == 200
    assert request.path == "/services/T000/B000/XXXX?x=1"  # base replaced scheme+host only
    assert request.headers["content-type"] == "application/json"
    body = json.loads(request.body)
    assert set(body) == {"text", "blocks"}
    assert body["text"].startswith("[DOWN] Checkout <API> & co")
    header, summary, details, actions = body["blocks"]
    assert header == {
        "type": "header",
        "text": {"type": "plain_text", "text": "[DOWN] Checkout <API> & co"},
    }
    assert summary["type"] == "section"
    assert summary["text"] == {
        "type": "mrkdwn",
        "text": "Checkout &lt;API&gt; &amp; co is down: connection refused",
    }
    labels = [f["text"].split("\n")[0] for f in details["fields"]]
    assert labels[:3] == ["*Severity*", "*Status*", "*Since*"]
    assert all(f["type"] == "mrkdwn" for f in details["fields"])
    assert actions["type"] == "actions"
    (button,) = actions["elements"]
    assert button["type"] == "button" and button["url"] == ALERT.ack_url
    assert button["text"] == {"type": "plain_text", "text": "Acknowledge"}
    no_secret_of_the_monitor(request.body)


async def test_slack_resolution_has_no_button(nursery: trio.Nursery) -> None:
    resolved = dataclasses.replace(ALERT, kind="resolved", status="resolved", ack_url=None)
    _, request = await sent(nursery, "slack", {"webhook_url": "https://h.example/x"}, resolved)
    blocks = json.loads(request.body)["blocks"]
    assert [b["type"] for b in blocks] == ["header", "section", "section"]
    assert blocks[0]["text"]["text"].startswith("[RESOLVED]")


async def test_slack_test_message_names_the_channel(nursery: trio.Nursery) -> None:
    # POST /notification-channels/:id/test sends a message about the channel itself
    # (web.routes.notification_channels.sample_message): its id is no heartbeat's
    test = dataclasses.replace(
        ALERT, kind="test", alert_id=None, resource_id="nch_abc", resource_url=None, step=None
    )
    _, request = await sent(nursery, "slack", {"webhook_url": "https://h.example/x"}, test)
    fields = json.loads(request.body)["blocks"][2]["fields"]
    assert {"type": "mrkdwn", "text": "*Channel*\nnch_abc"} in fields
    assert not [f for f in fields if f["text"].startswith(("*Heartbeat*", "*Monitor*"))]


async def test_discord_webhook(nursery: trio.Nursery) -> None:
    config = {"webhook_url": "https://discord.com/api/webhooks/1/abc"}
    attempt, request = await sent(nursery, "discord", config)
    assert attempt.status == "succeeded"
    assert request.path == "/api/webhooks/1/abc"
    body = json.loads(request.body)
    assert isinstance(body["content"], str) and ALERT.ack_url in body["content"]
    assert body["allowed_mentions"] == {"parse": []}
    (embed,) = body["embeds"]
    assert embed["title"] == "[DOWN] Checkout <API> & co"
    assert embed["description"] == ALERT.summary
    assert embed["url"] == ALERT.ack_url
    assert embed["color"] == 0xF2994A and isinstance(embed["color"], int)
    assert {"name": "Severity", "value": "major", "inline": True} in embed["fields"]
    assert embed["timestamp"] == "2023-11-14T22:13:20+00:00"
    no_secret_of_the_monitor(request.body)


async def test_teams_workflow_adaptive_card(nursery: trio.Nursery) -> None:
    config = {"webhook_url": "https://prod.westus.logic.azure.com:443/workflows/1/triggers?sig=s"}
    attempt, request = await sent(nursery, "teams", config, status=202)
    assert attempt.status == "succeeded" and attempt.response_status == 202
    assert request.path == "/workflows/1/triggers?sig=s"
    body = json.loads(request.body)
    assert body["type"] == "message"
    (attachment,) = body["attachments"]
    assert attachment["contentType"] == "application/vnd.microsoft.card.adaptive"
    card = attachment["content"]
    assert card["type"] == "AdaptiveCard" and card["version"] == "1.4"
    kinds = [element["type"] for element in card["body"]]
    assert kinds == ["TextBlock", "TextBlock", "FactSet"]
    assert card["body"][1]["text"] == ALERT.summary
    assert {"title": "Severity", "value": "major"} in card["body"][2]["facts"]
    assert card["actions"] == [
        {"type": "Action.OpenUrl", "title": "Acknowledge", "url": ALERT.ack_url}
    ]


async def test_telegram_send_message(nursery: trio.Nursery) -> None:
    config = {"bot_token": "123456:ABC-def_ghi", "chat_id": -1001234}
    attempt, request = await sent(nursery, "telegram", config)
    assert attempt.status == "succeeded"
    assert request.path == "/bot123456:ABC-def_ghi/sendMessage"
    body = json.loads(request.body)
    assert set(body) == {"chat_id", "text", "parse_mode", "disable_web_page_preview"}
    assert body["chat_id"] == "-1001234"
    assert body["parse_mode"] == "HTML" and body["disable_web_page_preview"] is True
    assert body["text"].startswith("<b>[DOWN] Checkout &lt;API&gt; &amp; co</b>\n")
    assert f'<a href="{ALERT.ack_url}">Acknowledge</a>' in body["text"]
    assert "<API>" not in body["text"]


@pytest.mark.parametrize(
    ("kind", "action"),
    [
        ("trigger", "trigger"),
        ("escalation", "trigger"),
        ("reminder", "trigger"),
        ("acknowledged", "acknowledge"),
        ("resolved", "resolve"),
    ],
)
async def test_pagerduty_events_v2(nursery: trio.Nursery, kind: str, action: str) -> None:
    message = dataclasses.replace(ALERT, kind=kind)
    attempt, request = await sent(
        nursery, "pagerduty", {"routing_key": "R0UT1NGKEY0123456789abcdefabcdef"}, message, 202
    )
    assert attempt.status == "succeeded" and attempt.response_status == 202
    assert request.path == "/v2/enqueue"
    event = json.loads(request.body)
    assert event["routing_key"] == "R0UT1NGKEY0123456789abcdefabcdef"
    assert event["event_action"] == action
    assert event["dedup_key"] == "alt_123"
    if action != "trigger":
        assert "payload" not in event
        return
    payload = event["payload"]
    assert payload["summary"] == ALERT.summary
    assert payload["severity"] == "error"  # major
    assert payload["source"] == "https://shop.example/health"  # no credentials
    assert payload["timestamp"] == "2023-11-14T22:13:20+00:00"
    assert isinstance(payload["custom_details"], dict)
    assert event["links"] == [{"href": ALERT.ack_url, "text": "Acknowledge in Uptrio"}]
    no_secret_of_the_monitor(request.body)


async def test_pagerduty_summary_and_severities(nursery: trio.Nursery) -> None:
    long = dataclasses.replace(ALERT, summary="x" * 5000, severity="maintenance")
    _, request = await sent(nursery, "pagerduty", {"routing_key": "k" * 32}, long, 202)
    payload = json.loads(request.body)["payload"]
    assert len(payload["summary"]) == 1024 and payload["severity"] == "info"


async def test_pagerduty_test_message_has_a_dedup_key(nursery: trio.Nursery) -> None:
    test = dataclasses.replace(ALERT, kind="test", alert_id=None, ack_url=None)
    _, request = await sent(nursery, "pagerduty", {"routing_key": "k" * 32}, test, 202)
    event = json.loads(request.body)
    assert event["event_action"] == "trigger" and event["dedup_key"] == "uptrio-test-nch_1"


async def test_opsgenie_create_acknowledge_close(nursery: trio.Nursery) -> None:
    config = {"api_key": "eb243592-faa2-4ba2-a551q-1afdf565c889", "region": "eu"}
    attempt, request = await sent(nursery, "opsgenie", config, status=202)
    assert attempt.status == "succeeded" and attempt.response_status == 202
    assert request.path == "/v2/alerts"
    assert request.headers["authorization"] == f"GenieKey {config['api_key']}"
    body = json.loads(request.body)
    assert body["alias"] == "alt_123" and body["priority"] == "P2"
    assert body["message"] == ALERT.summary and len(body["message"]) <= 130
    assert ALERT.ack_url in body["description"]
    assert all(isinstance(v, str) for v in body["details"].values())
    for kind, verb in (("acknowledged", "acknowledge"), ("resolved", "close")):
        message = dataclasses.replace(ALERT, kind=kind, ack_url=None)
        _, request = await sent(nursery, "opsgenie", config, message, 202)
        assert request.path == f"/v2/alerts/alt_123/{verb}?identifierType=alias"
        assert request.headers["authorization"].startswith("GenieKey ")
        assert json.loads(request.body)["source"] == "Uptrio"


async def test_opsgenie_message_is_cut_to_130(nursery: trio.Nursery) -> None:
    long = dataclasses.replace(ALERT, summary="y" * 300, severity="critical")
    _, request = await sent(nursery, "opsgenie", {"api_key": "key"}, long, 202)
    body = json.loads(request.body)
    assert len(body["message"]) == 130 and body["priority"] == "P1"


async def test_ntfy_publish(nursery: trio.Nursery) -> None:
    config = {"topic_url": "https://ntfy.sh/uptrio-ops", "access_token": "tk_secret1234"}
    attempt, request = await sent(nursery, "ntfy", config)
    assert attempt.status == "succeeded"
    assert request.path == "/uptrio-ops"
    assert request.headers["title"] == "[DOWN] Checkout <API> & co"
    assert request.headers["priority"] == "4"
    assert request.headers["click"] == ALERT.ack_url
    assert request.headers["tags"] == "rotating_light,major"
    assert request.headers["authorization"] == "Bearer tk_secret1234"
    assert request.body.decode().startswith(ALERT.summary)
    resolved = dataclasses.replace(ALERT, kind="resolved", ack_url=None)
    _, request = await sent(nursery, "ntfy", {"topic_url": "https://ntfy.sh/t"}, resolved)
    assert "click" not in request.headers and "authorization" not in request.headers
    assert request.headers["priority"] == "2"


async def test_webhook_signed_with_the_channels_secret(nursery: trio.Nursery) -> None:
    receiver = await stand_in(nursery)
    config = validate_config("webhook", {"url": receiver.url}, smtp=False)
    assert config["secret"].startswith("whsec_")
    with trio.fail_after(5):
        attempt = await send("webhook", config, ALERT, ChannelSettings(), channel_id="nch_9")
    assert attempt.status == "succeeded"
    (request,) = receiver.received
    timestamp, (v1,) = signatures(request.headers["uptrio-signature"])
    assert v1 == expected_signature(config["secret"], timestamp, request.body)
    body = json.loads(request.body)
    assert body["kind"] == "trigger" and body["channel"] == "nch_9"
    assert body["alert"]["id"] == "alt_123" and body["alert"]["severity"] == "major"
    assert body["resource"] == {
        "id": "mon_abc",
        "name": ALERT.resource_name,
        "url": "https://shop.example/health",
    }
    assert body["ack_url"] == ALERT.ack_url
    no_secret_of_the_monitor(request.body)


async def test_a_provider_error_is_a_failed_attempt(nursery: trio.Nursery) -> None:
    attempt, _ = await sent(nursery, "slack", {"webhook_url": "https://h.example/x"}, status=500)
    assert attempt.status == "failed" and attempt.response_status == 500
    assert attempt.error is not None and attempt.error.startswith("unexpected_status")


async def test_a_hanging_provider_fails_within_the_deadline(nursery: trio.Nursery) -> None:
    receiver = await stand_in(nursery, HANG)
    settings = settings_for(receiver, "pagerduty", timeout_seconds=0.5)
    started = trio.current_time()
    with trio.fail_after(3):
        attempt = await send(
            "pagerduty", {"routing_key": "k" * 32}, ALERT, settings, channel_id="nch_1"
        )
    assert attempt.status == "failed" and attempt.response_status is None
    assert attempt.error is not None and attempt.error.startswith("timeout")
    assert trio.current_time() - started < 1.5


async def test_the_target_policy_applies(nursery: trio.Nursery) -> None:
    receiver = await stand_in(nursery)
    settings = ChannelSettings(policy=TargetPolicy(deny_private=True), timeout_seconds=2.0)
    with trio.fail_after(5):
        attempt = await send("ntfy", {"topic_url": receiver.url}, ALERT, settings, channel_id="n")
    assert attempt.status == "failed" and attempt.error is not None
    assert attempt.error.startswith("target_denied")
    assert receiver.received == []


async def test_a_refused_connection_is_a_failed_attempt() -> None:
    listener = trio.socket.socket()
    await listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    listener.close()  # nothing listens there now
    settings = ChannelSettings(provider_bases={"telegram": f"http://127.0.0.1:{port}"})
    config = {"bot_token": "1:a", "chat_id": "1"}
    with trio.fail_after(5):
        attempt = await send("telegram", config, ALERT, settings, channel_id="n")
    assert attempt.status == "failed" and attempt.error is not None
    assert attempt.error.startswith("connection_refused")


async def test_cancellation_passes_through(nursery: trio.Nursery) -> None:
    receiver = await stand_in(nursery, HANG)
    settings = settings_for(receiver, "slack", timeout_seconds=30.0)
    with trio.fail_after(3), trio.move_on_after(0.3) as scope:
        await send("slack", {"webhook_url": "https://h/x"}, ALERT, settings, channel_id="n")
        pytest.fail("send returned instead of being cancelled")
    assert scope.cancelled_caught
