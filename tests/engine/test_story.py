"""The engine's stories, told through the API with real targets (docs/checks.md,
docs/incidents.md).

A real engine (sharded supervisors, monitor actors, the store actor) runs on the test's
fresh database; requests go through the real app; targets are local servers on
127.0.0.1. Intervals are 1 s: these tests wait on real I/O, so they use the real clock
(``MockClock`` only where no I/O is in flight: tests/engine/test_supervisor.py and the
pure schedule and health tests).
"""

from __future__ import annotations

import ipaddress
import json
from functools import partial
from typing import Any

import pytest
import trio

from engine import (
    Engine,
    EngineSettings,
    Prober,
    TargetPolicy,
    WebhookSettings,
    run_engine,
    run_webhook_sender,
)
from engine.probes._ping import permitted_ping_kinds
from store import Database, StoreWriter
from tests.api import Api
from tests.receiver import Receiver, expected_signature, signatures
from tests.targets import DnsTarget, HttpTarget, TcpTarget
from web.api.events import render_event
from web.api.history import CheckList

FAST = {"interval_seconds": 1, "timeout_seconds": 1}


class Policy:
    """An address policy the test can switch: refuse every address while ``deny``."""

    def __init__(self) -> None:
        self.deny = False

    def __call__(self, address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str | None:
        return f"{address} refused by the test" if self.deny else None


@pytest.fixture
def policy() -> Policy:
    return Policy()


@pytest.fixture
async def dns_target(nursery: trio.Nursery) -> DnsTarget:
    target = DnsTarget(records={"db.uptrio.test": ["127.0.0.1", "::1"]})
    await nursery.start(target.run)
    return target


@pytest.fixture
async def engine(
    db: Database,
    nursery: trio.Nursery,
    writer: StoreWriter,
    dns_target: DnsTarget,
    policy: Policy,
) -> Engine:
    prober = Prober(dns_nameserver=dns_target.nameserver, address_policy=policy)
    engine: Engine = await nursery.start(
        run_engine, db, writer, prober, EngineSettings(shard_count=2)
    )
    return engine


async def wait_status(api: Api, monitor_id: str, status: str, seconds: float = 6) -> dict[str, Any]:
    """Poll the monitor until it has ``status``; fail after ``seconds``."""
    with trio.fail_after(seconds):
        while True:
            code, body, _ = await api.get(f"/monitors/{monitor_id}")
            assert code == 200, body
            if body["status"] == status:
                return body
            await trio.sleep(0.05)


async def checks_of(api: Api, monitor_id: str, limit: int = 100) -> list[dict[str, Any]]:
    code, body, _ = await api.get(f"/monitors/{monitor_id}/checks", query={"limit": limit})
    assert code == 200, body
    CheckList.model_validate(body)
    return list(body["data"])


async def test_http_monitor_story(
    api: Api, http_target: HttpTarget, writer: StoreWriter, nursery: trio.Nursery
) -> None:
    with trio.fail_after(40):
        code, monitor, _ = await api.post(
            "/monitors",
            json={"name": "web", "url": http_target.url("/"), "type": "http", **FAST},
        )
        assert code == 201 and monitor["status"] == "pending"
        mid = monitor["id"]
        # create: a first check within a second, and up
        up = await wait_status(api, mid, "up", seconds=2)
        assert up["last_checked_at"] is not None
        checks = await checks_of(api, mid)
        assert checks[0]["status"] == "up" and checks[0]["status_code"] == 200
        assert checks[0]["error"] is None and checks[0]["response_time_ms"] > 0
        # the target fails: down after failure_threshold (2) failed checks, not before
        await http_target.set_mode("error")
        down = await wait_status(api, mid, "down")
        failed = [c for c in await checks_of(api, mid) if c["status"] == "down"]
        assert len(failed) >= 2
        assert failed[-1]["status_code"] == 500
        assert failed[-1]["error"]["code"] == "unexpected_status"
        assert down["updated"] >= up["updated"]
        # it recovers: up again
        await http_target.set_mode("ok")
        await wait_status(api, mid, "up")
        # pause: no check starts after the pause response
        code, paused, _ = await api.post(f"/monitors/{mid}/pause")
        assert code == 200 and paused["status"] == "paused"
        await writer.flush()
        seen = len(http_target.requests)
        stored = len(await checks_of(api, mid))
        await trio.sleep(2.5)
        assert len(http_target.requests) == seen
        assert len(await checks_of(api, mid)) == stored
        # resume: pending, then up
        code, resumed, _ = await api.post(f"/monitors/{mid}/resume")
        assert code == 200 and resumed["status"] == "pending"
        await wait_status(api, mid, "up", seconds=2)
        # PATCH url: the next check goes to the new target
        async with trio.open_nursery() as inner:
            other = HttpTarget()
            await inner.start(other.run)
            code, _, _ = await api.patch(f"/monitors/{mid}", json={"url": other.url("/new")})
            assert code == 200
            with trio.fail_after(3):
                while not other.requests:
                    await trio.sleep(0.05)
            assert other.requests[0].path == "/new"
            # delete: the actor stops, its checks go with it
            before = len(other.requests)
            code, body, _ = await api.delete(f"/monitors/{mid}")
            assert code == 204 and body is None
            await trio.sleep(2.2)
            assert len(other.requests) == before
            inner.cancel_scope.cancel()
        code, _, _ = await api.get(f"/monitors/{mid}/checks")
        assert code == 404


async def test_http_patch_takes_effect_without_restarting_the_schedule(
    api: Api, http_target: HttpTarget
) -> None:
    with trio.fail_after(20):
        _, monitor, _ = await api.post(
            "/monitors",
            json={"name": "web", "url": http_target.url("/status/204"), "type": "http", **FAST},
        )
        mid = monitor["id"]
        await wait_status(api, mid, "down")  # 204 is not the expected 200
        code, body, _ = await api.patch(f"/monitors/{mid}", json={"expected_status_code": 204})
        assert code == 200 and body["expected_status_code"] == 204
        await wait_status(api, mid, "up", seconds=3)


async def test_tcp_monitor_story(api: Api, tcp_target: TcpTarget) -> None:
    with trio.fail_after(30):
        _, monitor, _ = await api.post(
            "/monitors",
            json={"name": "db", "url": f"tcp://127.0.0.1:{tcp_target.port}", "type": "tcp", **FAST},
        )
        mid = monitor["id"]
        await wait_status(api, mid, "up", seconds=2)
        await tcp_target.stop()
        await wait_status(api, mid, "down")
        latest = (await checks_of(api, mid))[0]
        assert latest["error"]["code"] == "connection_refused"
        assert latest["status_code"] is None
        await tcp_target.start()
        await wait_status(api, mid, "up")


async def test_dns_monitor_story(api: Api, dns_target: DnsTarget) -> None:
    with trio.fail_after(30):
        _, monitor, _ = await api.post(
            "/monitors",
            json={"name": "dns", "url": "db.uptrio.test", "type": "dns", **FAST},
        )
        mid = monitor["id"]
        await wait_status(api, mid, "up", seconds=2)
        assert {q.rdtype for q in dns_target.queries} >= {"A", "AAAA"}
        dns_target.records.pop("db.uptrio.test")
        await wait_status(api, mid, "down")
        assert (await checks_of(api, mid))[0]["error"]["code"] == "dns_failure"
        dns_target.records["db.uptrio.test"] = ["127.0.0.1"]
        await wait_status(api, mid, "up")


@pytest.mark.skipif(not permitted_ping_kinds(), reason="this process may not open ICMP sockets")
async def test_ping_monitor_story(api: Api, policy: Policy) -> None:
    with trio.fail_after(30):
        _, monitor, _ = await api.post(
            "/monitors",
            json={"name": "lo", "url": "127.0.0.1", "type": "ping", **FAST},
        )
        mid = monitor["id"]
        await wait_status(api, mid, "up", seconds=2)
        assert (await checks_of(api, mid))[0]["response_time_ms"] > 0
        # Loopback always answers, so the failure is made by refusing the address.
        policy.deny = True
        await wait_status(api, mid, "down")
        assert (await checks_of(api, mid))[0]["error"]["code"] == "target_denied"
        policy.deny = False
        await wait_status(api, mid, "up")


async def test_monitors_resume_from_their_stored_status_after_an_engine_restart(
    api: Api, db: Database, writer: StoreWriter, http_target: HttpTarget, engine: Engine
) -> None:
    with trio.fail_after(20):
        _, monitor, _ = await api.post(
            "/monitors",
            json={
                "name": "web",
                "url": http_target.url("/"),
                "type": "http",
                "interval_seconds": 2,
                "timeout_seconds": 1,
            },
        )
        mid = monitor["id"]
        await wait_status(api, mid, "up", seconds=2)
        await writer.flush()
        # A second engine on the same database loads the monitor from its stored status.
        async with trio.open_nursery() as inner:
            second: Engine = await inner.start(
                run_engine, db, writer, Prober(), EngineSettings(shard_count=1)
            )
            assert second.running() == 1
            entry = second.shards[0].runners["mon"].entries[mid]
            assert entry.record.status == "up"
            inner.cancel_scope.cancel()


async def test_down_incident_webhook_up_resolved_story(
    api: Api, db: Database, tcp_target: TcpTarget, nursery: trio.Nursery
) -> None:
    """The README's story (README, From nothing to an alert) through the API: a target
    stops, the monitor goes down, an incident opens, signed webhooks tell a receiver; the
    target comes back, the incident resolves and the receiver hears it; the incident's
    timeline tells it all."""
    with trio.fail_after(40):
        receiver = Receiver()
        await nursery.start(receiver.serve)
        await nursery.start(
            partial(
                run_webhook_sender,
                db,
                WebhookSettings(poll_seconds=0.05, retry_base_seconds=0.2),
                render=render_event,
                policy=TargetPolicy(),
            )
        )
        code, hook, _ = await api.post(
            "/webhook-endpoints",
            json={
                "url": receiver.url,
                "enabled_events": ["monitor.down", "monitor.up", "incident.*"],
            },
        )
        assert code == 201, hook
        _, monitor, _ = await api.post(
            "/monitors",
            json={"name": "db", "url": f"tcp://127.0.0.1:{tcp_target.port}", "type": "tcp", **FAST},
        )
        mid = monitor["id"]
        await wait_status(api, mid, "up", seconds=3)
        await receiver.wait_for(1)  # pending -> up is a move into up
        await tcp_target.stop()
        await wait_status(api, mid, "down")
        await receiver.wait_for(3)
        await tcp_target.start()
        await wait_status(api, mid, "up")
        arrived = await receiver.wait_for(5)
        events = [json.loads(r.body) for r in arrived]
        assert sorted(e["type"] for e in events[1:3]) == ["incident.created", "monitor.down"]
        assert sorted(e["type"] for e in events[3:5]) == ["incident.resolved", "monitor.up"]
        for request, event in zip(arrived, events, strict=True):
            assert request.headers["uptrio-event-id"] == event["id"]
            timestamp, sent = signatures(request.headers["uptrio-signature"])
            assert expected_signature(hook["secret"], timestamp, request.body) in sent
        by_type = {e["type"]: e for e in events[1:]}
        incident = by_type["incident.created"]["data"]["object"]
        assert incident["title"] == "db is down" and incident["monitor"] == mid
        assert incident["monitors"] == [mid] and incident["status"] == "investigating"
        assert "connection_refused" in incident["description"]
        resolved = by_type["incident.resolved"]["data"]
        assert resolved["object"]["id"] == incident["id"]
        assert resolved["object"]["resolution_message"].startswith("db is up again after ")
        assert resolved["previous_attributes"]["status"] == "investigating"
        assert by_type["monitor.down"]["data"]["previous_attributes"] == {"status": "up"}
        assert by_type["monitor.down"]["request"] == {"id": None, "idempotency_key": None}
        code, timeline, _ = await api.get(f"/incidents/{incident['id']}/updates")
        assert code == 200
        assert [u["status"] for u in timeline["data"]] == ["investigating", "resolved"]
        code, stored, _ = await api.get(f"/incidents/{incident['id']}")
        assert stored["status"] == "resolved" and stored["resolved_at"] is not None
        code, listed, _ = await api.get("/events", query={"type": "incident.*"})
        assert [e["id"] for e in listed["data"]] == [
            by_type["incident.resolved"]["id"],
            by_type["incident.created"]["id"],
        ]
