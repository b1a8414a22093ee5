"""Opsgenie: the Alert API (https://docs.opsgenie.com/docs/alert-api), authenticated
with ``Authorization: GenieKey <api_key>``
(https://docs.opsgenie.com/docs/authentication) on ``https://api.opsgenie.com``, or
``https://api.eu.opsgenie.com`` for a channel whose ``region`` is ``eu`` (docs/alerts.md).

A trigger, escalation, reminder or test creates an alert, ``POST /v2/alerts`` with
``message`` (at most 130 characters), ``alias`` = the alert id (Opsgenie
de-duplicates on it, so later steps add to the same alert; ``uptrio-test-<channel id>``
for a test), ``description``, ``priority`` (``P1`` to ``P5`` from the severity),
``details``, ``entity``, ``source`` and ``tags``; an acknowledged notice is
``POST /v2/alerts/<alias>/acknowledge?identifierType=alias`` and a resolved one
``POST /v2/alerts/<alias>/close?identifierType=alias``. Opsgenie answers 202 (the
request is processed asynchronously).

A shift reminder (docs/on-call.md) creates an informational alert (priority ``P5``,
tagged ``shift``) whose ``alias`` names the schedule, the member and the start
(``uptrio-shift-<schedule>-<member>-<start>``), so that a retried send adds nothing.

``--provider-base opsgenie=URL`` replaces the base of both regions.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final
from urllib.parse import quote

from ._channel_type import ChannelType, HttpRequest, Key, RenderContext, json_body, json_headers
from ._http import under_base
from ._message import TRIGGERING_KINDS, Message, clip, facts
from ._pagerduty import dedup_key

__all__ = ["EU_BASE", "OPSGENIE", "PRIORITIES"]

EU_BASE: Final = "https://api.eu.opsgenie.com"
"""The API base of Opsgenie's European region."""

PRIORITIES: Final = {
    "critical": "P1",
    "major": "P2",
    "minor": "P3",
    "maintenance": "P5",
    "info": "P5",
}
"""Opsgenie's ``priority`` of each alert severity."""

_ACTIONS: Final = {"acknowledged": "acknowledge", "resolved": "close"}


def render(config: Mapping[str, Any], message: Message, context: RenderContext) -> HttpRequest:
    """The Alert API POST for ``message`` (module docstring)."""
    assert context.base is not None
    base = (
        EU_BASE
        if config.get("region") == "eu" and context.base == OPSGENIE.default_base
        else context.base
    )
    alias = dedup_key(message, context.channel_id)
    if message.shift is not None:
        shift = message.shift
        alias = f"uptrio-shift-{shift.schedule_id}-{shift.member_id}-{shift.starts_at}"
    if message.kind in TRIGGERING_KINDS or message.shift is not None:
        lines = [message.summary, *(f"{k}: {v}" for k, v in facts(message))]
        if message.ack_url is not None:
            lines.append(f"Acknowledge: {message.ack_url}")
        body: dict[str, Any] = {
            "message": clip(message.summary, 130),
            "alias": alias,
            "description": clip("\n".join(lines), 15000),
            "priority": PRIORITIES.get(message.severity, "P1"),
            "details": {k: clip(v, 8000) for k, v in facts(message)},
            "entity": clip(message.resource_name, 512),
            "source": "Uptrio",
            "tags": ["uptrio", message.severity, *(["shift"] if message.shift else [])],
        }
        path = "/v2/alerts"
    else:
        action = _ACTIONS.get(message.kind, "close")
        body = {"source": "Uptrio", "note": clip(f"{message.kind.capitalize()} in Uptrio", 25000)}
        path = f"/v2/alerts/{quote(alias, safe='')}/{action}?identifierType=alias"
    return HttpRequest(
        url=under_base(base, path),
        body=json_body(body),
        headers=json_headers(context, ("Authorization", f"GenieKey {config['api_key']}")),
    )


OPSGENIE = ChannelType(
    name="opsgenie",
    keys=(
        Key(name="api_key", kind="token", secret=True),
        Key(name="region", kind="region", required=False, default="us"),
    ),
    render=render,
    default_base="https://api.opsgenie.com",
)
