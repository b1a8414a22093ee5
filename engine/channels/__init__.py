"""Notification channels (docs/alerts.md): a STAND-IN with the package's interface and
the ``webhook`` type only, so the API of channels can be built and tested before the
full package lands; the full package (one module per type) replaces this file whole.

Interface: :class:`Message`, :class:`ChannelSettings`, :class:`Attempt`,
:data:`CHANNEL_TYPES`, :class:`InvalidChannelConfig`, :class:`SmtpNotConfigured`,
:func:`validate_config`, :func:`mask_config`, :func:`send`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any
from urllib.parse import urlsplit

from ..delivery import open_delivery_client
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
"""The nine channel types, in the order of docs/alerts.md."""

_SECRETS: dict[str, tuple[str, ...]] = {"webhook": ("url",)}
"""Config keys that are secrets, by type (read back masked)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Message:
    """One message to a person: what happened to which monitor or heartbeat (times in
    epoch seconds)."""

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
    """Where sends go: the SMTP relay, provider bases, the target policy, and the time
    one send may take (seconds)."""

    smtp_url: str | None = None
    smtp_from: str | None = None
    provider_bases: Mapping[str, str] = field(default_factory=dict)
    policy: TargetPolicy | None = None
    timeout_seconds: float = 10.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Attempt:
    """The outcome of one send: ``succeeded`` or ``failed``, the provider's HTTP status
    (None: none came), an error (None on success), the duration in milliseconds."""

    status: str
    response_status: int | None
    error: str | None
    duration_ms: float


class InvalidChannelConfig(ValueError):
    """A config the type does not accept; ``param`` names the offending key."""

    def __init__(self, message: str, param: str) -> None:
        super().__init__(message)
        self.param = param


class SmtpNotConfigured(ValueError):
    """An email channel where the server has no SMTP relay (``--smtp-url``)."""


def validate_config(type: str, config: Mapping[str, Any], *, smtp: bool) -> dict[str, Any]:
    """The normalized config of a channel of ``type``.

    Raises:
        SmtpNotConfigured: an email channel and ``smtp`` is False.
        InvalidChannelConfig: a key missing, unknown or malformed (``param`` names it).
    """
    if type == "email" and not smtp:
        raise SmtpNotConfigured("email channels need the server's SMTP relay (--smtp-url)")
    if type != "webhook":
        raise InvalidChannelConfig(f"channel type {type} is not available yet", "type")
    unknown = sorted(set(config) - {"url"})
    if unknown:
        raise InvalidChannelConfig(f"unknown config key {unknown[0]!r}", unknown[0])
    url = config.get("url")
    if not isinstance(url, str) or urlsplit(url).scheme not in ("http", "https"):
        raise InvalidChannelConfig("url must be an absolute http or https URL", "url")
    if not urlsplit(url).hostname or len(url) > 2048:
        raise InvalidChannelConfig("url must be an absolute http or https URL", "url")
    return {"url": url}


def mask_config(type: str, config: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` with each secret shown as ``"…"`` and its last 4 characters."""
    secrets = _SECRETS.get(type, ())
    return {
        k: f"…{str(v)[-4:]}" if k in secrets and v is not None else v for k, v in config.items()
    }


async def send(
    type: str,
    config: Mapping[str, Any],
    message: Message,
    settings: ChannelSettings,
    *,
    channel_id: str,
) -> Attempt:
    """Send ``message`` on the channel (``webhook`` only here: the message as JSON);
    never raises for the receiver's failure; ``trio.Cancelled`` propagates."""
    body = json.dumps({"channel": channel_id, **asdict(message)}).encode()
    async with open_delivery_client(settings.policy or TargetPolicy(), max_connections=1) as client:
        answer = await client.post(
            config["url"],
            body,
            [("Content-Type", "application/json")],
            timeout_seconds=settings.timeout_seconds,
        )
    return Attempt(
        status="succeeded" if answer.ok else "failed",
        response_status=answer.status,
        error=answer.error,
        duration_ms=answer.duration_ms,
    )
