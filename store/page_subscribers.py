"""Email subscribers of a status page and the outbox of their mails (docs/status-pages.md,
"Subscribers"; asyncio side: run these through :class:`store.Database`).

- :func:`subscribe` records a subscription request and writes its confirmation mail in the
  same transaction; :func:`confirm` and :func:`unsubscribe` follow the mail's links.
- ``store.page_notices`` writes the later mails (incidents) into the same outbox.
- :func:`claim_due` and :func:`record_attempt` are the page mailer's
  (``engine.page_mailer``): claimed ``FOR UPDATE SKIP LOCKED``, leased, settled with the
  back-off of the other outboxes (``store.deliveries.retry_outcome``) for at most
  :data:`GIVE_UP_SECONDS`.

Tokens: a confirm token is 128 random bits (``secrets.token_urlsafe(16)``), kept as its
SHA-256 digest; the unsubscribe key is 128 random bits kept as an opaque key (every later
mail carries it). Nothing here says whether an address was subscribed already: the caller
answers every accepted request the same way.

Limits (docs/status-pages.md, "Subscribers"): at most :data:`CONFIRMS_PER_ADDRESS_PER_DAY`
confirmation mails per address over all pages in 24 hours (past it, the request is
accepted and nothing is sent, as Statuspage does: the answer reveals nothing and the
address is not flooded), and at most :data:`SUBSCRIPTIONS_PER_PAGE_PER_HOUR` subscription
requests per page per hour (past it, :func:`subscribe` answers ``limited``: a 429).
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from typing import Any, Literal

from .database import Connection
from .deliveries import retry_outcome
from .ids import new_id

__all__ = [
    "CONFIRMS_PER_ADDRESS_PER_DAY",
    "GIVE_UP_SECONDS",
    "SUBSCRIPTIONS_PER_PAGE_PER_HOUR",
    "ClaimedMail",
    "claim_due",
    "confirm",
    "record_attempt",
    "subscribe",
    "subscription_of_key",
    "unsubscribe",
]

CONFIRMS_PER_ADDRESS_PER_DAY = 5
"""Confirmation mails one address receives at most in 24 hours, over all pages."""
SUBSCRIPTIONS_PER_PAGE_PER_HOUR = 100
"""Subscription requests one page accepts at most in an hour."""
GIVE_UP_SECONDS = 3600.0
"""How long a subscriber mail is retried, seconds from its creation."""
MAX_RETRY_SECONDS = 300.0
"""The longest back-off between two attempts of a mail, seconds, before the jitter."""

Outcome = Literal["missing", "limited", "accepted"]


def digest(token: str) -> str:
    """The SHA-256 hex digest a token is stored as."""
    return hashlib.sha256(token.encode()).hexdigest()


async def subscribe(connection: Connection, slug: str, email: str, now: int) -> Outcome:
    """Ask to subscribe ``email`` (normalised by the caller) to the page of ``slug`` at
    ``now`` (epoch seconds). Run it in a transaction.

    Returns ``missing`` (no such page), ``limited`` (the page's hourly limit is spent:
    nothing recorded) or ``accepted``: a confirmation mail is written unless the address is
    already confirmed or its daily limit is spent (module docstring), a pending subscriber
    gets a new confirm token (the older link dies).
    """
    page = await connection.fetchrow("SELECT id FROM status_pages WHERE slug = $1", slug)
    if page is None:
        return "missing"
    page_id = page["id"]
    # one request at a time per page and per address: the counts below stay true
    await connection.execute(
        "SELECT pg_advisory_xact_lock(hashtext('page_subscribe:' || $1))", page_id
    )
    recent = await connection.fetchval(
        "SELECT count(*) FROM page_mails WHERE page_id = $1 AND kind = 'confirm' AND created > $2",
        page_id,
        now - 3600,
    )
    if recent >= SUBSCRIPTIONS_PER_PAGE_PER_HOUR:
        return "limited"
    await connection.execute("SELECT pg_advisory_xact_lock(hashtext('page_mail:' || $1))", email)
    row = await connection.fetchrow(
        "SELECT id, status FROM page_subscribers WHERE page_id = $1 AND email = $2 FOR UPDATE",
        page_id,
        email,
    )
    if row is not None and row["status"] == "confirmed":
        return "accepted"
    sent = await connection.fetchval(
        "SELECT count(*) FROM page_mails WHERE email = $1 AND kind = 'confirm' AND created > $2",
        email,
        now - 86400,
    )
    if sent >= CONFIRMS_PER_ADDRESS_PER_DAY:
        return "accepted"
    token = secrets.token_urlsafe(16)
    if row is None:
        subscriber_id = new_id("sub")
        await connection.execute(
            "INSERT INTO page_subscribers (id, page_id, email, confirm_digest, unsubscribe_key, "
            "created) VALUES ($1, $2, $3, $4, $5, $6)",
            subscriber_id,
            page_id,
            email,
            digest(token),
            secrets.token_urlsafe(16),
            now,
        )
    else:
        subscriber_id = row["id"]
        await connection.execute(
            "UPDATE page_subscribers SET confirm_digest = $2 WHERE id = $1",
            subscriber_id,
            digest(token),
        )
    await _insert_mail(
        connection,
        subscriber_id=subscriber_id,
        page_id=page_id,
        email=email,
        kind="confirm",
        subject="Confirm your subscription",
        body="",
        link_path=f"/status/{slug}/confirm/{token}",
        now=now,
    )
    return "accepted"


async def _insert_mail(connection: Connection, *, now: int, **mail: Any) -> None:
    """Write one pending mail, due at once."""
    await connection.execute(
        "INSERT INTO page_mails (subscriber_id, page_id, email, kind, subject, body, link_path, "
        "next_attempt_at, give_up_at, created) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
        mail["subscriber_id"],
        mail["page_id"],
        mail["email"],
        mail["kind"],
        mail["subject"],
        mail["body"],
        mail["link_path"],
        float(now),
        now + GIVE_UP_SECONDS,
        now,
    )


@dataclass(frozen=True, slots=True)
class Subscription:
    """A subscriber as its links see it: ``email``, ``status`` (``pending`` or
    ``confirmed``), the page's ``page_name``."""

    email: str
    status: str
    page_name: str


_OF = (
    "SELECT s.email, s.status, p.name AS page_name FROM page_subscribers s "
    "JOIN status_pages p ON p.id = s.page_id WHERE p.slug = $1 AND "
)


async def subscription_of_key(
    connection: Connection, slug: str, *, confirm_token: str | None = None, key: str | None = None
) -> Subscription | None:
    """The subscriber of the page of ``slug`` whom a confirm token or an unsubscribe key
    names, or None. Reads only."""
    if confirm_token is not None:
        row = await connection.fetchrow(_OF + "s.confirm_digest = $2", slug, digest(confirm_token))
    else:
        row = await connection.fetchrow(_OF + "s.unsubscribe_key = $2", slug, key)
    return None if row is None else Subscription(row["email"], row["status"], row["page_name"])


async def confirm(connection: Connection, slug: str, token: str, now: int) -> Subscription | None:
    """Confirm the subscriber whose confirm ``token`` this is (at ``now``, epoch seconds;
    a confirmed one stays as it is). None for an unknown token."""
    row = await connection.fetchrow(
        "UPDATE page_subscribers s SET status = 'confirmed', "
        "confirmed_at = coalesce(s.confirmed_at, $3) FROM status_pages p "
        "WHERE p.id = s.page_id AND p.slug = $1 AND s.confirm_digest = $2 "
        "RETURNING s.email, s.status, p.name AS page_name",
        slug,
        digest(token),
        now,
    )
    return None if row is None else Subscription(row["email"], row["status"], row["page_name"])


async def unsubscribe(connection: Connection, slug: str, key: str) -> bool:
    """Delete the subscriber of the page of ``slug`` whose unsubscribe ``key`` this is and
    cancel its pending mails. False when no subscriber has it (already unsubscribed)."""
    subscriber_id = await connection.fetchval(
        "SELECT s.id FROM page_subscribers s JOIN status_pages p ON p.id = s.page_id "
        "WHERE p.slug = $1 AND s.unsubscribe_key = $2 FOR UPDATE OF s",
        slug,
        key,
    )
    if subscriber_id is None:
        return False
    await connection.execute(
        "UPDATE page_mails SET status = 'cancelled', next_attempt_at = NULL "
        "WHERE subscriber_id = $1 AND status = 'pending'",
        subscriber_id,
    )
    await connection.execute("DELETE FROM page_subscribers WHERE id = $1", subscriber_id)
    return True


@dataclass(frozen=True, slots=True, kw_only=True)
class ClaimedMail:
    """A claimed subscriber mail: ``seq``, ``email``, ``kind`` (``confirm`` or
    ``notice``), ``subject``, ``body``, ``link_path``, ``page_name``, ``claimed_until``
    (epoch seconds)."""

    seq: int
    email: str
    kind: str
    subject: str
    body: str
    link_path: str
    page_name: str
    claimed_until: float


async def claim_due(
    connection: Connection, now: float, limit: int, lease_seconds: float
) -> list[ClaimedMail]:
    """Claim up to ``limit`` pending mails due at ``now`` (epoch seconds), oldest due
    first, and lease them until ``now + lease_seconds`` (``FOR UPDATE SKIP LOCKED``: two
    mailers never claim one mail at once; a mailer that dies leaves it due again when the
    lease lapses). Run it in a transaction."""
    rows = await connection.fetch(
        "WITH locked AS (SELECT seq FROM page_mails WHERE status = 'pending' "
        "AND next_attempt_at <= $1 ORDER BY next_attempt_at, seq LIMIT $2 "
        "FOR UPDATE SKIP LOCKED) "
        "UPDATE page_mails m SET next_attempt_at = $3 FROM locked, status_pages p "
        "WHERE m.seq = locked.seq AND p.id = m.page_id "
        "RETURNING m.seq, m.email, m.kind, m.subject, m.body, m.link_path, p.name AS page_name",
        now,
        limit,
        now + lease_seconds,
    )
    return [
        ClaimedMail(
            seq=r["seq"],
            email=r["email"],
            kind=r["kind"],
            subject=r["subject"],
            body=r["body"],
            link_path=r["link_path"] or "",
            page_name=r["page_name"],
            claimed_until=now + lease_seconds,
        )
        for r in rows
    ]


async def record_attempt(
    connection: Connection,
    seq: int,
    *,
    error: str | None,
    now: float,
    ended: float,
    retry_base_seconds: float,
    jitter: float = 1.0,
) -> str | None:
    """Settle one attempt of mail ``seq`` that started at ``now`` and ended at ``ended``
    (epoch seconds): ``succeeded`` without ``error``, else retried after the back-off
    (``store.deliveries.retry_outcome``, capped at :data:`MAX_RETRY_SECONDS`) or
    ``failed`` past ``give_up_at``. A settled confirmation mail forgets its link. Returns
    the status afterwards, or None for a mail gone (its page deleted)."""
    row = await connection.fetchrow(
        "SELECT attempts, status, give_up_at FROM page_mails WHERE seq = $1 FOR UPDATE", seq
    )
    if row is None:
        return None
    status, next_attempt_at = str(row["status"]), None
    if status == "pending":
        status, next_attempt_at = retry_outcome(
            succeeded=error is None,
            failed_attempts=row["attempts"] + 1,
            ended=ended,
            give_up_at=row["give_up_at"],
            base_seconds=retry_base_seconds,
            jitter=jitter,
            cap_seconds=MAX_RETRY_SECONDS,
        )
    await connection.execute(
        "UPDATE page_mails SET attempts = attempts + 1, last_error = $2, status = $3, "
        "next_attempt_at = $4, link_path = CASE WHEN kind = 'confirm' AND $3 <> 'pending' "
        "THEN NULL ELSE link_path END WHERE seq = $1",
        seq,
        error,
        status,
        next_attempt_at,
    )
    return status
