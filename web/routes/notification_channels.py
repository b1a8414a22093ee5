"""Notification channel endpoints (docs/alerts.md, "Notification channels"): create,
read, list, update, delete, and send a test message.

Rules (docs/alerts.md; bodies in :mod:`web.api.notification_channels`): ``config`` is
validated by the channel type (:func:`engine.validate_config`: 422
``invalid_channel_config``, ``param`` ``config.<key>``); an ``email`` channel needs the
server's SMTP relay (422 ``smtp_not_configured``, ``param`` ``type``, when
``Dependencies.smtp_configured`` is false); secrets never leave the service (every response
masks them, :func:`engine.mask_config`); a PATCH's ``config`` replaces the keys it sends,
keeping the others (a secret need not be re-sent), and the result is validated whole; lists
are sortable by ``created``, ``updated`` and ``name`` and filterable by ``type``. ``POST
/notification-channels/:id/test`` sends a test message at once (within the send's own 10 s)
and answers 200 with the attempt's real outcome, which is recorded as a notification of
kind ``test`` (no alert) with its one attempt. Deleting a channel takes it out of every
member's ``contact_channels``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from engine import (
    CHANNEL_TYPES,
    InvalidChannelConfig,
    Message,
    SmtpNotConfigured,
    send,
    validate_config,
)
from store import NotificationChannelRecord, new_id, notification_channels

from ..api.common import EmptyBody, list_object, merge_metadata
from ..api.notification_channels import (
    AttemptObject,
    ChannelCreate,
    ChannelList,
    ChannelObject,
    ChannelUpdate,
    attempt_object,
    channel_object,
)
from ..http.errors import ApiError
from ..http.params import choice, parse_list_query
from ..http.pipeline import ApiResponse, RequestContext, Route
from ..http.validation import validate
from .common import crud_routes, delete_owned, get_owned, not_found, now, patch_changes, path_id
from .resource import Resource

__all__ = ["RESOURCE"]


def _validated(ctx: RequestContext, type: str, config: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` as the channel type normalizes it.

    Raises:
        ApiError: 422 ``smtp_not_configured`` (``param`` ``type``) or
            ``invalid_channel_config`` (``param`` ``config.<key>``).
    """
    try:
        return validate_config(type, config, smtp=ctx.deps.smtp_configured)
    except SmtpNotConfigured:
        raise ApiError(
            "smtp_not_configured",
            "email channels need the server's SMTP relay, and this server has none "
            "(uptrio serve --smtp-url)",
            param="type",
        ) from None
    except InvalidChannelConfig as exc:
        param = "type" if exc.param == "type" else f"config.{exc.param}"
        raise ApiError("invalid_channel_config", str(exc), param=param) from None


async def create_channel(ctx: RequestContext) -> ApiResponse:
    """POST /notification-channels: 201 with the new channel, its secrets masked."""
    body = ctx.json_body(ChannelCreate)
    config = _validated(ctx, body.type, body.config)
    created = now()
    values = {
        "id": new_id(RESOURCE.prefix),
        "account_id": ctx.account_id,
        "name": body.name,
        "type": body.type,
        "config": config,
        "enabled": body.enabled,
        "send_resolved": body.send_resolved,
        "created": created,
        "updated": created,
        "metadata": merge_metadata({}, body.metadata),
    }
    record = await ctx.deps.db.transaction(notification_channels.insert_channel, values)
    return ApiResponse(201, channel_object(record))


async def get_channel(ctx: RequestContext) -> ApiResponse:
    """GET /notification-channels/:id (secrets masked)."""
    return await get_owned(ctx, RESOURCE, notification_channels.get_channel, channel_object)


async def list_channels(ctx: RequestContext) -> ApiResponse:
    """GET /notification-channels: a page, newest first by default (``sort``:
    ``created``, ``updated``, ``name``; filter ``type``)."""
    query = parse_list_query(
        ctx.query,
        prefix=RESOURCE.prefix,
        sorts=("created", "updated", "name"),
        filters={"type": choice(*CHANNEL_TYPES)},
    )
    page = await ctx.deps.db.run(
        notification_channels.list_channels, ctx.account_id, query.page, **query.filters
    )
    return ApiResponse(
        200, list_object("/notification-channels", page.items, page.has_more, channel_object)
    )


async def update_channel(ctx: RequestContext) -> ApiResponse:
    """PATCH /notification-channels/:id: only the fields sent change; ``config`` keys
    sent replace those stored, the others stay; metadata merges."""
    channel_id = path_id(ctx, RESOURCE)
    body = validate(ChannelUpdate, ctx.json_object())

    def apply(current: NotificationChannelRecord) -> dict[str, Any]:
        changes = patch_changes(body, current)
        if body.config is not None:
            config = _validated(ctx, current.type, {**current.config, **body.config})
            if config == current.config:
                changes.pop("config", None)
            else:
                changes["config"] = config
        return changes

    record = await ctx.deps.db.transaction(
        notification_channels.update_channel, ctx.account_id, channel_id, apply, now()
    )
    if record is None:
        raise not_found(RESOURCE, channel_id)
    return ApiResponse(200, channel_object(record))


async def delete_channel(ctx: RequestContext) -> ApiResponse:
    """DELETE /notification-channels/:id: 204; its notifications go with it, and members
    no longer list it."""
    await delete_owned(ctx, RESOURCE, notification_channels.delete_channel)
    return ApiResponse(204)


def sample_message(channel: NotificationChannelRecord, at: int) -> Message:
    """The test message of ``channel`` (``at``: epoch seconds): kind ``test``, no alert, a
    summary naming the channel."""
    return Message(
        kind="test",
        alert_id=None,
        resource_id=channel.id,
        resource_name=channel.name,
        resource_url=None,
        status="triggered",
        severity="minor",
        summary=f"Test message from Uptrio to the notification channel {channel.name!r}",
        error=None,
        triggered_at=at,
        ack_url=None,
        step=None,
    )


async def send_test(ctx: RequestContext) -> ApiResponse:
    """POST /notification-channels/:id/test: send a test message now; 200 with the
    attempt (``succeeded`` or ``failed``, as the provider answered), recorded as a
    notification of kind ``test``."""
    channel_id = path_id(ctx, RESOURCE)
    ctx.json_body(EmptyBody, optional=True)
    channel = await ctx.deps.db.run(notification_channels.get_channel, ctx.account_id, channel_id)
    if channel is None:
        raise not_found(RESOURCE, channel_id)
    settings = ctx.deps.channels
    if settings.policy is None:
        settings = dataclasses.replace(settings, policy=ctx.deps.target_policy)
    at = now()
    attempt = await send(
        channel.type, channel.config, sample_message(channel, at), settings, channel_id=channel.id
    )
    await ctx.deps.db.transaction(
        notification_channels.record_test,
        ctx.account_id,
        channel.id,
        status=attempt.status,
        response_status=attempt.response_status,
        error=attempt.error,
        duration_ms=attempt.duration_ms,
        now=at,
    )
    return ApiResponse(200, attempt_object(attempt))


RESOURCE = Resource(
    path="/notification-channels",
    noun="notification channel",
    prefix="nch",
    permission="on_call",
    tag="Notification channels",
    description=(
        "Where alerts are sent: email, Slack, Discord, Teams, Telegram, PagerDuty, "
        "Opsgenie, ntfy or a signed webhook; secrets are write-only."
    ),
    routes=(
        *crud_routes(
            path="/notification-channels",
            permission="on_call",
            singular="notification_channel",
            plural="notification_channels",
            prefix="nch",
            handlers=(list_channels, create_channel, get_channel, update_channel, delete_channel),
            models=(ChannelList, ChannelCreate, ChannelObject, ChannelUpdate),
            noun="notification channel",
            list_query=(("type", "string", "Filter: one channel type."),),
            list_schema={"type": {"enum": list(CHANNEL_TYPES)}},
        ),
        Route(
            name="test_notification_channel",
            method="POST",
            path="/notification-channels/<id>/test",
            handler=send_test,
            permission="on_call.update",
            summary="Send a test message on a notification channel now",
            response_model=AttemptObject,
        ),
    ),
)
"""The notification channels resource (permissions ``on_call.*``)."""
