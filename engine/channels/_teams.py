"""Microsoft Teams: a message to a Workflows (Power Automate) webhook, "When a Teams
webhook request is received"
(https://support.microsoft.com/office/create-incoming-webhooks-with-workflows-for-microsoft-teams-8ae491c7-0394-4861-ba59-055e33f75498),
carrying one Adaptive Card 1.4 (https://adaptivecards.io/explorer/AdaptiveCard.html):
TextBlocks with the headline and the summary, a FactSet of the details and an
``Action.OpenUrl`` to the acknowledge link when there is one
(https://learn.microsoft.com/microsoftteams/platform/task-modules-and-cards/cards/cards-reference#adaptive-card).
The body is ``{"type": "message", "attachments": [{"contentType":
"application/vnd.microsoft.card.adaptive", "content": <card>}]}`` (docs/alerts.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._channel_type import ChannelType, HttpRequest, Key, RenderContext, json_body, json_headers
from ._http import rebase
from ._message import Message, facts, headline

__all__ = ["TEAMS", "card"]


_COLORS = {"resolved": "Good", "shift_starting": "Accent"}
"""The headline's Adaptive Card color of a notice that reports no problem."""


def card(message: Message) -> dict[str, Any]:
    """The Adaptive Card of ``message``."""
    content: dict[str, Any] = {
        "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
        "type": "AdaptiveCard",
        "version": "1.4",
        "body": [
            {
                "type": "TextBlock",
                "text": headline(message),
                "size": "Large",
                "weight": "Bolder",
                "wrap": True,
                "color": _COLORS.get(message.kind, "Attention"),
            },
            {"type": "TextBlock", "text": message.summary, "wrap": True},
            {
                "type": "FactSet",
                "facts": [{"title": label, "value": value} for label, value in facts(message)],
            },
        ],
    }
    if message.ack_url is not None:
        content["actions"] = [
            {"type": "Action.OpenUrl", "title": "Acknowledge", "url": message.ack_url}
        ]
    return content


def render(config: Mapping[str, Any], message: Message, context: RenderContext) -> HttpRequest:
    """The workflow POST for ``message`` (module docstring)."""
    body = {
        "type": "message",
        "attachments": [
            {
                "contentType": "application/vnd.microsoft.card.adaptive",
                "contentUrl": None,
                "content": card(message),
            }
        ],
    }
    return HttpRequest(
        url=rebase(config["webhook_url"], context.base),
        body=json_body(body),
        headers=json_headers(context),
    )


TEAMS = ChannelType(
    name="teams",
    keys=(Key(name="webhook_url", kind="url", secret=True),),
    render=render,
)
