"""The webhook sender (engine.run_webhook_sender; docs/webhooks.md) against real receivers.

Rules: loopback only (receivers on 127.0.0.1, port 0; the one non-loopback url, a
metadata address, is refused before any connection), the real Postgres of the conftest,
events made through the API (``POST /incidents`` writes ``incident.created``), small
retry bases and poll intervals so the suite stays fast, and a ``trio.fail_after`` in
every test.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import trio

from engine import TargetPolicy, WebhookSettings, run_webhook_sender
from store import Database
from tests.api import Api
from tests.receiver import HANG, Receiver, expected_signature, signatures
from tests.web.helpers import create_incident, expect, sql
from web.api.events import render_event
from web.api.webhooks import WebhookDeliveryObject

FAST = WebhookSettings(
    poll_seconds=0.05,
    timeout_seconds=2.0,
    retry_base_seconds=0.2,
    claim_seconds=5.0,
    concurrency=8,
    per_endpoint_concurrency=4,
)


@asynccontextmanager
async def sender(
    db: Database,
    settings: WebhookSettings = FAST,
    *,
    policy: TargetPolicy | None = None,
    clock: Callable[[], float] = time.time,
    render: Callable[[Any], bytes] = render_event,
) -> AsyncIterator[None]:
    """Run a webhook sender while the block runs."""
    async with trio.open_nursery() as nursery:
        await nursery.start(
            partial(
                run_webhook_sender,
                db,
                settings,
                render=render,
                policy=policy or TargetPolicy(),
                clock=clock,
            )
        )
        yield
        nursery.cancel_scope.cancel()


async def receiving(nursery: trio.Nursery, **kw: Any) -> Receiver:
    receiver = Receiver(**kw)
    await nursery.start(receiver.serve)
    return receiver


async def endpoint(api: Api, url: str, events: list[str] | None = None) -> dict[str, Any]:
    body = {"url": url, "enabled_events": events or ["*"]}
    created: dict[str, Any] = expect(await api.post("/webhook-endpoints", json=body), 201)
    return created


async def rotated_endpoint(
    api: Api, nursery: trio.Nursery
) -> tuple[Receiver, dict[str, Any], dict[str, Any]]:
    """A receiver, and an endpoint on it whose secret was rotated: (receiver, the endpoint
    as created, as rotated); the old secret still signs."""
    receiver = await receiving(nursery)
    hook = await endpoint(api, receiver.url)
    rotated = expect(await api.post(f"/webhook-endpoints/{hook['id']}/rotate-secret"))
    return receiver, hook, rotated


async def deliveries(api: Api, endpoint_id: str) -> list[dict[str, Any]]:
    page = expect(await api.get(f"/webhook-endpoints/{endpoint_id}/deliveries"))
    for item in page["data"]:
        WebhookDeliveryObject.model_validate(item)
    return page["data"]  # type: ignore[no-any-return]


async def settled(api: Api, endpoint_id: str, count: int) -> list[dict[str, Any]]:
    """Wait until the endpoint has ``count`` deliveries, none pending."""
    while True:
        found = await deliveries(api, endpoint_id)
        if len(found) == count and all(d["status"] != "pending" for d in found):
            return found
        await trio.sleep(0.05)


async def attempted(api: Api, endpoint_id: str) -> dict[str, Any]:
    """Wait until the endpoint's newest delivery has an attempt recorded; that delivery."""
    while not (newest := (await deliveries(api, endpoint_id))[0])["attempts"]:
        await trio.sleep(0.05)
    return newest


async def test_a_delivery_is_the_signed_event(
    api: Api, db: Database, nursery: trio.Nursery
) -> None:
    with trio.fail_after(15):
        receiver = await receiving(nursery)
        hook = await endpoint(api, receiver.url)
        async with sender(db):
            incident = await create_incident(api, title="db down")
            (got,) = await receiver.wait_for(1)
            (delivery,) = await settled(api, hook["id"], 1)
        event_id = got.headers["uptrio-event-id"]
        event = expect(await api.get(f"/events/{event_id}"))
        assert event["type"] == "incident.created"
        assert event["data"]["object"]["id"] == incident["id"]
        assert json.loads(got.body) == event  # the body is the event as GET shows it
        assert got.headers["content-type"] == "application/json"
        assert got.headers["user-agent"].startswith("Uptrio/")
        timestamp, v1 = signatures(got.headers["uptrio-signature"])
        assert v1 == [expected_signature(hook["secret"], timestamp, got.body)]
        assert abs(timestamp - time.time()) < 10
        assert delivery["status"] == "succeeded" and delivery["attempts"] == 1
        assert delivery["event"] == event_id and delivery["endpoint"] == hook["id"]
        assert delivery["next_attempt_at"] is None
        last = delivery["last_attempt"]
        assert last["response_status"] == 200 and last["error"] is None
        assert 0 < last["duration_ms"] < 2000 and abs(last["at"] - time.time()) < 10


async def test_during_a_rotation_both_secrets_sign_then_only_the_new_one(
    api: Api, db: Database, nursery: trio.Nursery
) -> None:
    with trio.fail_after(15):
        receiver, hook, rotated = await rotated_endpoint(api, nursery)
        old, new = hook["secret"], rotated["secret"]
        assert new != old and new.startswith("whsec_")
        async with sender(db):
            await create_incident(api)
            (first,) = await receiver.wait_for(1)
            # recorded before this sender stops: a claim left open would lapse at once
            # under the next sender's clock, a day ahead, and be sent again
            await settled(api, hook["id"], 1)
        timestamp, v1 = signatures(first.headers["uptrio-signature"])
        assert v1 == [
            expected_signature(new, timestamp, first.body),
            expected_signature(old, timestamp, first.body),
        ]
        # 24 h and a second later (a clock of the sender's, not a wait): the new one only
        async with sender(db, clock=lambda: time.time() + 86_401):
            await create_incident(api)
            _, second = await receiver.wait_for(2)
        timestamp, v1 = signatures(second.headers["uptrio-signature"])
        assert v1 == [expected_signature(new, timestamp, second.body)]
        assert timestamp > time.time() + 86_000


async def test_failed_attempts_are_retried_with_growing_delays(
    api: Api, db: Database, nursery: trio.Nursery
) -> None:
    with trio.fail_after(15):
        receiver = await receiving(nursery, script=[500, 503])
        hook = await endpoint(api, receiver.url)
        async with sender(db):
            await create_incident(api)
            await receiver.wait_for(1)
            await trio.sleep(0.05)
            (pending,) = await deliveries(api, hook["id"])
            assert pending["status"] == "pending" and pending["attempts"] == 1
            assert pending["last_attempt"]["response_status"] == 500
            assert pending["last_attempt"]["error"] == "unexpected_status"
            assert pending["next_attempt_at"] is not None
            (done,) = await settled(api, hook["id"], 1)
        first, second, third = receiver.received
        assert done["status"] == "succeeded" and done["attempts"] == 3
        # base 0.2 s, doubling, times a factor in [0.5, 1.5)
        assert 0.1 <= second.at - first.at < 0.3 + 0.3
        assert 0.2 <= third.at - second.at < 0.6 + 0.3
        assert {r.headers["uptrio-event-id"] for r in receiver.received} == {done["event"]}


async def test_a_receiver_that_hangs_times_out_and_is_retried(
    api: Api, db: Database, nursery: trio.Nursery
) -> None:
    with trio.fail_after(15):
        receiver = await receiving(nursery, script=[HANG])
        hook = await endpoint(api, receiver.url)
        settings = WebhookSettings(
            poll_seconds=0.05, timeout_seconds=0.5, retry_base_seconds=1.0, claim_seconds=5
        )
        async with sender(db, settings):
            await create_incident(api)
            await receiver.wait_for(1)
            timed_out = await attempted(api, hook["id"])
            assert timed_out["last_attempt"]["error"] == "timeout"
            assert timed_out["last_attempt"]["response_status"] is None
            assert 450 <= timed_out["last_attempt"]["duration_ms"] < 1500
            (done,) = await settled(api, hook["id"], 1)
        assert done["status"] == "succeeded" and done["attempts"] == 2


async def test_a_delivery_fails_for_good_past_give_up_at(
    api: Api, db: Database, nursery: trio.Nursery
) -> None:
    with trio.fail_after(15):
        receiver = await receiving(nursery, status=500)
        hook = await endpoint(api, receiver.url)
        await create_incident(api)
        # 3 days after the event in production; here 1 s after now
        await sql(db, "UPDATE webhook_deliveries SET give_up_at = $1", int(time.time()) + 1)
        async with sender(db):
            (failed,) = await settled(api, hook["id"], 1)
        assert failed["status"] == "failed" and failed["next_attempt_at"] is None
        assert failed["attempts"] == len(receiver.received) >= 1
        assert failed["last_attempt"]["response_status"] == 500


async def test_a_dead_endpoint_does_not_hold_back_the_others(
    api: Api, db: Database, nursery: trio.Nursery
) -> None:
    with trio.fail_after(20):
        dead = await receiving(nursery, status=HANG)
        alive = await receiving(nursery)
        await endpoint(api, dead.url)
        refused = await receiving(nursery)
        await endpoint(api, refused.url.replace(str(refused.port), "9"))  # discard: refused
        healthy = await endpoint(api, alive.url)
        settings = WebhookSettings(
            poll_seconds=0.05, timeout_seconds=8, retry_base_seconds=0.2, claim_seconds=20,
            concurrency=12, per_endpoint_concurrency=4,
        )  # fmt: skip
        for i in range(10):
            await create_incident(api, title=f"outage {i}")
        async with sender(db, settings):
            began = trio.current_time()
            await alive.wait_for(10)
            took = trio.current_time() - began
            assert len(await settled(api, healthy["id"], 10)) == 10
            # the dead endpoint holds its 4 slots, hanging, and nothing more
            assert len(dead.received) == 4
        assert took < 3, f"the healthy endpoint waited {took:.2f} s"


async def test_one_accounts_dead_receivers_do_not_delay_another_account(
    api: Api, api_for: Callable[..., Awaitable[Api]], db: Database, nursery: trio.Nursery
) -> None:
    # account acme: 12 endpoints at a receiver that accepts and never answers, 36
    # deliveries; account other: one healthy endpoint, whose event comes once acme's
    # attempts hang
    with trio.fail_after(20):
        dead = await receiving(nursery, status=HANG)
        alive = await receiving(nursery)
        for n in range(12):
            await endpoint(api, f"{dead.url}/{n}")
        for i in range(3):
            await create_incident(api, title=f"outage {i}")
        other = await api_for(account="other")
        healthy = await endpoint(other, alive.url)
        # the default shares (32 in flight, 8 an account, 4 an endpoint)
        settings = WebhookSettings(
            poll_seconds=0.05, timeout_seconds=6, retry_base_seconds=0.2, claim_seconds=20
        )
        async with sender(db, settings):
            await dead.wait_for(settings.per_account_concurrency)
            await trio.sleep(0.3)  # time to claim more, were acme allowed more
            began = trio.current_time()
            await create_incident(other)
            await alive.wait_for(1)
            took = trio.current_time() - began
            (done,) = await settled(other, healthy["id"], 1)
            # acme holds its share of the sender, hanging, and no more
            hanging = len(dead.received)
        assert took < 2, f"the other account's delivery waited {took:.2f} s"
        assert done["status"] == "succeeded"
        assert hanging == settings.per_account_concurrency < settings.concurrency
        # an account may always fill one endpoint's share, whatever its own
        assert WebhookSettings(per_endpoint_concurrency=16).account_share == 16


async def test_a_disabled_endpoint_receives_nothing_until_enabled_again(
    api: Api, db: Database, nursery: trio.Nursery
) -> None:
    with trio.fail_after(20):
        receiver = await receiving(nursery, script=[500])
        hook = await endpoint(api, receiver.url)
        path = f"/webhook-endpoints/{hook['id']}"
        # The retry comes 1 to 3 s after the first attempt: later than the PATCH below
        # even on a loaded machine.
        async with sender(db, WebhookSettings(poll_seconds=0.05, retry_base_seconds=2.0)):
            await create_incident(api)
            await attempted(api, hook["id"])  # the first attempt failed; a retry is scheduled
            expect(await api.patch(path, json={"status": "disabled"}))
            await create_incident(api)  # not delivered: no delivery is even created
            await trio.sleep(3.1)  # past the retry's time
            assert len(receiver.received) == 1
            (waiting,) = await deliveries(api, hook["id"])
            assert waiting["status"] == "pending" and waiting["next_attempt_at"] is None
            expect(await api.patch(path, json={"status": "enabled"}))
            (done,) = await settled(api, hook["id"], 1)
        assert done["status"] == "succeeded" and done["attempts"] == 2


@pytest.mark.parametrize("how", ["metadata address", "private address under the policy"])
async def test_a_refused_target_fails_with_target_denied_without_a_connection(
    api: Api, db: Database, nursery: trio.Nursery, how: str
) -> None:
    with trio.fail_after(15):
        receiver = await receiving(nursery, status=500)
        hook = await endpoint(api, receiver.url)
        policy = TargetPolicy()
        if how == "metadata address":  # refused at create: arranged in the database
            await sql(
                db, "UPDATE webhook_endpoints SET url = 'http://169.254.169.254/latest/meta-data'"
            )
        else:  # accepted when saved, refused when sent (as a rebound name would be)
            policy = TargetPolicy(deny_private=True)
        await create_incident(api)
        async with sender(db, policy=policy):
            denied = await attempted(api, hook["id"])
        assert denied["last_attempt"]["error"] == "target_denied"
        assert denied["last_attempt"]["response_status"] is None
        assert receiver.connections == 0


async def test_two_senders_share_the_work_without_sending_twice(
    api: Api, db: Database, nursery: trio.Nursery
) -> None:
    with trio.fail_after(20):
        receiver = await receiving(nursery)
        hooks = [await endpoint(api, f"{receiver.url}/{n}") for n in range(3)]
        for i in range(10):
            await create_incident(api, title=f"i{i}")
        async with sender(db), sender(db):
            await receiver.wait_for(30)
            for hook in hooks:
                await settled(api, hook["id"], 10)
            await trio.sleep(0.3)
        seen = {(r.headers["uptrio-event-id"], r.path) for r in receiver.received}
        assert len(receiver.received) == len(seen) == 30


def readme_verifier() -> dict[str, Any]:
    """The namespace of the README's receiver snippet (the Python block of "Webhooks"),
    executed as a receiver would paste it."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme.split("\n## Webhooks\n", 1)[1].split("\n## ", 1)[0]
    snippet = section.split("```python\n", 1)[1].split("```", 1)[0]
    namespace: dict[str, Any] = {}
    exec(compile(snippet, "README.md", "exec"), namespace)
    return namespace


async def test_the_readme_snippet_verifies_a_real_delivery_and_refuses_a_replay(
    api: Api, db: Database, nursery: trio.Nursery
) -> None:
    with trio.fail_after(15):
        receiver, hook, rotated = await rotated_endpoint(api, nursery)
        async with sender(db):
            await create_incident(api)
            (got,) = await receiver.wait_for(1)
        snippet = readme_verifier()
        verify = snippet["verify_uptrio_signature"]
        header = got.headers["uptrio-signature"]
        assert verify(got.body, header, rotated["secret"])  # either v1 value may match
        assert verify(got.body, header, hook["secret"])
        assert not verify(got.body + b" ", header, rotated["secret"])
        assert not verify(got.body, header, "whsec_someone-else")
        # the same request replayed 5 minutes and a second later is refused
        sent = signatures(header)[0]
        snippet["time"] = SimpleNamespace(time=lambda: sent + 301)
        assert not verify(got.body, header, rotated["secret"])
        snippet["time"] = SimpleNamespace(time=lambda: sent + 299)
        assert verify(got.body, header, rotated["secret"])


async def test_a_bug_in_one_delivery_is_a_failed_attempt_not_a_crash(
    api: Api, db: Database, nursery: trio.Nursery
) -> None:
    with trio.fail_after(15):
        receiver = await receiving(nursery)
        hook = await endpoint(api, receiver.url)

        def render(record: Any) -> bytes:
            if record.type == "incident.created":
                raise KeyError("a shape this build does not know")
            return render_event(record)

        await create_incident(api)
        async with sender(db, render=render):
            await attempted(api, hook["id"])
            expect(await api.post(f"/incidents/{(await create_incident(api))['id']}/resolve"))
            await receiver.wait_for(1)  # the sender lives on: the next event goes out
        broken = (await deliveries(api, hook["id"]))[-1]
        assert broken["last_attempt"]["error"] == "internal_error"
        assert broken["status"] == "pending" and broken["next_attempt_at"] is not None
        assert json.loads(receiver.received[0].body)["type"] == "incident.resolved"


async def test_a_backlog_on_one_endpoint_is_sent_faster_than_its_share_per_poll(
    api: Api, db: Database, nursery: trio.Nursery
) -> None:
    # 16 deliveries due to one endpoint that may have 2 in flight; polls 1.5 s apart. A
    # sender that sleeps a poll after each claim capped by the endpoint's share sends 2 a
    # poll (8 polls, 10.5 s); one that claims again as soon as an attempt ends sends them
    # all within the first poll (docs/webhooks.md; bench/RESULTS.md, Events and webhooks)
    with trio.fail_after(30):
        receiver = await receiving(nursery)
        await endpoint(api, receiver.url)
        for i in range(16):
            await create_incident(api, title=f"outage {i}")
        settings = WebhookSettings(
            poll_seconds=1.5, timeout_seconds=2, claim_seconds=5,
            concurrency=8, per_endpoint_concurrency=2,
        )  # fmt: skip
        async with sender(db, settings):
            began = trio.current_time()
            await receiver.wait_for(16)
            took = trio.current_time() - began
        assert len({r.headers["uptrio-event-id"] for r in receiver.received}) == 16
        per_poll = 16 / max(took, 1e-9) * settings.poll_seconds
        assert took < 2 * settings.poll_seconds, f"16 deliveries took {took:.2f} s"
        assert per_poll > settings.per_endpoint_concurrency
