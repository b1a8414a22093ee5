"""Notification channels (docs/alerts.md): rendering a :class:`Message` into each
provider's documented request and sending it.

A placeholder with the package's interface only, so that the notifier (``engine.notifier``)
can be built and type-checked against it; the channels package proper replaces this file
whole. Its :func:`send` sends nothing: every attempt fails (``not_implemented``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..policy import TargetPolicy

__all__ = [
    "CHANNEL_TYPES",
    "Attempt",
    "ChannelSettings",
    "InvalidChannelConfig",
    "Message",
    "SmtpNotConfigured",
    "mask_config",
    "send",
    "validate_config",
]

CHANNEL_TYPES: tuple[str, ...] = (
    "email",
    "slack",
    "discord",
    "teams",
    "telegram",
    "pagerduty",
    "opsgenie",
    "ntfy",
    "webhook",
)
"""The channel types, in the order docs/alerts.md lists them."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Message:
    """What a notification says (docs/alerts.md); times in epoch seconds."""

    kind: str
    alert_id: str | None
    resource_id: str
    resource_name: str
    resource_url: str | None
    status: str
    severity: str
    summary: str
    error: str | None
    triggered_at: int
    ack_url: str | None
    step: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class ChannelSettings:
    """Where and how sends go: the SMTP relay, providers' bases, the target policy, and
    an attempt's deadline in seconds (default 10)."""

    smtp_url: str | None
    smtp_from: str | None
    provider_bases: Mapping[str, str]
    policy: TargetPolicy | None
    timeout_seconds: float = 10.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Attempt:
    """One attempt's outcome: ``succeeded`` or ``failed``; ``duration_ms`` milliseconds."""

    status: str
    response_status: int | None
    error: str | None
    duration_ms: float


class InvalidChannelConfig(ValueError):
    """A channel's config is refused; ``param`` is the offending key."""

    def __init__(self, message: str, *, param: str) -> None:
        super().__init__(message)
        self.param = param


class SmtpNotConfigured(ValueError):
    """An email channel without an SMTP relay (``--smtp-url``)."""


def validate_config(type: str, config: Mapping[str, Any], *, smtp: bool) -> dict[str, Any]:
    """The normalized config (placeholder: a copy).

    Raises:
        SmtpNotConfigured: an email channel and no relay.
    """
    if type == "email" and not smtp:
        raise SmtpNotConfigured("no SMTP relay is configured (--smtp-url)")
    return dict(config)


def mask_config(type: str, config: Mapping[str, Any]) -> dict[str, Any]:
    """The config as the API shows it (placeholder: a copy)."""
    return dict(config)


async def send(
    type: str,
    config: Mapping[str, Any],
    message: Message,
    settings: ChannelSettings,
    *,
    channel_id: str,
) -> Attempt:
    """Send ``message`` (placeholder: sends nothing, a failed attempt)."""
    return Attempt(status="failed", response_status=None, error="not_implemented", duration_ms=0.0)
