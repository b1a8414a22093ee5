"""The notifier (``engine.run_notifier``; docs/alerts.md) against a real receiver on
127.0.0.1: claims due notifications, sends each under its deadline, records every
attempt, retries a failure with back-off. The alert and notification rows are written
directly in SQL (``tests.outbox``); the channel is sent by a test sender that POSTs the
message as JSON to the channel's ``url`` (the channels package has its own tests), so
what is checked here is the notifier's own work. Small retry bases and deadlines keep
the tests fast; each has a ``trio.fail_after``.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import trio

from engine import NotifierSettings, TargetPolicy, run_notifier
from engine.channels import Attempt, ChannelSettings, Message
from engine.delivery import DeliveryClient, open_delivery_client
from store import Database, notifications
from tests.outbox import new_alert, new_channel, new_notification
from tests.receiver import HANG, Receiver
from tests.store.helpers import new_monitor

FAST = NotifierSettings(
    retry_base_seconds=0.2,
    poll_seconds=0.05,
    timeout_seconds=0.5,
    claim_seconds=5.0,
    public_url="https://uptrio.example.com/",
)


async def _post_message(
    client: DeliveryClient,
    type: str,
    config: Mapping[str, Any],
    message: Message,
    settings: ChannelSettings,
    *,
    channel_id: str,
) -> Attempt:
    """A test channel: the message as JSON, POSTed to ``config["url"]`` with a long
    deadline of its own (only the notifier's bounds a hang)."""
    body = json.dumps(dataclasses.asdict(message)).encode()
    answer = await client.post(
        config["url"], body, [("Content-Type", "application/json")], timeout_seconds=60
    )
    return Attempt(
        status="succeeded" if answer.ok else "failed",
        response_status=answer.status,
        error=answer.error,
        duration_ms=answer.duration_ms,
    )


@asynccontextmanager
async def notifier(db: Database, settings: NotifierSettings = FAST) -> AsyncIterator[None]:
    """Run a notifier sending through :func:`_post_message` while the block runs."""
    async with (
        open_delivery_client(TargetPolicy(), max_connections=4) as client,
        trio.open_nursery() as nursery,
    ):
        await nursery.start(
            partial(run_notifier, db, settings, send=partial(_post_message, client))
        )
        yield
        nursery.cancel_scope.cancel()


async def _notification(db: Database, url: str) -> tuple[str, str, str]:
    """A monitor's alert with one trigger notification due now to a channel posting to
    ``url``: (account, alert, notification)."""
    now = int(time.time())
    monitor = await new_monitor(db, created=now - 60, url="https://example.com/health")
    channel = await new_channel(db, monitor.account_id, now=now, config={"url": url})
    alert = await new_alert(db, monitor, now=now)
    ntf = await new_notification(
        db,
        account_id=monitor.account_id,
        alert_id=alert,
        channel_id=channel,
        now=now,
        ack_token="tok123",
    )
    return monitor.account_id, alert, ntf


async def _settled(db: Database, account: str, alert: str) -> notifications.NotificationRecord:
    """The alert's one notification, once it is no longer pending."""
    while True:
        (record,) = await db.run(notifications.list_for_alert, account, alert)
        if record.status != "pending":
            return record
        await trio.sleep(0.05)


async def test_a_provider_answering_500_then_200_gets_two_attempts(db: Database) -> None:
    with trio.fail_after(20):
        receiver = Receiver(script=[500])
        async with trio.open_nursery() as nursery:
            await nursery.start(receiver.serve)
            account, alert, _ = await _notification(db, receiver.url)
            async with notifier(db):
                record = await _settled(db, account, alert)
            nursery.cancel_scope.cancel()
        assert record.status == "succeeded"
        assert [(a.status, a.response_status) for a in record.attempts_list] == [
            ("failed", 500),
            ("succeeded", 200),
        ]
        assert len(receiver.received) == 2
        sent = json.loads(receiver.received[1].body)
        assert sent["ack_url"] == "https://uptrio.example.com/alerts/ack/tok123"
        assert (sent["kind"], sent["alert_id"], sent["status"]) == ("trigger", alert, "triggered")
        assert sent["resource_url"] == "https://example.com/health"
        assert sent["summary"] == "m is down: connection refused"


async def test_a_hanging_provider_costs_at_most_the_deadline(db: Database) -> None:
    with trio.fail_after(20):
        receiver = Receiver(status=HANG)
        async with trio.open_nursery() as nursery:
            await nursery.start(receiver.serve)
            account, alert, _ = await _notification(db, receiver.url)
            settings = dataclasses.replace(FAST, retry_base_seconds=60.0)
            async with notifier(db, settings):
                await receiver.wait_for(1)
                started = trio.current_time()
                while True:
                    (record,) = await db.run(notifications.list_for_alert, account, alert)
                    if record.attempts_list:
                        break
                    await trio.sleep(0.02)
                waited = trio.current_time() - started
            nursery.cancel_scope.cancel()
        (attempt,) = record.attempts_list
        assert (attempt.status, attempt.error) == ("failed", "timeout")
        assert 0.5 <= attempt.duration_ms / 1000 < 1.0
        assert waited < FAST.timeout_seconds + 0.5
        assert record.status == "pending"  # retried later, after its back-off


async def test_messages_cancelled_ahead_do_not_hold_back_one_that_can_be_sent(
    db: Database,
) -> None:
    # 12 messages of a disabled channel are due first (they are cancelled, not sent), then
    # one of an enabled channel; the notifier takes 4 at a time and polls every 1.5 s. A
    # claim that cancels what it locked looks short, and a short claim sleeps a poll: the
    # sendable message would wait 3 polls (4.5 s) behind them (docs/alerts.md, The outbox)
    with trio.fail_after(30):
        receiver = Receiver()
        async with trio.open_nursery() as nursery:
            await nursery.start(receiver.serve)
            now = int(time.time())
            monitor = await new_monitor(db, created=now - 60, url="https://example.com/health")
            account = monitor.account_id
            config = {"url": receiver.url}
            off = await new_channel(db, account, now=now, config=config, enabled=False)
            on = await new_channel(db, account, now=now, config=config)
            alert = await new_alert(db, monitor, now=now)
            for _ in range(12):
                await new_notification(
                    db, account_id=account, alert_id=alert, channel_id=off, now=now - 10
                )
            await new_notification(db, account_id=account, alert_id=alert, channel_id=on, now=now)
            settings = dataclasses.replace(FAST, poll_seconds=1.5, max_in_flight=4)
            async with notifier(db, settings):
                began = trio.current_time()
                await receiver.wait_for(1)
                took = trio.current_time() - began
            nursery.cancel_scope.cancel()
        assert took < settings.poll_seconds, f"the sendable message waited {took:.2f} s"
        assert len(receiver.received) == 1
        listed = await db.run(notifications.list_for_alert, account, alert)
        assert sorted(n.status for n in listed if n.channel_id == off) == ["cancelled"] * 12
