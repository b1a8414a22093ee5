"""Notification channels: how an alert's notice reaches a person or a tool
(docs/alerts.md, "Notification channels").

One module per channel type renders a `Message` into the provider's documented request
(Slack, Discord, Teams, Telegram, PagerDuty, Opsgenie, ntfy, a signed webhook) or an
email; `send` sends it (HTTP through the target policy, with a deadline, no redirects;
email through the server's relay) and answers an `Attempt`; `validate_config` and
`mask_config` serve the API of ``/notification-channels``.
"""

from ._email import send_mail, sender_of
from ._message import (
    Attempt,
    ChannelSettings,
    InvalidChannelConfig,
    Message,
    SmtpNotConfigured,
    shift_summary,
)
from ._registry import CHANNEL_TYPES, mask_config, send, validate_config

__all__ = [
    "CHANNEL_TYPES",
    "Attempt",
    "ChannelSettings",
    "InvalidChannelConfig",
    "Message",
    "SmtpNotConfigured",
    "mask_config",
    "send",
    "send_mail",
    "sender_of",
    "shift_summary",
    "validate_config",
]
