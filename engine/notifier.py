"""The notifier: an actor under the root supervisor that sends the notification outbox
(docs/alerts.md; docs/architecture.md, "Actors").

Every ``poll_seconds`` (0.5 s), and at once when a claim came back full, it claims due
notifications (``store.notifications.claim_due``: ``FOR UPDATE SKIP LOCKED``, so every
node runs one and none sends a notification twice at once) and sends each in a child
task:

- at most ``max_in_flight`` sends at once (a ``trio.CapacityLimiter``); each send is
  bounded by ``timeout_seconds`` (10 s), so a provider that hangs holds one slot for at
  most that long;
- the :class:`~engine.channels.Message` is rendered at send time from the alert, the
  monitor or heartbeat and the channel (what the claim returns), its ``ack_url``
  ``<public url>/alerts/ack/<token>``, and sent by ``engine.channels.send``;
- every attempt is recorded (``store.notifications.record_attempt``): succeeded, or
  retried with exponential back-off and jitter (first after
  ``--notification-retry-base-seconds``) for at most an hour, then failed.

At least once: a claim leases the notification for ``claim_seconds``; if the process dies
before recording the attempt, the notification is claimed again once the lease lapses.

Error handling: a database error while claiming is logged and the loop goes on at the
next poll; recording is retried until the claim's lease lapses (a database outage then
costs a duplicate message, never a lost one). A bug while rendering or sending one
notification is recorded as a failed attempt (``internal_error``) and logged.
``trio.Cancelled`` is never caught: an attempt cut short by a shutdown is not recorded,
and its lease lapses.
"""

from __future__ import annotations

import random
import ssl
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import structlog
import trio

from store import Database, StoreError, notifications

from . import channels
from .channels import Attempt, ChannelSettings, Message
from .delivery import open_delivery_client
from .policy import TargetPolicy

__all__ = ["NotifierSettings", "Send", "message_of", "run_notifier"]

log = structlog.get_logger("uptrio.notifier")

Send = Callable[..., Awaitable[Attempt]]
"""``engine.channels.send``'s shape: ``(type, config, message, settings, *, channel_id)``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class NotifierSettings:
    """Settings of the notifier (``uptrio serve`` flags; docs/alerts.md).

    Attributes:
        smtp_url: the SMTP relay of email channels (``--smtp-url``: ``smtp://`` with
            STARTTLS or ``smtps://``, user and password in the URL), or None: email
            channels are refused.
        smtp_from: the sender address of emails (``--smtp-from``).
        provider_bases: a provider's API base instead of its public one, by channel type
            (``--provider-base NAME=URL``, repeatable).
        retry_base_seconds: the first retry's delay, seconds; each further one doubles
            (capped at 5 minutes), times a random factor in [0.5, 1.5)
            (``--notification-retry-base-seconds``, default 5).
        poll_seconds: seconds between two looks for due notifications (default 0.5).
        max_in_flight: sends in flight at most (default 16).
        timeout_seconds: one send's deadline, seconds (default 10).
        claim_seconds: how long a claimed notification is reserved for its notifier,
            seconds (default 60; must exceed ``timeout_seconds``).
        public_url: the base of acknowledge links (``--public-url``, else the first
            address the API listens on; the composition root fills it in).
    """

    smtp_url: str | None = None
    smtp_from: str | None = None
    provider_bases: Mapping[str, str] = field(default_factory=dict)
    retry_base_seconds: float = 5.0
    poll_seconds: float = 0.5
    max_in_flight: int = 16
    timeout_seconds: float = 10.0
    claim_seconds: float = 60.0
    public_url: str = ""

    def __post_init__(self) -> None:
        if self.claim_seconds <= self.timeout_seconds:
            raise ValueError("claim_seconds must exceed timeout_seconds")

    @property
    def smtp_configured(self) -> bool:
        """Whether email channels can be sent (an SMTP relay is configured)."""
        return self.smtp_url is not None

    def channel_settings(self, policy: TargetPolicy | None) -> ChannelSettings:
        """What ``engine.channels.send`` is given, with the target policy of monitors."""
        return ChannelSettings(
            smtp_url=self.smtp_url,
            smtp_from=self.smtp_from,
            provider_bases=dict(self.provider_bases),
            policy=policy,
            timeout_seconds=self.timeout_seconds,
        )


def message_of(claimed: notifications.Claimed, public_url: str) -> Message:
    """The message a claimed notification sends (docs/alerts.md): its ``ack_url`` is
    ``<public_url>/alerts/ack/<token>`` when the notification carries a token and the
    alert is not resolved (a resolved alert's link is dead), else None. A shift reminder
    (docs/on-call.md, "Shift reminders") is about its schedule: severity ``info``, status
    ``scheduled``, no link. Pure."""
    n = claimed.notification
    shift = claimed.shift
    if shift is not None:
        return Message(
            kind=n.kind,
            alert_id=None,
            resource_id=shift.schedule_id,
            resource_name=shift.schedule_name,
            resource_url=None,
            status="scheduled",
            severity="info",
            summary=channels.shift_summary(shift),
            error=None,
            triggered_at=n.created,
            ack_url=None,
            step=None,
            shift=shift,
        )
    ack_url = None
    if n.ack_token is not None and claimed.alert_status != "resolved":
        ack_url = f"{public_url.rstrip('/')}/alerts/ack/{n.ack_token}"
    return Message(
        kind=n.kind,
        alert_id=n.alert_id,
        resource_id=claimed.resource_id,
        resource_name=claimed.resource_name,
        resource_url=claimed.resource_url,
        status=claimed.alert_status,
        severity=claimed.severity,
        summary=claimed.summary,
        error=claimed.error,
        triggered_at=claimed.triggered_at,
        ack_url=ack_url,
        step=n.step,
    )


async def run_notifier(
    db: Database,
    settings: NotifierSettings,
    *,
    policy: TargetPolicy | None = None,
    send: Send = channels.send,
    clock: Callable[[], float] = time.time,
    rng: random.Random | None = None,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run the notifier until cancelled (module docstring); ``task_status.started()`` at
    once.

    Args:
        db: the database, with a deadline (a hung database costs a poll, not the actor).
        settings: the notifier's settings.
        policy: the target policy of monitors: where sends may connect.
        send: sends one message (``engine.channels.send``; tests give their own).
        clock: wall-clock time, epoch seconds: what is due, recorded attempt times.
        rng: draws the back-off's jitter (tests seed it).
    """
    # The system's CAs are loaded once, and every HTTP send goes through one pool (its
    # connections to a provider kept alive): per send, these cost more CPU than the rest
    # of the send.
    ssl_context = ssl.create_default_context()
    async with (
        open_delivery_client(
            policy if policy is not None else TargetPolicy(),
            max_connections=settings.max_in_flight,
            ssl_context=ssl_context,
        ) as client,
        trio.open_nursery() as nursery,
    ):
        notifier = _Notifier(
            db,
            settings,
            replace(settings.channel_settings(policy), ssl_context=ssl_context, client=client),
            send=send,
            clock=clock,
            rng=rng or random.Random(),
        )
        limiter = trio.CapacityLimiter(settings.max_in_flight)
        task_status.started()
        while True:
            async with limiter:  # wait for a free slot
                pass
            free = int(limiter.available_tokens)
            claimed = await notifier.claim(free)
            for one in claimed:
                slot = object()  # the slot's borrower: one per send
                limiter.acquire_on_behalf_of_nowait(slot)
                nursery.start_soon(notifier.attempt, limiter, slot, one)
            # not a full batch: nothing more is due now (a claim cancels the messages of
            # disabled channels apart from what it takes, so they never make it short)
            if len(claimed) < free:
                await trio.sleep(settings.poll_seconds)


class _Notifier:
    """What the notifier's tasks share (read only)."""

    def __init__(
        self,
        db: Database,
        settings: NotifierSettings,
        channel_settings: ChannelSettings,
        *,
        send: Send,
        clock: Callable[[], float],
        rng: random.Random,
    ) -> None:
        self.db = db
        self.settings = settings
        self.channel_settings = channel_settings
        self.send = send
        self.clock = clock
        self.rng = rng

    async def claim(self, limit: int) -> list[notifications.Claimed]:
        """Up to ``limit`` due notifications; [] on a database error (logged)."""
        try:
            return await self.db.transaction(
                notifications.claim_due, self.clock(), limit, self.settings.claim_seconds
            )
        except StoreError as exc:
            log.warning("notification claim failed", error=str(exc))
            return []

    async def attempt(
        self, limiter: trio.CapacityLimiter, slot: object, claimed: notifications.Claimed
    ) -> None:
        """Send one notification and record the attempt, then free its slot."""
        try:
            at = self.clock()
            attempt = await self._send(claimed)
            self._log(claimed, attempt)
            await self._record(claimed, attempt, at)
        finally:
            limiter.release_on_behalf_of(slot)

    async def _send(self, claimed: notifications.Claimed) -> Attempt:
        """One send under its deadline; a send past it is a failed ``timeout`` attempt,
        a bug an ``internal_error`` one (logged)."""
        started = trio.current_time()
        n = claimed.notification
        try:
            with trio.move_on_after(self.settings.timeout_seconds):
                return await self.send(
                    claimed.channel_type,
                    claimed.channel_config,
                    message_of(claimed, self.settings.public_url),
                    self.channel_settings,
                    channel_id=n.channel_id,
                )
            error = "timeout"
        except Exception as exc:  # trio.Cancelled is a BaseException: it passes
            log.error("notification attempt failed on a bug", notification=n.id, exc_info=exc)
            error = "internal_error"
        duration_ms = (trio.current_time() - started) * 1000.0
        return Attempt(status="failed", response_status=None, error=error, duration_ms=duration_ms)

    async def _record(self, claimed: notifications.Claimed, attempt: Attempt, at: float) -> None:
        """Record the attempt, retrying a database error until the claim's lease lapses
        (then the notification is sent again: at least once)."""
        jitter = self.rng.uniform(0.5, 1.5)
        while True:
            try:
                await self.db.transaction(
                    notifications.record_attempt,
                    claimed.notification.id,
                    attempt,
                    at,
                    self.settings.retry_base_seconds,
                    jitter=jitter,
                )
                return
            except StoreError as exc:
                if self.clock() + self.settings.poll_seconds >= claimed.claimed_until:
                    log.warning(
                        "notification attempt not recorded",
                        notification=claimed.notification.id,
                        error=str(exc),
                    )
                    return
            await trio.sleep(self.settings.poll_seconds)

    def _log(self, claimed: notifications.Claimed, attempt: Attempt) -> None:
        """A success at debug level, a failure at info."""
        fields: dict[str, Any] = {
            "notification": claimed.notification.id,
            "channel": claimed.notification.channel_id,
            "type": claimed.channel_type,
            "status": attempt.response_status,
            "duration_ms": round(attempt.duration_ms, 1),
        }
        if attempt.status == "succeeded":
            log.debug("notification sent", **fields)
        else:
            log.info("notification attempt failed", error=attempt.error, **fields)
