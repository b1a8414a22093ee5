"""ntfy: a publish (https://docs.ntfy.sh/publish/), ``POST <topic_url>`` with the
message as the body and the headers ``Title``, ``Priority``, ``Tags`` and ``Click`` (the
acknowledge link), plus ``Authorization: Bearer <access_token>`` when the channel has
one (https://docs.ntfy.sh/publish/#access-tokens) (docs/alerts.md).

``Priority``: from the severity for a notice that asks someone to act (critical 5,
``urgent``; major 4; minor 3; maintenance 2); an acknowledged or resolved notice is 2, so it
does not ring through do-not-disturb; a shift reminder is 3, ntfy's default. A title that is
not ASCII is sent RFC 2047-encoded, which ntfy decodes
(https://docs.ntfy.sh/publish/#message-title).
"""

from __future__ import annotations

from collections.abc import Mapping
from email.header import Header
from typing import Any, Final

from ._channel_type import ChannelType, HttpRequest, Key, RenderContext
from ._http import rebase
from ._message import TRIGGERING_KINDS, Message, facts, headline

__all__ = ["NTFY", "PRIORITIES", "TAGS"]

PRIORITIES: Final = {"critical": "5", "major": "4", "minor": "3", "maintenance": "2"}
"""ntfy's ``Priority`` of each severity (module docstring)."""

TAGS: Final = {
    "trigger": "rotating_light",
    "escalation": "rotating_light",
    "reminder": "rotating_light",
    "acknowledged": "eyes",
    "resolved": "white_check_mark",
    "test": "test_tube",
    "shift_starting": "calendar",
}
"""The emoji tag of each kind (https://docs.ntfy.sh/emojis/)."""


_QUIET: Final = {"acknowledged": "2", "resolved": "2", "shift_starting": "3"}
"""The ``Priority`` of a notice that asks nobody to act (module docstring)."""


def header_value(text: str) -> str:
    """``text`` on one line, RFC 2047-encoded when it is not ASCII."""
    line = " ".join(text.split())
    return line if line.isascii() else Header(line, "utf-8").encode()


def render(config: Mapping[str, Any], message: Message, context: RenderContext) -> HttpRequest:
    """The publish POST for ``message`` (module docstring)."""
    lines = [message.summary, *(f"{k}: {v}" for k, v in facts(message))]
    urgent = message.kind in TRIGGERING_KINDS
    headers = [
        ("Content-Type", "text/plain; charset=utf-8"),
        ("User-Agent", context.user_agent),
        ("Title", header_value(headline(message))),
        ("Priority", PRIORITIES.get(message.severity, "5") if urgent else _QUIET[message.kind]),
        ("Tags", f"{TAGS.get(message.kind, 'bell')},{message.severity}"),
    ]
    if message.ack_url is not None:
        headers.append(("Click", message.ack_url))
        headers.append(("Actions", f"view, Acknowledge, {message.ack_url}"))
    token = config.get("access_token")
    if token:
        headers.append(("Authorization", f"Bearer {token}"))
    return HttpRequest(
        url=rebase(config["topic_url"], context.base),
        body="\n".join(lines).encode("utf-8"),
        headers=tuple(headers),
    )


NTFY = ChannelType(
    name="ntfy",
    keys=(
        Key(name="topic_url", kind="url"),
        Key(name="access_token", kind="token", required=False, secret=True),
    ),
    render=render,
)
