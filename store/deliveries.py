"""Webhook deliveries (docs/webhooks.md; asyncio side: run them through
:class:`store.Database`): listing them, and the sender's two statements (``engine.webhooks``).

- :func:`claim_due` picks due deliveries (``FOR UPDATE SKIP LOCKED``, so several
  senders, in one process or on several nodes, never claim the same delivery at once)
  and moves their ``next_attempt_at`` past the attempt's deadline: a sender that dies
  mid-attempt leaves the delivery to be claimed again once that time passes (at least
  once).
- :func:`record_attempts` settles finished attempts, several in one statement:
  ``succeeded``, or a retry after an exponential back-off with jitter counted from the
  attempt's end (:func:`retry_delay_seconds`), or ``failed`` once the next attempt would fall after
  ``give_up_at`` (3 days after the event).

Deliveries are never created here: the trigger ``events_fan_out`` of migration 0004
writes them with their events. Endpoints are :mod:`store.webhooks`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .database import Connection
from .pagination import Page, PageRequest, fetch_page
from .records import EventRecord, WebhookDeliveryRecord, WebhookEndpointRecord, column_names
from .webhooks import get_endpoint, valid_secrets

__all__ = [
    "Attempt",
    "ClaimedDelivery",
    "Share",
    "claim_due",
    "list_deliveries",
    "record_attempts",
    "retry_delay_seconds",
    "retry_outcome",
]

_ENDPOINT_COLUMNS = column_names(WebhookEndpointRecord)
_EVENT_COLUMNS = column_names(EventRecord)
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
        account_id: the account the delivery belongs to (its fair share,
            docs/webhooks.md, Fairness).
        endpoint_id: the ``we_`` id.
        url: the endpoint's url as it was at the claim.
        secrets: the secrets valid at the claim (current first; :func:`valid_secrets`).
        event: the event to deliver.
        attempts: attempts made before this one.
        give_up_at: epoch seconds after which no attempt is scheduled.
    """

    id: str
    account_id: str
    endpoint_id: str
    url: str
    secrets: list[str]
    event: EventRecord
    attempts: int
    give_up_at: int


_CLAIM = f"""
WITH RECURSIVE due_endpoints (endpoint_id) AS (
    (SELECT d.endpoint_id FROM webhook_deliveries d
     WHERE d.status = 'pending' AND d.next_attempt_at <= $1
       AND EXISTS (SELECT 1 FROM webhook_deliveries n
                   WHERE n.status = 'pending' AND n.next_attempt_at <= $1)
     ORDER BY d.endpoint_id LIMIT 1)
    UNION ALL
    SELECT (SELECT d.endpoint_id FROM webhook_deliveries d
            WHERE d.status = 'pending' AND d.next_attempt_at <= $1
              AND d.endpoint_id > e.endpoint_id
            ORDER BY d.endpoint_id LIMIT 1)
    FROM due_endpoints e WHERE e.endpoint_id IS NOT NULL
), endpoints AS (
    SELECT w.id, w.account_id,
           $2 - coalesce(be.n, 0) AS endpoint_room,
           $3 - coalesce(ba.n, 0) AS account_room
    FROM due_endpoints e
    JOIN webhook_endpoints w ON w.id = e.endpoint_id AND w.status = 'enabled'
    LEFT JOIN unnest($4::text[], $5::int[]) AS be (endpoint_id, n) ON be.endpoint_id = w.id
    LEFT JOIN unnest($6::text[], $7::int[]) AS ba (account_id, n) ON ba.account_id = w.account_id
), candidates AS (
    SELECT c.id, c.next_attempt_at, c.seq, w.account_id, w.account_room,
           row_number() OVER (PARTITION BY w.id ORDER BY c.next_attempt_at, c.seq)
               AS endpoint_rank
    FROM endpoints w
    CROSS JOIN LATERAL (
        SELECT d.id, d.next_attempt_at, d.seq FROM webhook_deliveries d
        WHERE d.endpoint_id = w.id AND d.status = 'pending' AND d.next_attempt_at <= $1
        ORDER BY d.next_attempt_at
        LIMIT greatest(least(w.endpoint_room, w.account_room), 0)
    ) c
), ranked AS (
    SELECT id, next_attempt_at, seq, account_room,
           row_number() OVER (PARTITION BY account_id
                              ORDER BY endpoint_rank, next_attempt_at, seq) AS account_rank
    FROM candidates
), picked AS (
    SELECT id FROM ranked WHERE account_rank <= account_room
    ORDER BY account_rank, next_attempt_at, seq
    LIMIT $8
), locked AS (
    SELECT d.id FROM webhook_deliveries d
    WHERE d.id IN (SELECT id FROM picked)
      AND d.status = 'pending' AND d.next_attempt_at <= $1
    FOR UPDATE OF d SKIP LOCKED
)
UPDATE webhook_deliveries AS d SET next_attempt_at = $9
FROM locked, webhook_endpoints w, events e
WHERE d.id = locked.id AND w.id = d.endpoint_id AND e.id = d.event_id
  AND w.status = 'enabled'
RETURNING d.id AS delivery_id, d.attempts, d.give_up_at, d.next_attempt_at AS claimed_until,
          {", ".join(f"w.{c} AS w_{c}" for c in _ENDPOINT_COLUMNS)},
          {", ".join(f"e.{c} AS e_{c}" for c in _EVENT_COLUMNS)}
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class Share:
    """How much of a sender one endpoint and one account may hold (docs/webhooks.md,
    Fairness), and what they hold now.

    Attributes:
        per_endpoint: attempts in flight at most for one endpoint.
        per_account: attempts in flight at most for one account, all its endpoints
            together (later: for one owner of channels).
        endpoints: attempts this sender has in flight, by endpoint id.
        accounts: attempts this sender has in flight, by account id.
    """

    per_endpoint: int
    per_account: int
    endpoints: Mapping[str, int]
    accounts: Mapping[str, int]


async def claim_due(
    connection: Connection,
    *,
    now: float,
    limit: int,
    share: Share,
    claim_seconds: float,
) -> list[ClaimedDelivery]:
    """Claim up to ``limit`` due deliveries (``next_attempt_at <= now``, epoch seconds)
    of enabled endpoints, fairly across accounts and, within an account, across its
    endpoints, and move their ``next_attempt_at`` to ``now + claim_seconds``. Run it in
    a transaction of its own.

    Fairness (``share``): an endpoint gets at most ``per_endpoint`` attempts in flight
    and an account at most ``per_account`` (counting what this sender already has in
    flight), so a receiver that hangs holds only its endpoint's slots and its account's
    share, never another account's turn. The claims go round-robin: each account's
    first, then each account's second..., an account's own turns going round-robin over
    its endpoints (each one's oldest first), ties by age.

    Cost: every endpoint with a due delivery is looked at, each by an index probe
    (``webhook_deliveries_due_by_endpoint``, migration 0016: a skip scan from one due
    endpoint to the next, then each one's oldest due deliveries), so the query grows
    with the endpoints that have work (16 at most per account), not with the backlog:
    an account's thousands of due deliveries never hide another's one. With nothing due
    it is one probe of ``webhook_deliveries_due``.

    Concurrency: the rows are locked ``FOR UPDATE SKIP LOCKED`` and re-checked once
    locked, so two senders never claim the same delivery; a claim that is never settled
    (a sender that died) becomes due again at ``now + claim_seconds``. The shares are
    each sender's own (several nodes: each holds at most its share).

    Returns:
        The claimed deliveries (in no particular order: their attempts all start at
        once).
    """
    rows = await connection.fetch(
        _CLAIM,
        now,
        share.per_endpoint,
        share.per_account,
        list(share.endpoints),
        list(share.endpoints.values()),
        list(share.accounts),
        list(share.accounts.values()),
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
                account_id=endpoint.account_id,
                endpoint_id=endpoint.id,
                url=endpoint.url,
                secrets=valid_secrets(endpoint, now),
                event=event,
                attempts=row["attempts"],
                give_up_at=row["give_up_at"],
            )
        )
    return claimed


def retry_delay_seconds(
    failed_attempts: int, base_seconds: float, jitter: float, *, cap_seconds: float | None = None
) -> float:
    """Seconds from the end of a failed attempt to the next one (docs/webhooks.md:
    exponential back-off with jitter, first retry after ``--webhook-retry-base-seconds``,
    doubling):
    ``base_seconds * 2 ** (failed_attempts - 1) * jitter``, ``jitter`` a random factor in
    [0.5, 1.5) drawn by the caller; the exponential is first capped at ``cap_seconds``
    when given (notifications: docs/alerts.md). With the default 60 s base the retries
    come after about 1, 2, 4, 8, ... minutes; the 12th would fall past 3 days. Pure."""
    delay = base_seconds * 2.0 ** min(max(failed_attempts - 1, 0), 40)
    if cap_seconds is not None:
        delay = min(delay, cap_seconds)
    return delay * jitter


def retry_outcome(
    *,
    succeeded: bool,
    failed_attempts: int,
    ended: float,
    give_up_at: float,
    base_seconds: float,
    jitter: float,
    cap_seconds: float | None = None,
) -> tuple[str, float | None]:
    """An outbox row's status and ``next_attempt_at`` (epoch seconds, or None) after an
    attempt that ended at ``ended`` (epoch seconds), ``failed_attempts`` counting it if it
    failed: ``succeeded``; else a retry :func:`retry_delay_seconds` after the attempt
    *ended* (so a 10 s timeout does not eat into a back-off), or ``failed`` once that
    would fall after ``give_up_at``. Shared by webhook deliveries (docs/webhooks.md,
    Success and retries) and notifications (docs/alerts.md). Pure."""
    if succeeded:
        return "succeeded", None
    delay = retry_delay_seconds(failed_attempts, base_seconds, jitter, cap_seconds=cap_seconds)
    next_attempt_at = ended + delay
    if next_attempt_at > give_up_at:
        return "failed", None
    return "pending", next_attempt_at


@dataclass(frozen=True, slots=True, kw_only=True)
class Attempt:
    """One finished attempt of a claimed delivery, to record.

    Attributes:
        delivery: what was claimed (its ``attempts`` before this one, ``give_up_at``).
        at: when it started, epoch seconds.
        succeeded: a 2xx arrived in time.
        response_status: the HTTP status, or None without an answer.
        error: the error code, or None on success.
        duration_ms: how long it took, milliseconds.
        jitter: the back-off's random factor in [0.5, 1.5), drawn by the sender.
    """

    delivery: ClaimedDelivery
    at: float
    succeeded: bool
    response_status: int | None
    error: str | None
    duration_ms: float
    jitter: float

    @property
    def ended(self) -> float:
        """When the attempt ended, epoch seconds: ``at`` plus its duration."""
        return self.at + self.duration_ms / 1000.0

    def outcome(self, retry_base_seconds: float) -> tuple[str, float | None]:
        """The delivery's status and ``next_attempt_at`` (epoch seconds, or None) after
        this attempt: ``succeeded``; else a retry :func:`retry_delay_seconds` after the
        attempt *ended* (so a 10 s timeout does not eat into a back-off,
        docs/webhooks.md, Success and retries), or ``failed`` once that would fall after
        ``give_up_at`` (docs/webhooks.md). Pure."""
        return retry_outcome(
            succeeded=self.succeeded,
            failed_attempts=self.delivery.attempts + 1,
            ended=self.ended,
            give_up_at=self.delivery.give_up_at,
            base_seconds=retry_base_seconds,
            jitter=self.jitter,
        )


async def record_attempts(
    connection: Connection, attempts: Sequence[Attempt], *, retry_base_seconds: float
) -> int:
    """Record finished attempts in one statement (the sender batches them: one
    transaction a few milliseconds instead of one a delivery): ``attempts`` + 1, the
    ``last_*`` fields, and the status and next attempt of :meth:`Attempt.outcome`; a
    retry of an endpoint disabled meanwhile stays pending but unscheduled (NULL).

    A delivery that is gone (endpoint or event deleted) or already settled (another
    sender's attempt after a lapsed claim succeeded first) is left alone. Returns the
    number of deliveries written.
    """
    outcomes = [a.outcome(retry_base_seconds) for a in attempts]
    status = await connection.execute(
        "UPDATE webhook_deliveries AS d SET attempts = d.attempts + 1, status = u.status, "
        "next_attempt_at = CASE WHEN u.status = 'pending' AND w.status <> 'enabled' "
        "THEN NULL ELSE u.next_attempt_at END, last_attempt_at = u.at, "
        "last_response_status = u.response_status, last_error = u.error, "
        "last_duration_ms = u.duration_ms "
        "FROM unnest($1::text[], $2::text[], $3::float8[], $4::bigint[], $5::int[], "
        "$6::text[], $7::float8[]) AS u(id, status, next_attempt_at, at, response_status, "
        "error, duration_ms), webhook_endpoints AS w "
        "WHERE d.id = u.id AND d.status = 'pending' AND w.id = d.endpoint_id",
        [a.delivery.id for a in attempts],
        [o[0] for o in outcomes],
        [o[1] for o in outcomes],
        [int(a.at) for a in attempts],
        [a.response_status for a in attempts],
        [a.error for a in attempts],
        [a.duration_ms for a in attempts],
    )
    return int(status.rsplit(" ", 1)[-1])
