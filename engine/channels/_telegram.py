"""Telegram: the Bot API's ``sendMessage`` (https://core.telegram.org/bots/api#sendmessage),
``POST <base>/bot<token>/sendMessage`` with JSON ``chat_id``, ``text`` in HTML parse mode
(https://core.telegram.org/bots/api#html-style: only ``<``, ``>``, ``&`` and ``"``
escaped), ``parse_mode: "HTML"`` and ``disable_web_page_preview`` (docs/alerts.md).
The text is at most 4,096 characters; the acknowledge link is an anchor.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

from ._channel_type import ChannelType, HttpRequest, Key, RenderContext, json_body, json_headers
from ._http import under_base
from ._message import Message, clip, facts, headline

__all__ = ["TELEGRAM", "text"]

TEXT_LIMIT = 4096
"""Longest message text Telegram takes, characters (after entities are parsed)."""


def text(message: Message) -> str:
    """The HTML text of ``message``."""
    lines = [f"<b>{html.escape(headline(message))}</b>", html.escape(clip(message.summary, 1000))]
    lines += [f"<b>{html.escape(k)}:</b> {html.escape(clip(v, 300))}" for k, v in facts(message)]
    if message.ack_url is not None:
        lines.append(f'<a href="{html.escape(message.ack_url)}">Acknowledge</a>')
    return clip("\n".join(lines), TEXT_LIMIT)


def render(config: Mapping[str, Any], message: Message, context: RenderContext) -> HttpRequest:
    """The ``sendMessage`` POST for ``message`` (module docstring)."""
    assert context.base is not None
    body = {
        "chat_id": config["chat_id"],
        "text": text(message),
        "parse_mode": "HTML",
        "disable_web_page_preview": True,
    }
    return HttpRequest(
        url=under_base(context.base, f"/bot{config['bot_token']}/sendMessage"),
        body=json_body(body),
        headers=json_headers(context),
    )


TELEGRAM = ChannelType(
    name="telegram",
    keys=(
        Key(
            name="bot_token",
            kind="token",
            secret=True,
            pattern=r"\d+:[A-Za-z0-9_-]+",
            hint="a bot token from BotFather (<digits>:<letters>)",
        ),
        Key(
            name="chat_id",
            kind="text",
            pattern=r"-?\d+|@[A-Za-z0-9_]{5,}",
            hint="a numeric chat id or an @channel name",
        ),
    ),
    render=render,
    default_base="https://api.telegram.org",
)
