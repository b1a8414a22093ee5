"""A generic webhook: ``POST <url>`` with the alert as JSON, signed like the webhook
deliveries of events (docs/webhooks.md: ``Uptrio-Signature: t=<epoch seconds>,v1=<hex>``,
HMAC-SHA256 of ``"<t>.<body>"``) with the channel's own ``whsec_`` secret, made when the
channel is created without one and read back masked (docs/alerts.md).

The body::

    {"object": "notification", "kind": "trigger", "channel": "nch_…",
     "alert": {"object": "alert", "id": "alt_…", "status": "triggered",
               "severity": "critical", "summary": "…", "monitor": "mon_…",
               "triggered_at": 1700000000, "escalation_step": 0},
     "resource": {"id": "mon_…", "name": "…", "url": "https://…"},
     "error": "…", "ack_url": "https://…/alerts/ack/…", "sent_at": 1700000060}

A shift reminder (kind ``shift_starting``; docs/on-call.md) has ``"alert": null``, its
schedule as the ``resource`` and a ``shift``: ``{"object": "shift", "schedule": "sch_…",
"member": "mbr_…", "member_name": "…", "start": 1700000600, "end": 1700604800,
"time_zone": "Europe/Berlin"}``.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import Any

from engine.signing import SIGNATURE_HEADER, signature_header

from ._channel_type import ChannelType, HttpRequest, Key, RenderContext, json_body, json_headers
from ._http import rebase
from ._message import Message, public_url

__all__ = ["WEBHOOK", "new_secret"]


def new_secret() -> str:
    """A new signing secret: ``whsec_`` and 256 random bits, URL-safe base64, like a
    webhook endpoint's (docs/webhooks.md)."""
    return "whsec_" + secrets.token_urlsafe(32)


def prepare(config: dict[str, Any]) -> None:
    """Give a config without a ``secret`` a new one."""
    if not config.get("secret"):
        config["secret"] = new_secret()


def render(config: Mapping[str, Any], message: Message, context: RenderContext) -> HttpRequest:
    """The signed POST for ``message`` (module docstring)."""
    shift = message.shift
    body = json_body(
        {
            "object": "notification",
            "kind": message.kind,
            "channel": context.channel_id,
            "alert": None
            if shift is not None
            else {
                "object": "alert",
                "id": message.alert_id,
                "status": message.status,
                "severity": message.severity,
                "summary": message.summary,
                "monitor": message.resource_id,
                "triggered_at": message.triggered_at,
                "escalation_step": message.step,
            },
            "resource": {
                "id": message.resource_id,
                "name": message.resource_name,
                "url": public_url(message.resource_url),
            },
            "error": message.error,
            "ack_url": message.ack_url,
            "sent_at": context.now,
            **(
                {}
                if shift is None
                else {
                    "shift": {
                        "object": "shift",
                        "schedule": shift.schedule_id,
                        "member": shift.member_id,
                        "member_name": shift.member_name,
                        "start": shift.starts_at,
                        "end": shift.ends_at,
                        "time_zone": shift.time_zone,
                    }
                }
            ),
        }
    )
    signature = signature_header([config["secret"]], context.now, body)
    return HttpRequest(
        url=rebase(config["url"], context.base),
        body=body,
        headers=json_headers(context, (SIGNATURE_HEADER, signature)),
    )


WEBHOOK = ChannelType(
    name="webhook",
    keys=(
        Key(name="url", kind="url"),
        Key(
            name="secret",
            kind="token",
            required=False,
            secret=True,
            pattern=r"whsec_[A-Za-z0-9_-]{32,}",
            hint="whsec_ and at least 32 URL-safe characters",
        ),
    ),
    render=render,
    prepare=prepare,
)
