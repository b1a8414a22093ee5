"""Webhook endpoints (docs/webhooks.md; asyncio side: run them through
:class:`store.Database`): create, read, list, update, rotate the secret, delete.
Deliveries, and the sender's claim and record, are :mod:`store.deliveries`; deliveries
are written by the trigger ``events_fan_out`` of migration 0004, one per subscribed
enabled endpoint, in the transaction that writes the event.

Disabled endpoints receive nothing (as Stripe's): disabling one takes its pending
deliveries off the schedule (``next_attempt_at`` NULL; they stay ``pending``);
re-enabling it schedules them at once, or marks ``failed`` those whose 3 days are over.
Deleting an endpoint deletes its deliveries (``ON DELETE CASCADE``).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping
from typing import Any

from .database import Connection
from .owned import delete_owned, insert_owned, select_owned, update_owned
from .pagination import Page, PageRequest, fetch_page
from .records import WebhookEndpointRecord

__all__ = [
    "MAX_ENDPOINTS",
    "ROTATION_GRACE_SECONDS",
    "UPDATABLE",
    "delete_endpoint",
    "get_endpoint",
    "insert_endpoint",
    "list_endpoints",
    "new_secret",
    "rotate_secret",
    "update_endpoint",
    "valid_secrets",
]

MAX_ENDPOINTS = 16
"""Webhook endpoints an account may have, enabled or not (docs/webhooks.md, At most 16
endpoints per account: as Stripe allows). Each event writes one delivery per subscribed
endpoint in its own transaction, so this bounds what one event costs the engine's writes (16
rows), and the sender's claim looks at every endpoint that has work: a bound per account
keeps both cheap, and one account's dead receivers few. A team that needs more fans out from
a receiver of its own."""

ROTATION_GRACE_SECONDS = 24 * 3600
"""How long a rotated-out secret still signs deliveries, seconds (docs/webhooks.md)."""

_ENDPOINT_COLUMNS = [
    "id",
    "account_id",
    "url",
    "enabled_events",
    "description",
    "status",
    "secret",
    "previous_secret",
    "previous_secret_expires_at",
    "created",
    "updated",
    "metadata",
]
_ENDPOINT_SELECT = ", ".join(f"t.{c}" for c in _ENDPOINT_COLUMNS)
UPDATABLE = frozenset({"url", "enabled_events", "description", "status", "metadata"})
"""Columns :func:`update_endpoint` may change (the PATCH fields of docs/webhooks.md,
Endpoints and deliveries)."""


def new_secret() -> str:
    """A new signing secret: ``whsec_`` and 256 random bits, URL-safe base64 (43
    characters)."""
    return "whsec_" + secrets.token_urlsafe(32)


def valid_secrets(endpoint: WebhookEndpointRecord, now: float) -> list[str]:
    """The secrets that sign a delivery sent at ``now`` (epoch seconds): the current one,
    then the previous one while its 24 hours run (docs/webhooks.md)."""
    found = [endpoint.secret]
    expires_at = endpoint.previous_secret_expires_at
    if endpoint.previous_secret is not None and expires_at is not None and now < expires_at:
        found.append(endpoint.previous_secret)
    return found


async def insert_endpoint(
    connection: Connection, values: Mapping[str, Any]
) -> WebhookEndpointRecord | None:
    """Insert an endpoint (``values``: every column of the record; the previous-secret
    columns may be left out), unless its account already has :data:`MAX_ENDPOINTS`:
    then None. Must run in a transaction: a transaction-scoped advisory lock on the
    account makes the count and the insert one step, so concurrent creates never pass
    the limit."""
    account_id = values["account_id"]
    await connection.execute(
        "SELECT pg_advisory_xact_lock(hashtextextended('webhook_endpoints:' || $1, 0))",
        account_id,
    )
    count = await connection.fetchval(
        "SELECT count(*) FROM webhook_endpoints WHERE account_id = $1", account_id
    )
    if count >= MAX_ENDPOINTS:
        return None
    row = await insert_owned(
        connection,
        table="webhook_endpoints",
        columns=_ENDPOINT_COLUMNS,
        select=_ENDPOINT_SELECT,
        values=values,
    )
    return WebhookEndpointRecord.from_row(row)


async def get_endpoint(
    connection: Connection, account_id: str, endpoint_id: str, *, for_update: bool = False
) -> WebhookEndpointRecord | None:
    """The account's endpoint, or None. ``for_update`` locks it."""
    row = await select_owned(
        connection,
        table="webhook_endpoints",
        select=_ENDPOINT_SELECT,
        account_id=account_id,
        row_id=endpoint_id,
        for_update=for_update,
    )
    return None if row is None else WebhookEndpointRecord.from_row(row)


async def list_endpoints(
    connection: Connection, account_id: str, page: PageRequest
) -> Page[WebhookEndpointRecord]:
    """One page of the account's endpoints (``page.sort`` is ``created``).

    Raises:
        CursorNotFound: the cursor names no endpoint of the account.
    """
    rows, has_more = await fetch_page(
        connection,
        table="webhook_endpoints",
        select=_ENDPOINT_SELECT,
        account_id=account_id,
        filters=[],
        page=page,
    )
    return Page([WebhookEndpointRecord.from_row(r) for r in rows], has_more)


async def update_endpoint(
    connection: Connection,
    account_id: str,
    endpoint_id: str,
    apply: Callable[[WebhookEndpointRecord], dict[str, Any]],
    now: int,
) -> WebhookEndpointRecord | None:
    """Lock the endpoint, compute changes with ``apply(current)`` (a subset of
    :data:`UPDATABLE` holding only values that differ; it may raise to refuse) and write
    them, ``updated`` = ``now`` (epoch seconds) when something changed. A move to
    ``disabled`` takes the pending deliveries off the schedule; a move to ``enabled``
    schedules them at ``now``, or fails those past ``give_up_at`` (module docstring).
    Must run in a transaction. None when the account has no such endpoint."""
    updated = await update_owned(
        connection,
        table="webhook_endpoints",
        get=get_endpoint,
        account_id=account_id,
        row_id=endpoint_id,
        apply=apply,
        updatable=UPDATABLE,
        now=now,
    )
    record = updated.record
    if record is not None and "status" in updated.previous:
        if record.status == "disabled":
            await connection.execute(
                "UPDATE webhook_deliveries SET next_attempt_at = NULL "
                "WHERE endpoint_id = $1 AND status = 'pending'",
                endpoint_id,
            )
        else:
            await connection.execute(
                "UPDATE webhook_deliveries SET "
                "status = CASE WHEN give_up_at < $2 THEN 'failed' ELSE 'pending' END, "
                "next_attempt_at = CASE WHEN give_up_at < $2 THEN NULL ELSE $2 END "
                "WHERE endpoint_id = $1 AND status = 'pending'",
                endpoint_id,
                now,
            )
    return record


async def rotate_secret(
    connection: Connection, account_id: str, endpoint_id: str, now: int
) -> WebhookEndpointRecord | None:
    """Give the endpoint a new secret; the current one becomes ``previous_secret``,
    valid until ``now + ROTATION_GRACE_SECONDS`` (a secret rotated out earlier is dropped
    at once). ``updated`` = ``now``. None when the account has no such endpoint."""
    row = await connection.fetchrow(
        "UPDATE webhook_endpoints AS t SET previous_secret = t.secret, "
        "previous_secret_expires_at = $3, secret = $4, updated = $5 "
        f"WHERE t.id = $1 AND t.account_id = $2 RETURNING {_ENDPOINT_SELECT}",
        endpoint_id,
        account_id,
        now + ROTATION_GRACE_SECONDS,
        new_secret(),
        now,
    )
    return None if row is None else WebhookEndpointRecord.from_row(row)


async def delete_endpoint(
    connection: Connection, account_id: str, endpoint_id: str, now: int, cause: object = None
) -> bool:
    """Delete an endpoint for good with its deliveries. Must run in a transaction. False
    when the account has no such endpoint. (``cause`` is accepted for the shape of the
    routes' delete helper; endpoints write no events.)"""
    return await delete_owned(
        connection, table="webhook_endpoints", account_id=account_id, row_id=endpoint_id, now=now
    )
