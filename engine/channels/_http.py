"""Sending a provider's request: the provider base (``--provider-base``) applied to the
url, then one POST through the webhook sender's client (`engine.delivery`), which
connects only where the target policy allows, follows no redirect and holds the whole
exchange to a deadline (docs/alerts.md, "Notification channels").
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

from engine.delivery import open_delivery_client
from engine.policy import TargetPolicy

from ._channel_type import HttpRequest
from ._message import Attempt, ChannelSettings

__all__ = ["post", "rebase", "under_base"]


def rebase(url: str, base: str | None) -> str:
    """``url`` with its scheme, host and port replaced by ``base``'s (``base``'s path, if
    any, put before ``url``'s); ``url`` unchanged when ``base`` is None. For the types
    whose config holds the provider's whole url (Slack, Discord, Teams, ntfy, webhook)."""
    if base is None:
        return url
    target, parts = urlsplit(url), urlsplit(base)
    path = parts.path.rstrip("/") + (target.path or "/")
    return urlunsplit((parts.scheme, parts.netloc, path, target.query, ""))


def under_base(base: str, path: str) -> str:
    """``path`` (starting with ``/``, query allowed) under ``base``: for the API types
    (Telegram, PagerDuty, Opsgenie), whose base is the API's root."""
    return base.rstrip("/") + path


async def post(request: HttpRequest, settings: ChannelSettings) -> Attempt:
    """POST ``request`` within ``settings.timeout_seconds`` (whole exchange), through
    ``settings.client`` when there is one, else through a client of its own.

    Returns:
        the `Attempt`: succeeded on a 2xx; failed with the delivery client's error code
        and sentence otherwise. Never raises for the provider's or the network's doing;
        `trio.Cancelled` passes.
    """
    if settings.client is not None:
        answer = await settings.client.post(
            request.url, request.body, request.headers, timeout_seconds=settings.timeout_seconds
        )
    else:
        policy = settings.policy if settings.policy is not None else TargetPolicy()
        async with open_delivery_client(
            policy, max_connections=1, ssl_context=settings.ssl_context
        ) as client:
            answer = await client.post(
                request.url,
                request.body,
                request.headers,
                timeout_seconds=settings.timeout_seconds,
            )
    return Attempt(
        status="succeeded" if answer.ok else "failed",
        response_status=answer.status,
        error=None if answer.ok else f"{answer.error}: {answer.message}",
        duration_ms=answer.duration_ms,
    )
