"""The webhook sender: an actor under the root supervisor (docs/architecture.md,
"Actors"; docs/webhooks.md).

Every ``poll_seconds``, and as soon as an attempt ends while the last claim found some,
it claims due deliveries (``store.deliveries.claim_due``: ``FOR
UPDATE SKIP LOCKED``, so several nodes share the work without sending a delivery twice
at once) and sends each one in a child task:

- at most ``concurrency`` attempts in flight, at most ``per_account_concurrency`` per
  account and ``per_endpoint_concurrency`` per endpoint, claimed round-robin across
  accounts, then across an account's endpoints (``store.deliveries.claim_due``): a slow
  or dead endpoint holds only its own slots, an account's dead endpoints only its
  share, and the rest of the sender stays free for the other accounts;
- one POST per attempt (:mod:`engine.delivery`: keep-alive pool, only to addresses the
  target policy accepts, no redirects), body ``render(event)``, headers
  ``Content-Type: application/json``, ``User-Agent: Uptrio/<version>``,
  ``Uptrio-Event-Id`` and ``Uptrio-Signature`` (:mod:`engine.signing`);
- a 2xx within ``timeout_seconds`` (10 s) is a success; anything else is a failed attempt
  retried after an exponential back-off with jitter (``store.webhooks``), until 3 days
  after the event;
- every attempt is recorded, those that finish within a few milliseconds of each other
  in one transaction (``store.deliveries.record_attempts``).

At least once: a claim moves the delivery's ``next_attempt_at`` ``claim_seconds`` ahead;
if the process dies before it records the attempt, the delivery is claimed again after
that (a receiver deduplicates by ``Uptrio-Event-Id``). Order is not guaranteed.

Error handling: a database error while claiming or recording is logged and the loop goes
on (an unrecorded attempt is retried when its claim lapses). A bug while rendering or
sending one delivery is recorded as a failed attempt (``internal_error``) and logged, so
one bad delivery cannot crash the actor. ``trio.Cancelled`` is never caught: an attempt
cut short by a shutdown is not recorded, and its claim lapses.
"""

from __future__ import annotations

import random
import ssl
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import structlog
import trio

from store import Database, EventRecord, StoreError, deliveries

from .delivery import Answer, DeliveryClient, open_delivery_client
from .policy import TargetPolicy
from .signing import SIGNATURE_HEADER, signature_header

__all__ = ["WebhookSettings", "run_webhook_sender", "user_agent"]

log = structlog.get_logger("uptrio.webhooks")

RECORD_BATCH_SECONDS = 0.005
"""How long the recorder waits for more finished attempts to record with the first."""

Render = Callable[[EventRecord], bytes]
"""The body of a delivery: the event as ``GET /events/:id`` shows it, JSON (UTF-8)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class WebhookSettings:
    """Settings of the webhook sender (``uptrio serve --webhook-...`` flags).

    Attributes:
        poll_seconds: seconds between two looks for due deliveries (default 0.5; one
            cheap indexed query).
        concurrency: attempts in flight at most, all endpoints together (default 32).
        per_account_concurrency: attempts in flight at most for one account, all its
            endpoints together (default 8, a quarter of ``concurrency``: an account
            whose receivers all hang holds 8 slots for a timeout, and the other 24 stay
            free for the other accounts; docs/webhooks.md, Fairness). Never less than
            ``per_endpoint_concurrency`` in effect (:attr:`account_share`).
        per_endpoint_concurrency: attempts in flight at most for one endpoint
            (default 4).
        timeout_seconds: a whole attempt's deadline, seconds (default 10,
            docs/webhooks.md, Success and retries): a 2xx must have arrived by then.
        retry_base_seconds: the first retry's delay, seconds; each further one doubles,
            times a random factor in [0.5, 1.5) (default 60, fractions allowed;
            docs/webhooks.md, Success and retries).
        claim_seconds: how long a claimed delivery is reserved for its sender, seconds
            (default 60); past it, an attempt never recorded (the sender died) is
            retried. Must exceed ``timeout_seconds``.
    """

    poll_seconds: float = 0.5
    concurrency: int = 32
    per_account_concurrency: int = 8
    per_endpoint_concurrency: int = 4
    timeout_seconds: float = 10.0
    retry_base_seconds: float = 60.0
    claim_seconds: float = 60.0

    def __post_init__(self) -> None:
        if self.claim_seconds <= self.timeout_seconds:
            raise ValueError("claim_seconds must exceed timeout_seconds")

    @property
    def account_share(self) -> int:
        """Attempts in flight at most for one account: ``per_account_concurrency``, but
        at least one endpoint's share (an installation that raised the per-endpoint
        limit for its one busy endpoint keeps it)."""
        return max(self.per_account_concurrency, self.per_endpoint_concurrency)


def user_agent() -> str:
    """``Uptrio/<version>``, the version of the installed ``uptrio`` distribution."""
    try:
        return f"Uptrio/{version('uptrio')}"
    except PackageNotFoundError:  # running from a checkout that was never installed
        return "Uptrio/unknown"


async def run_webhook_sender(
    db: Database,
    settings: WebhookSettings,
    *,
    render: Render,
    policy: TargetPolicy,
    clock: Callable[[], float] = time.time,
    ssl_context: ssl.SSLContext | None = None,
    rng: random.Random | None = None,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run the sender until cancelled (module docstring); ``task_status.started()`` once
    its HTTP pool is open.

    Args:
        db: the database (with a deadline: a hung database costs a poll, not the actor).
        render: the body of an event's delivery (the composition root shapes it, so the
            engine does not import the web layer).
        policy: the target policy of monitors, applied at every new connection.
        clock: wall-clock time in epoch seconds: what is due, signature timestamps,
            recorded attempt times (tests move it, for example past a rotation's 24 h).
        ssl_context: verifies https receivers (default: the system's CAs).
        rng: draws the back-off's jitter (tests seed it).
    """
    sender = _Sender(db, settings, render=render, clock=clock, rng=rng or random.Random())
    async with (
        open_delivery_client(
            policy, max_connections=settings.concurrency, ssl_context=ssl_context
        ) as client,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(sender.record_finished)
        task_status.started()
        while True:
            claimed = await sender.claim()
            for delivery in claimed:
                nursery.start_soon(sender.attempt, client, delivery)
            if claimed:  # more may be due as soon as an attempt ends (a backlog)
                with trio.move_on_after(settings.poll_seconds):
                    await sender.slot_freed.wait()
            else:
                await trio.sleep(settings.poll_seconds)


class _Sender:
    """The sender's state: attempts in flight per endpoint and per account. Only the
    actor's tasks touch it."""

    def __init__(
        self,
        db: Database,
        settings: WebhookSettings,
        *,
        render: Render,
        clock: Callable[[], float],
        rng: random.Random,
    ) -> None:
        self.db = db
        self.settings = settings
        self.render = render
        self.clock = clock
        self.rng = rng
        self.user_agent = user_agent()
        self.in_flight: Counter[str] = Counter()  # by endpoint
        self.accounts_in_flight: Counter[str] = Counter()
        self.slot_freed = trio.Event()
        # Finished attempts wait here for the recorder (bounded: a database that hangs
        # holds the attempts back instead of growing memory).
        self.finished, self._to_record = trio.open_memory_channel[deliveries.Attempt](
            settings.concurrency
        )

    @property
    def free(self) -> int:
        """Attempts that may still start."""
        return self.settings.concurrency - self.in_flight.total()

    async def claim(self) -> list[deliveries.ClaimedDelivery]:
        """Claim what is due and counts it in flight; [] when full or on a database
        error (logged)."""
        free = self.free
        if free <= 0:
            return []
        try:
            claimed = await self.db.transaction(
                deliveries.claim_due,
                now=self.clock(),
                limit=free,
                share=deliveries.Share(
                    per_endpoint=self.settings.per_endpoint_concurrency,
                    per_account=self.settings.account_share,
                    endpoints=dict(self.in_flight),
                    accounts=dict(self.accounts_in_flight),
                ),
                claim_seconds=self.settings.claim_seconds,
            )
        except StoreError as exc:
            log.warning("webhook claim failed", error=str(exc))
            return []
        for delivery in claimed:
            self.in_flight[delivery.endpoint_id] += 1
            self.accounts_in_flight[delivery.account_id] += 1
        if claimed:
            self.slot_freed = trio.Event()
        return claimed

    async def attempt(self, client: DeliveryClient, delivery: deliveries.ClaimedDelivery) -> None:
        """Send one delivery and hand its outcome to the recorder (module docstring)."""
        try:
            at = self.clock()
            answer = await self._send(client, delivery, at)
            self._log(delivery, answer)
            await self.finished.send(
                deliveries.Attempt(
                    delivery=delivery,
                    at=at,
                    succeeded=answer.ok,
                    response_status=answer.status,
                    error=answer.error,
                    duration_ms=answer.duration_ms,
                    jitter=self.rng.uniform(0.5, 1.5),
                )
            )
        finally:
            for counts, key in (
                (self.in_flight, delivery.endpoint_id),
                (self.accounts_in_flight, delivery.account_id),
            ):
                counts[key] -= 1
                if counts[key] <= 0:
                    del counts[key]
            self.slot_freed.set()

    async def record_finished(self) -> None:
        """The recorder: take one finished attempt, then whatever else finishes within
        ``RECORD_BATCH_SECONDS`` (at most ``concurrency``), and record them in one
        transaction (``store.deliveries.record_attempts``): at 20 deliveries a second that
        is a few transactions instead of 20. A database error is logged; the attempts'
        claims lapse and they are made again (at least once)."""
        async for first in self._to_record:
            batch = [first]
            with trio.move_on_after(RECORD_BATCH_SECONDS):
                while len(batch) < self.settings.concurrency:
                    batch.append(await self._to_record.receive())
            try:
                await self.db.transaction(
                    deliveries.record_attempts,
                    batch,
                    retry_base_seconds=self.settings.retry_base_seconds,
                )
            except StoreError as exc:
                log.warning("webhook attempts not recorded", error=str(exc), count=len(batch))

    async def _send(
        self, client: DeliveryClient, delivery: deliveries.ClaimedDelivery, at: float
    ) -> Answer:
        """One POST; a bug while building or sending it (not the receiver's doing, which
        :meth:`DeliveryClient.post` answers as data) is logged and answered as
        ``internal_error``, so one bad delivery cannot crash the sender."""
        try:
            body = self.render(delivery.event)
            headers = [
                ("Content-Type", "application/json"),
                ("User-Agent", self.user_agent),
                ("Uptrio-Event-Id", delivery.event.id),
                (SIGNATURE_HEADER, signature_header(delivery.secrets, int(at), body)),
            ]
            return await client.post(
                delivery.url, body, headers, timeout_seconds=self.settings.timeout_seconds
            )
        except Exception as exc:  # trio.Cancelled is a BaseException: it passes
            log.error(
                "webhook attempt failed on a bug",
                delivery=delivery.id,
                event_id=delivery.event.id,
                exc_info=exc,
            )
            return Answer(status=None, error="internal_error", message=repr(exc), duration_ms=0)

    def _log(self, delivery: deliveries.ClaimedDelivery, answer: Answer) -> None:
        """A success at debug level (20 a second is routine), a failure at info."""
        fields: dict[str, Any] = {
            "delivery": delivery.id,
            "endpoint": delivery.endpoint_id,
            "event_id": delivery.event.id,
            "status": answer.status,
            "duration_ms": round(answer.duration_ms, 1),
        }
        if answer.ok:
            log.debug("webhook delivered", **fields)
        else:
            log.info("webhook attempt failed", error=answer.error, reason=answer.message, **fields)
