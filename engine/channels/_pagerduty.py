"""PagerDuty: the Events API v2 (https://developer.pagerduty.com/docs/send-alert-event,
https://developer.pagerduty.com/api-reference/368ae3d938c9e-send-an-event-to-pager-duty),
``POST <base>/v2/enqueue`` with the channel's ``routing_key`` (docs/alerts.md).

A trigger, escalation, reminder or test is an ``event_action: "trigger"`` with
``dedup_key`` = the alert id (``uptrio-test-<channel id>`` for a test, which has no
alert), a ``payload`` (``summary`` of at most 1,024 characters, ``source``,
``severity``, ``timestamp``, ``custom_details``) and ``links`` to the acknowledge page;
acknowledged and resolved notices are ``acknowledge`` and ``resolve`` events with the
same ``dedup_key`` (no payload), so PagerDuty's incident follows the alert. A shift
reminder (docs/on-call.md) pages nobody: it is a change event, ``POST
<base>/v2/change/enqueue`` with a ``payload`` (``summary``, ``source``, ``timestamp``,
``custom_details``), which PagerDuty shows on the service and never notifies about
(https://developer.pagerduty.com/docs/send-change-event). PagerDuty answers 202.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from ._channel_type import ChannelType, HttpRequest, Key, RenderContext, json_body, json_headers
from ._http import under_base
from ._message import TRIGGERING_KINDS, Message, clip, facts, iso_time, public_url

__all__ = ["PAGERDUTY", "SEVERITIES", "dedup_key"]

SEVERITIES: Final = {
    "critical": "critical",
    "major": "error",
    "minor": "warning",
    "maintenance": "info",
}
"""PagerDuty's ``payload.severity`` of each alert severity."""

_ACTIONS: Final = {"acknowledged": "acknowledge", "resolved": "resolve"}


def dedup_key(message: Message, channel_id: str) -> str:
    """The key tying a provider's incident to the alert: the alert id, or
    ``uptrio-test-<channel id>`` for a test message."""
    return message.alert_id if message.alert_id is not None else f"uptrio-test-{channel_id}"


def _change(config: Mapping[str, Any], message: Message, context: RenderContext) -> HttpRequest:
    """The change event of a shift reminder (module docstring)."""
    assert context.base is not None
    event = {
        "routing_key": config["routing_key"],
        "payload": {
            "summary": clip(message.summary, 1024),
            "source": message.resource_name,
            "timestamp": iso_time(message.triggered_at),
            "custom_details": dict(facts(message)),
        },
    }
    return HttpRequest(
        url=under_base(context.base, "/v2/change/enqueue"),
        body=json_body(event),
        headers=json_headers(context),
    )


def render(config: Mapping[str, Any], message: Message, context: RenderContext) -> HttpRequest:
    """The Events API v2 POST for ``message`` (module docstring)."""
    assert context.base is not None
    if message.shift is not None:
        return _change(config, message, context)
    action = (
        "trigger" if message.kind in TRIGGERING_KINDS else _ACTIONS.get(message.kind, "resolve")
    )
    event: dict[str, Any] = {
        "routing_key": config["routing_key"],
        "event_action": action,
        "dedup_key": dedup_key(message, context.channel_id),
    }
    if action == "trigger":
        event["payload"] = {
            "summary": clip(message.summary, 1024),
            "source": public_url(message.resource_url) or message.resource_name,
            "severity": SEVERITIES.get(message.severity, "critical"),
            "timestamp": iso_time(message.triggered_at),
            "component": message.resource_name,
            "class": "test" if message.kind == "test" else "down",
            "custom_details": dict(facts(message)),
        }
        event["client"] = "Uptrio"
        if message.ack_url is not None:
            event["links"] = [{"href": message.ack_url, "text": "Acknowledge in Uptrio"}]
    return HttpRequest(
        url=under_base(context.base, "/v2/enqueue"),
        body=json_body(event),
        headers=json_headers(context),
    )


PAGERDUTY = ChannelType(
    name="pagerduty",
    keys=(Key(name="routing_key", kind="token", secret=True),),
    render=render,
    default_base="https://events.pagerduty.com",
)
