"""The notification outbox on the real Postgres (``store.notifications``;
docs/alerts.md): claims (``FOR UPDATE SKIP LOCKED``, a lease past the attempt's
deadline, disabled channels cancelled), attempts with back-off until ``give_up_at``, and
the list of an alert's notifications with their attempts. Times are explicit epoch
seconds; nothing is sent."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import trio

from store import Connection, Database, notifications
from tests.outbox import new_alert, new_channel, new_notification
from tests.store.helpers import new_monitor

T0 = 1_700_000_000


@dataclass(frozen=True, slots=True)
class _Attempt:
    status: str
    response_status: int | None = None
    error: str | None = None
    duration_ms: float = 100.0


OK = _Attempt("succeeded", 200)
FAILED = _Attempt("failed", 500, "http_500")


async def _setup(db: Database, count: int = 1, *, enabled: bool = True) -> tuple[str, list[str]]:
    """A monitor with an alert and ``count`` notifications due at T0; (alert, ids)."""
    monitor = await new_monitor(db, created=T0 - 60, url="https://example.com/")
    channel = await new_channel(db, monitor.account_id, now=T0 - 60, enabled=enabled)
    alert = await new_alert(db, monitor, now=T0)
    made = [
        await new_notification(
            db, account_id=monitor.account_id, alert_id=alert, channel_id=channel, now=T0
        )
        for _ in range(count)
    ]
    return alert, made


async def _claim(db: Database, now: float, limit: int = 10) -> list[notifications.Claimed]:
    return await db.transaction(notifications.claim_due, now, limit, 60.0)


async def _record(
    db: Database, ntf: str, attempt: _Attempt, now: float, jitter: float = 1.0
) -> str | None:
    return await db.transaction(notifications.record_attempt, ntf, attempt, now, 5.0, jitter=jitter)


async def test_a_claim_carries_what_the_message_needs_and_is_leased(db: Database) -> None:
    with trio.fail_after(20):
        _, (ntf,) = await _setup(db)
        assert await _claim(db, T0 - 1) == []  # not due yet
        (claimed,) = await _claim(db, T0)
        assert claimed.notification.id == ntf
        assert claimed.channel_type == "webhook"
        assert claimed.channel_config == {"url": "http://127.0.0.1:9/hook"}
        assert (claimed.alert_status, claimed.severity) == ("triggered", "critical")
        assert claimed.resource_name == "m"
        assert claimed.resource_url == "https://example.com/"
        assert claimed.summary == "m is down: connection refused"
        assert claimed.claimed_until == T0 + 60
        # leased: not claimed again until the lease lapses (a notifier that died)
        assert await _claim(db, T0 + 59) == []
        (again,) = await _claim(db, T0 + 61)
        assert again.notification.id == ntf


async def test_two_concurrent_claims_never_take_the_same_row(db: Database) -> None:
    with trio.fail_after(20):
        _, made = await _setup(db, 3)
        first_claimed = asyncio.Event()
        order: list[str] = []

        async def first(connection: Connection) -> list[notifications.Claimed]:
            claimed = await notifications.claim_due(connection, T0, 2, 60.0)
            first_claimed.set()
            await asyncio.sleep(1.0)  # hold the row locks
            order.append("first")
            return claimed

        async def second(connection: Connection) -> list[notifications.Claimed]:
            await first_claimed.wait()
            claimed = await notifications.claim_due(connection, T0, 10, 60.0)
            order.append("second")
            return claimed

        results: dict[str, list[notifications.Claimed]] = {}

        async def run(name: str, fn: object) -> None:
            results[name] = await db.transaction(fn)  # type: ignore[arg-type]

        async with trio.open_nursery() as nursery:
            nursery.start_soon(run, "first", first)
            nursery.start_soon(run, "second", second)
        ids = {k: {c.notification.id for c in v} for k, v in results.items()}
        assert len(ids["first"]) == 2 and len(ids["second"]) == 1
        assert ids["first"] | ids["second"] == set(made)
        assert order == ["second", "first"]  # skipped the locked rows, never waited


async def test_a_failed_attempt_is_retried_later_with_back_off(db: Database) -> None:
    with trio.fail_after(20):
        _, (ntf,) = await _setup(db)
        await _claim(db, T0)
        assert await _record(db, ntf, FAILED, T0) == "pending"
        # first retry base (5 s) after the attempt ended (0.1 s), times the jitter
        assert await _claim(db, T0 + 5.0) == []
        (claimed,) = await _claim(db, T0 + 5.1)
        assert claimed.notification.attempts == 1
        assert await _record(db, ntf, FAILED, T0 + 5.1, jitter=1.5) == "pending"
        assert await _claim(db, T0 + 5.2 + 14.9) == []  # 5 * 2 * 1.5 = 15 s
        (claimed,) = await _claim(db, T0 + 5.2 + 15.0)
        assert await _record(db, ntf, OK, T0 + 21) == "succeeded"
        (record,) = await db.run(
            notifications.list_for_alert,
            claimed.notification.account_id,
            claimed.notification.alert_id,
        )
        assert (record.status, record.attempts, record.next_attempt_at) == ("succeeded", 3, None)
        assert [a.status for a in record.attempts_list] == ["failed", "failed", "succeeded"]
        assert [a.attempted_at for a in record.attempts_list] == [T0, T0 + 5, T0 + 21]
        assert record.attempts_list[0].response_status == 500
        assert record.attempts_list[0].error == "http_500"


async def test_past_give_up_at_a_failure_is_final(db: Database) -> None:
    with trio.fail_after(20):
        _, (ntf,) = await _setup(db)
        await _claim(db, T0)
        # back-off is capped: the 20th retry still waits at most 5 minutes
        await db.transaction(
            lambda c: c.execute("UPDATE notifications SET attempts = 19 WHERE id = $1", ntf)
        )
        assert await _record(db, ntf, FAILED, T0 + 3000) == "pending"
        (claimed,) = await _claim(db, T0 + 3000.1 + notifications.MAX_RETRY_SECONDS)
        assert await _record(db, ntf, FAILED, T0 + 3400) == "failed"  # retry past T0 + 3600
        assert await _claim(db, T0 + 10_000) == []
        (record,) = await db.run(
            notifications.list_for_alert,
            claimed.notification.account_id,
            claimed.notification.alert_id,
        )
        assert (record.status, record.next_attempt_at, record.attempts) == ("failed", None, 21)


async def test_a_disabled_channels_notifications_are_cancelled_not_sent(db: Database) -> None:
    with trio.fail_after(20):
        alert, (ntf,) = await _setup(db, enabled=False)
        assert await _claim(db, T0) == []
        monitor_account = await db.run(
            lambda c: c.fetchval("SELECT account_id FROM alerts WHERE id = $1", alert)
        )
        (record,) = await db.run(notifications.list_for_alert, monitor_account, alert)
        assert (record.id, record.status, record.next_attempt_at) == (ntf, "cancelled", None)
        assert record.attempts_list == []


async def test_list_for_alert_is_the_accounts_own_oldest_first(db: Database) -> None:
    with trio.fail_after(20):
        alert, made = await _setup(db, 2)
        account = await db.run(
            lambda c: c.fetchval("SELECT account_id FROM alerts WHERE id = $1", alert)
        )
        await _claim(db, T0)
        await _record(db, made[1], OK, T0 + 1)
        listed = await db.run(notifications.list_for_alert, account, alert)
        assert [n.id for n in listed] == made
        assert [len(n.attempts_list) for n in listed] == [0, 1]
        assert await db.run(notifications.list_for_alert, "acct_other", alert) == []
        assert await db.run(notifications.list_for_alert, account, "alt_none") == []
