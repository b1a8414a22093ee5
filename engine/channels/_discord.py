"""Discord: a webhook execution (https://discord.com/developers/docs/resources/webhook#execute-webhook)
with ``content`` and one embed
(https://discord.com/developers/docs/resources/message#embed-object): title, description
(the summary), a color by severity (green once resolved, blue for a shift reminder), the
details as inline fields and ``url`` = the acknowledge link. ``allowed_mentions`` is empty,
so a monitor named ``@everyone`` pings nobody (docs/alerts.md).

Limits kept: content 2,000 characters, title 256, description 4,096, 25 fields of 256
(name) and 1,024 (value) characters.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from ._channel_type import ChannelType, HttpRequest, Key, RenderContext, json_body, json_headers
from ._http import rebase
from ._message import Message, clip, facts, headline, iso_time

__all__ = ["DISCORD", "color"]

COLORS: Final = {
    "critical": 0xE01E5A,
    "major": 0xF2994A,
    "minor": 0xF2C94C,
    "maintenance": 0x5865F2,
    "info": 0x3B82F6,
}
"""The embed's color by severity (RGB as an integer, as Discord takes it)."""

RESOLVED_COLOR: Final = 0x2EB67D


def color(message: Message) -> int:
    """The embed color of ``message``: green once resolved, else by severity."""
    if message.kind == "resolved":
        return RESOLVED_COLOR
    return COLORS.get(message.severity, COLORS["critical"])


def render(config: Mapping[str, Any], message: Message, context: RenderContext) -> HttpRequest:
    """The webhook POST for ``message`` (module docstring)."""
    title = headline(message)
    embed: dict[str, Any] = {
        "title": clip(title, 256),
        "description": clip(message.summary, 4096),
        "color": color(message),
        "fields": [
            {"name": clip(label, 256), "value": clip(value, 1024), "inline": True}
            for label, value in facts(message)
        ][:25],
        "timestamp": iso_time(message.triggered_at),
    }
    if message.ack_url is not None:
        embed["url"] = message.ack_url
    content = title if message.ack_url is None else f"{title}: acknowledge at {message.ack_url}"
    body = {
        "content": clip(content, 2000),
        "embeds": [embed],
        "allowed_mentions": {"parse": []},
    }
    return HttpRequest(
        url=rebase(config["webhook_url"], context.base),
        body=json_body(body),
        headers=json_headers(context),
    )


DISCORD = ChannelType(
    name="discord",
    keys=(Key(name="webhook_url", kind="url", secret=True),),
    render=render,
)
