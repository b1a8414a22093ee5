"""Webhook endpoints and their deliveries (extensions part 2; asyncio side: run them
through :class:`store.Database`).

Deliveries are never created here: the trigger ``events_fan_out`` of migration 0004
writes one pending delivery per subscribed enabled endpoint in the transaction that
writes the event. This module reads and writes endpoints, lists deliveries, and serves
the sender (``engine.webhooks``):

- :func:`claim_due` picks due deliveries (``FOR UPDATE SKIP LOCKED``, so several
  senders, in one process or on several nodes, never claim the same delivery at once)
  and moves their ``next_attempt_at`` past the attempt's deadline: a sender that dies
  mid-attempt leaves the delivery to be claimed again once that time passes (at least
  once).
- :func:`record_attempt` settles an attempt: ``succeeded``, or a retry after an
  exponential back-off with jitter (:func:`retry_delay_seconds`), or ``failed`` once the
  next attempt would fall after ``give_up_at`` (3 days after the event).

Disabled endpoints receive nothing (as Stripe's): disabling one takes its pending
deliveries off the schedule (``next_attempt_at`` NULL; they stay ``pending``);
re-enabling it schedules them at once, or marks ``failed`` those whose 3 days are over.
Deleting an endpoint deletes its deliveries (``ON DELETE CASCADE``).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .database import Connection
from .owned import delete_owned, insert_owned, update_owned
from .pagination import Page, PageRequest, fetch_page
from .records import EventRecord, WebhookDeliveryRecord, WebhookEndpointRecord

__all__ = [
    "ROTATION_GRACE_SECONDS",
    "UPDATABLE",
    "ClaimedDelivery",
    "claim_due",
    "delete_endpoint",
    "get_endpoint",
    "insert_endpoint",
    "list_deliveries",
    "list_endpoints",
    "new_secret",
    "record_attempt",
    "retry_delay_seconds",
    "rotate_secret",
    "update_endpoint",
    "valid_secrets",
]

ROTATION_GRACE_SECONDS = 24 * 3600
"""How long a rotated-out secret still signs deliveries, seconds (extensions part 2)."""

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
_DELIVERY_SELECT = ", ".join(
    f"t.{c}"
    for c in (
        "id",
        "account_id",
        "endpoint_id",
        "event_id",
        "status",
        "attempts",
        "last_attempt_at",
        "last_response_status",
        "last_error",
        "last_duration_ms",
        "next_attempt_at",
        "created",
        "give_up_at",
    )
)
_EVENT_COLUMNS = (
    "id",
    "account_id",
    "type",
    "resource_id",
    "created",
    "object",
    "previous",
    "request_id",
    "idempotency_key",
)

UPDATABLE = frozenset({"url", "enabled_events", "description", "status", "metadata"})
"""Columns :func:`update_endpoint` may change (the PATCH fields of part 2)."""


def new_secret() -> str:
    """A new signing secret: ``whsec_`` and 256 random bits, URL-safe base64 (43
    characters)."""
    return "whsec_" + secrets.token_urlsafe(32)


def valid_secrets(endpoint: WebhookEndpointRecord, now: float) -> list[str]:
    """The secrets that sign a delivery sent at ``now`` (epoch seconds): the current one,
    then the previous one while its 24 hours run (extensions part 2)."""
    found = [endpoint.secret]
    expires_at = endpoint.previous_secret_expires_at
    if endpoint.previous_secret is not None and expires_at is not None and now < expires_at:
        found.append(endpoint.previous_secret)
    return found


async def insert_endpoint(
    connection: Connection, values: Mapping[str, Any]
) -> WebhookEndpointRecord:
    """Insert an endpoint (``values``: every column of the record; the previous-secret
    columns may be left out)."""
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
    lock = " FOR UPDATE" if for_update else ""
    row = await connection.fetchrow(
        f"SELECT {_ENDPOINT_SELECT} FROM webhook_endpoints t "
        f"WHERE t.id = $1 AND t.account_id = $2{lock}",
        endpoint_id,
        account_id,
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


async def list_deliveries(
    connection: Connection,
    account_id: str,
    endpoint_id: str,
    page: PageRequest,
    *,
    status: str | None = None,
) -> Page[WebhookDeliveryRecord] | None:
    """One page of the endpoint's deliveries, newest first (``created``, then insertion
    order), filtered by exact ``status``. None when the account has no such endpoint.

    Raises:
        CursorNotFound: the cursor names no delivery of the account.
    """
    if await get_endpoint(connection, account_id, endpoint_id) is None:
        return None
    filters: list[tuple[str, object]] = [("t.endpoint_id = {}", endpoint_id)]
    if status is not None:
        filters.append(("t.status = {}", status))
    rows, has_more = await fetch_page(
        connection,
        table="webhook_deliveries",
        select=_DELIVERY_SELECT,
        account_id=account_id,
        filters=filters,
        page=page,
    )
    return Page([WebhookDeliveryRecord.from_row(r) for r in rows], has_more)


# ---- the sender's side -----------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ClaimedDelivery:
    """What a sender needs to make one attempt.

    Attributes:
        id: the ``whd_`` id.
        endpoint_id: the ``we_`` id.
        url: the endpoint's url as it was at the claim.
        secrets: the secrets valid at the claim (current first; :func:`valid_secrets`).
        event: the event to deliver.
        attempts: attempts made before this one.
        give_up_at: epoch seconds after which no attempt is scheduled.
    """

    id: str
    endpoint_id: str
    url: str
    secrets: list[str]
    event: EventRecord
    attempts: int
    give_up_at: int


_CLAIM = f"""
WITH candidates AS (
    SELECT d.id, d.endpoint_id, d.next_attempt_at, d.seq
    FROM webhook_deliveries d
    WHERE d.status = 'pending' AND d.next_attempt_at <= $1
      AND d.endpoint_id <> ALL($2::text[])
      AND EXISTS (SELECT 1 FROM webhook_endpoints w
                  WHERE w.id = d.endpoint_id AND w.status = 'enabled')
    ORDER BY d.next_attempt_at
    LIMIT $3
), ranked AS (
    SELECT c.id, c.next_attempt_at, c.seq,
           row_number() OVER (PARTITION BY c.endpoint_id
                              ORDER BY c.next_attempt_at, c.seq) AS rank,
           coalesce(room.n, $4) AS room
    FROM candidates c
    LEFT JOIN unnest($5::text[], $6::int[]) AS room (endpoint_id, n)
           ON room.endpoint_id = c.endpoint_id
), picked AS (
    SELECT id FROM ranked WHERE rank <= room
    ORDER BY rank, next_attempt_at, seq
    LIMIT $7
), locked AS (
    SELECT d.id FROM webhook_deliveries d
    WHERE d.id IN (SELECT id FROM picked)
      AND d.status = 'pending' AND d.next_attempt_at <= $1
    FOR UPDATE OF d SKIP LOCKED
)
UPDATE webhook_deliveries AS d SET next_attempt_at = $8
FROM locked, webhook_endpoints w, events e
WHERE d.id = locked.id AND w.id = d.endpoint_id AND e.id = d.event_id
  AND w.status = 'enabled'
RETURNING d.id AS delivery_id, d.attempts, d.give_up_at, d.next_attempt_at AS claimed_until,
          {", ".join(f"w.{c} AS w_{c}" for c in _ENDPOINT_COLUMNS)},
          {", ".join(f"e.{c} AS e_{c}" for c in _EVENT_COLUMNS)}
"""


async def claim_due(
    connection: Connection,
    *,
    now: float,
    limit: int,
    per_endpoint_limit: int,
    busy_endpoints: Mapping[str, int],
    claim_seconds: float,
    scan: int = 1000,
) -> list[ClaimedDelivery]:
    """Claim up to ``limit`` due deliveries (``next_attempt_at <= now``, epoch seconds)
    of enabled endpoints, fairly across endpoints, and move their ``next_attempt_at`` to
    ``now + claim_seconds``. Run it in a transaction of its own.

    Fairness: ``busy_endpoints`` maps endpoint ids to the attempts this sender already
    has in flight for them; an endpoint gets at most ``per_endpoint_limit`` minus that
    (endpoints at their limit are skipped), and the claims go round-robin over the
    endpoints (each one's oldest first, then each one's second, ...), so one endpoint's
    backlog never takes another's turn. The round-robin looks at the ``scan`` oldest due
    deliveries of the endpoints not at their limit (index ``webhook_deliveries_due``),
    which keeps the query cheap whatever the backlog.

    Concurrency: the rows are locked ``FOR UPDATE SKIP LOCKED`` and re-checked once
    locked, so two senders never claim the same delivery; a claim that is never settled
    (a sender that died) becomes due again at ``now + claim_seconds``.

    Returns:
        The claimed deliveries, in claim order.
    """
    full = [e for e, n in busy_endpoints.items() if n >= per_endpoint_limit]
    partial = {
        e: per_endpoint_limit - n for e, n in busy_endpoints.items() if 0 < n < per_endpoint_limit
    }
    rows = await connection.fetch(
        _CLAIM,
        now,
        full,
        max(scan, limit),
        per_endpoint_limit,
        list(partial),
        list(partial.values()),
        limit,
        now + claim_seconds,
    )
    claimed = []
    for row in rows:
        endpoint = WebhookEndpointRecord.from_row({c: row[f"w_{c}"] for c in _ENDPOINT_COLUMNS})
        event = EventRecord.from_row({c: row[f"e_{c}"] for c in _EVENT_COLUMNS})
        claimed.append(
            ClaimedDelivery(
                id=row["delivery_id"],
                endpoint_id=endpoint.id,
                url=endpoint.url,
                secrets=valid_secrets(endpoint, now),
                event=event,
                attempts=row["attempts"],
                give_up_at=row["give_up_at"],
            )
        )
    return claimed


def retry_delay_seconds(failed_attempts: int, base_seconds: float, jitter: float) -> float:
    """Seconds from a failed attempt to the next one (extensions part 2: exponential
    back-off with jitter, first retry after ``--webhook-retry-base-seconds``, doubling):
    ``base_seconds * 2 ** (failed_attempts - 1) * jitter``, ``jitter`` a random factor in
    [0.5, 1.5) drawn by the caller. With the default 60 s base the retries come after
    about 1, 2, 4, 8, ... minutes; the 12th would fall past 3 days. Pure."""
    return base_seconds * 2.0 ** min(max(failed_attempts - 1, 0), 40) * jitter


async def record_attempt(
    connection: Connection,
    delivery_id: str,
    *,
    at: float,
    succeeded: bool,
    response_status: int | None,
    error: str | None,
    duration_ms: float,
    retry_base_seconds: float,
    jitter: float,
) -> WebhookDeliveryRecord | None:
    """Record one attempt made at ``at`` (epoch seconds) that took ``duration_ms``
    milliseconds: ``attempts`` + 1 and the ``last_*`` fields, then

    - ``succeeded``: status ``succeeded``, ``next_attempt_at`` NULL;
    - else, the next attempt at ``at + retry_delay_seconds(attempts, retry_base_seconds,
      jitter)``; ``failed`` with ``next_attempt_at`` NULL when that is after
      ``give_up_at``; pending but unscheduled (NULL) when the endpoint was disabled
      meanwhile.

    Must run in a transaction. Returns the delivery afterwards, or None when it is gone
    (endpoint or event deleted) or already settled (another sender's attempt after a
    lapsed claim succeeded first): nothing is written then.
    """
    row = await connection.fetchrow(
        "SELECT d.attempts, d.give_up_at, w.status AS endpoint_status "
        "FROM webhook_deliveries d JOIN webhook_endpoints w ON w.id = d.endpoint_id "
        "WHERE d.id = $1 AND d.status = 'pending' FOR UPDATE OF d",
        delivery_id,
    )
    if row is None:
        return None
    attempts = row["attempts"] + 1
    status, next_attempt_at = "succeeded", None
    if not succeeded:
        status = "pending"
        next_attempt_at = at + retry_delay_seconds(attempts, retry_base_seconds, jitter)
        if next_attempt_at > row["give_up_at"]:
            status, next_attempt_at = "failed", None
        elif row["endpoint_status"] != "enabled":
            next_attempt_at = None
    updated = await connection.fetchrow(
        "UPDATE webhook_deliveries AS t SET attempts = $2, status = $3, next_attempt_at = $4, "
        "last_attempt_at = $5, last_response_status = $6, last_error = $7, "
        f"last_duration_ms = $8 WHERE t.id = $1 RETURNING {_DELIVERY_SELECT}",
        delivery_id,
        attempts,
        status,
        next_attempt_at,
        int(at),
        response_status,
        error,
        duration_ms,
    )
    return WebhookDeliveryRecord.from_row(updated)
