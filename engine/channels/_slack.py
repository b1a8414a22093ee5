"""Slack: an incoming-webhook message (https://api.slack.com/messaging/webhooks), with
``text`` (the notification's fallback) and Block Kit ``blocks``
(https://api.slack.com/reference/block-kit/blocks): a header, a section with the
summary, the details as section fields, and an actions block whose button opens the
acknowledge link when there is one (docs/alerts.md).

Limits kept: a header's text 150 characters, a section's 3,000, a field's 2,000, at most
10 fields. ``&``, ``<`` and ``>`` are escaped in mrkdwn, as Slack asks
(https://api.slack.com/reference/surfaces/formatting#escaping).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._channel_type import ChannelType, HttpRequest, Key, RenderContext, json_body, json_headers
from ._http import rebase
from ._message import Message, clip, facts, headline

__all__ = ["SLACK"]


def escape(text: str) -> str:
    """``text`` with Slack's three control characters escaped."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def render(config: Mapping[str, Any], message: Message, context: RenderContext) -> HttpRequest:
    """The incoming-webhook POST for ``message`` (module docstring)."""
    title = headline(message)
    fields = [
        {"type": "mrkdwn", "text": clip(f"*{label}*\n{escape(value)}", 2000)}
        for label, value in facts(message)
    ][:10]
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": clip(title, 150)}},
        {
            "type": "section",
            "text": {"type": "mrkdwn", "text": clip(escape(message.summary), 3000)},
        },
        {"type": "section", "fields": fields},
    ]
    if message.ack_url is not None:
        button = {
            "type": "button",
            "action_id": "acknowledge",
            "text": {"type": "plain_text", "text": "Acknowledge"},
            "url": message.ack_url,
            "style": "primary",
        }
        blocks.append({"type": "actions", "elements": [button]})
    body = {"text": clip(f"{title}: {message.summary}", 3000), "blocks": blocks}
    return HttpRequest(
        url=rebase(config["webhook_url"], context.base),
        body=json_body(body),
        headers=json_headers(context),
    )


SLACK = ChannelType(
    name="slack",
    keys=(Key(name="webhook_url", kind="url", secret=True),),
    render=render,
)
