"""The channel types (`TYPES`, in the API's order) and what is done with any of them:
`validate_config`, `mask_config`, `send` (docs/alerts.md, "Notification channels").
Adding a type is a module with its `ChannelType` and its line in `TYPES`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final

import structlog

from engine.webhooks import user_agent

from ._channel_type import ChannelType, RenderContext
from ._discord import DISCORD
from ._email import EMAIL
from ._http import post
from ._message import Attempt, ChannelSettings, InvalidChannelConfig, Message, SmtpNotConfigured
from ._ntfy import NTFY
from ._opsgenie import OPSGENIE
from ._pagerduty import PAGERDUTY
from ._slack import SLACK
from ._teams import TEAMS
from ._telegram import TELEGRAM
from ._webhook import WEBHOOK

__all__ = ["CHANNEL_TYPES", "TYPES", "mask_config", "send", "validate_config"]

log = structlog.get_logger("uptrio.channels")

TYPES: Final[Mapping[str, ChannelType]] = MappingProxyType(
    {
        t.name: t
        for t in (EMAIL, SLACK, DISCORD, TEAMS, TELEGRAM, PAGERDUTY, OPSGENIE, NTFY, WEBHOOK)
    }
)
"""Every channel type by its name. Read-only."""

CHANNEL_TYPES: Final = tuple(TYPES)
"""The channel ``type`` values, in the API's order: ``email``, ``slack``, ``discord``,
``teams``, ``telegram``, ``pagerduty``, ``opsgenie``, ``ntfy``, ``webhook``."""


def _type(name: str) -> ChannelType:
    channel_type = TYPES.get(name)
    if channel_type is None:
        raise InvalidChannelConfig("type", f"type must be one of {', '.join(CHANNEL_TYPES)}")
    return channel_type


def validate_config(type: str, config: Mapping[str, Any], *, smtp: bool) -> dict[str, Any]:
    """The normalized ``config`` of a channel of ``type``: values stripped, defaults
    added (Opsgenie's ``region`` ``us``), a webhook channel's ``secret`` made when it
    has none, null optional keys dropped.

    Args:
        smtp: whether this server has a mail relay (``--smtp-url``).

    Raises:
        InvalidChannelConfig: an unknown type (``param`` ``"type"``), a config that is
            not an object (``"config"``), an unknown key, a missing required key, a
            value breaking its key's rule (``param`` the key); keys are checked in the
            type's order, unknown keys first.
        SmtpNotConfigured: an email channel on a server without a relay (checked
            before the config).
    """
    channel_type = _type(type)
    if channel_type is EMAIL and not smtp:
        raise SmtpNotConfigured("email channels need the server's SMTP relay (--smtp-url)")
    if not isinstance(config, Mapping):
        raise InvalidChannelConfig("config", "config must be an object")
    known = {key.name for key in channel_type.keys}
    for name in config:
        if name not in known:
            allowed = ", ".join(key.name for key in channel_type.keys)
            raise InvalidChannelConfig(
                str(name), f"{name} is not a config key of {type} channels (they have {allowed})"
            )
    normalized: dict[str, Any] = {}
    for key in channel_type.keys:
        value = config.get(key.name)
        if value is None:
            if key.required:
                raise InvalidChannelConfig(key.name, f"{key.name} is required for {type} channels")
            if key.default is not None:
                normalized[key.name] = key.default
            continue
        normalized[key.name] = key.check(value)
    if channel_type.prepare is not None:
        channel_type.prepare(normalized)
    return normalized


def mask(value: str) -> str:
    """``"…"`` and the last 4 characters of ``value`` (only ``"…"`` for a value of 8
    characters or fewer, which 4 would give away half of)."""
    return "…" + value[-4:] if len(value) > 8 else "…"


def mask_config(type: str, config: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` as the API shows it: each secret value (Slack's, Discord's and
    Teams' ``webhook_url``, whose url is the credential; ``bot_token``,
    ``routing_key``, ``api_key``, ``access_token``, ``secret``) masked by `mask`; other
    values as they are. An unknown type masks every string value."""
    channel_type = TYPES.get(type)
    secret = channel_type.secret_keys if channel_type is not None else None
    return {
        key: mask(value) if isinstance(value, str) and (secret is None or key in secret) else value
        for key, value in config.items()
    }


async def send(
    type: str,
    config: Mapping[str, Any],
    message: Message,
    settings: ChannelSettings,
    *,
    channel_id: str,
) -> Attempt:
    """Send ``message`` on a channel of ``type`` with ``config`` (as `validate_config`
    returned it) and return the attempt.

    HTTP types POST the provider's request (each type's module) to its base
    (``settings.provider_bases[type]``, else the provider's) through the target policy,
    within ``settings.timeout_seconds``, following no redirect; email goes through the
    relay.

    Returns:
        the `Attempt`. Never raises for the provider's, the relay's or the network's
        doing, nor for a config that no longer validates (``invalid_config``) or a bug
        while rendering (``internal_error``, logged); `trio.Cancelled` passes.
    """
    try:
        channel_type = _type(type)
        if channel_type.deliver is not None:
            return await channel_type.deliver(config, message, settings)
        assert channel_type.render is not None
        context = RenderContext(
            base=settings.provider_bases.get(type, channel_type.default_base),
            channel_id=channel_id,
            user_agent=user_agent(),
            now=int(time.time()),
        )
        request = channel_type.render(config, message, context)
    except (InvalidChannelConfig, SmtpNotConfigured, KeyError) as exc:
        return Attempt.failed(f"invalid_config: {exc}")
    except Exception as exc:  # trio.Cancelled is a BaseException: it passes
        log.error("notification not rendered", channel=channel_id, type=type, exc_info=exc)
        return Attempt.failed(f"internal_error: {exc!r}")
    return await post(request, settings)
