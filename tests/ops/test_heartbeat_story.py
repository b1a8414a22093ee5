"""A heartbeat's whole story through the real service tree (docs/heartbeats.md: its worked
example): created through the API, up with a ping to its ping_url, down when its period and
grace pass without a ping, up again with the next ping; the incident opens and resolves, and
a real webhook receiver gets heartbeat.down and incident.created, then heartbeat.up and
incident.resolved.

web.process.service.open_service runs store, engine, webhook sender and web server on the test's
database, on 127.0.0.1 port 0. A period is at least 30 s, so the silence is not waited
out: the stored last success is moved 29 s back and the engine restarted, and the
reloaded actor's deadline (from the stored last success, as after any restart) comes a
second later. The deadline's own arithmetic runs on MockClock in
tests/engine/test_heartbeat_actor.py.
"""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import trio

from engine import Apply, EngineSettings, WebhookSettings
from store import Database, StoreSettings
from tests.api import SECRET, mint_token
from tests.receiver import Receiver
from tests.web.helpers import sql
from web.http.deps import Dependencies, PingVerb, WebSettings
from web.process.service import ServiceSettings, WebOptions, open_service


async def test_heartbeat_down_and_up_reach_the_webhook_receiver(
    db: Database, nursery: trio.Nursery
) -> None:
    with trio.fail_after(40):
        receiver = Receiver()
        await nursery.start(receiver.serve)
        _, token = await mint_token(db, "acme")

        def make_deps(apply: Apply, ping: PingVerb) -> Dependencies:
            return Dependencies(
                db=db, apply=apply, ping=ping, jwt_secret=SECRET, settings=WebSettings()
            )

        settings = ServiceSettings(
            engine=EngineSettings(shard_count=2),
            store=StoreSettings(batch_age_seconds=0.05),
            webhooks=WebhookSettings(poll_seconds=0.05, retry_base_seconds=0.2),
            maintenance=None,
            shutdown_seconds=5,
        )
        web = WebOptions(bind=["127.0.0.1:0"], make_deps=make_deps)
        async with open_service(db, settings, web=web) as service:
            base = service.binds[0]
            headers = {"Authorization": f"Bearer {token}"}
            async with httpx.AsyncClient(base_url=base, headers=headers, timeout=10) as api:
                hook = await api.post(
                    "/webhook-endpoints",
                    json={"url": receiver.url, "enabled_events": ["heartbeat.*", "incident.*"]},
                )
                assert hook.status_code == 201, hook.text
                created = await api.post(
                    "/heartbeats",
                    json={"name": "nightly backup", "period_seconds": 30, "grace_seconds": 0},
                )
                assert created.status_code == 201, created.text
                beat = created.json()
                assert beat["ping_url"].startswith(base + "/ping/")
                async with httpx.AsyncClient(timeout=10) as job:  # no token: the key is it
                    assert (await job.get(beat["ping_url"])).text == "OK\n"
                await _wait_status(api, beat["id"], "up")

                # the job falls silent: its last success 29 s ago, then a restart reloads it
                await sql(
                    db,
                    "UPDATE heartbeats SET last_success_at = $2 WHERE id = $1",
                    beat["id"],
                    int(time.time()) - 29,
                )
                await service.restart("engine")
                await _wait_status(api, beat["id"], "down", seconds=5)
                down = await _events(receiver, 4)
                assert set(down) == {
                    "heartbeat.created",
                    "heartbeat.up",
                    "heartbeat.down",
                    "incident.created",
                }
                moved = down["heartbeat.down"]["data"]
                assert moved["object"]["status"] == "down"
                assert moved["object"]["ping_url"] == beat["ping_url"]
                assert moved["previous_attributes"] == {"status": "up"}
                incident = down["incident.created"]["data"]["object"]
                assert incident["title"] == "nightly backup is down"
                assert incident["monitor"] == beat["id"] and incident["monitors"] == [beat["id"]]
                assert "No ping for 30 s" in incident["description"]

                async with httpx.AsyncClient(timeout=10) as job:
                    assert (await job.post(beat["ping_url"], content=b"backup done")).is_success
                await _wait_status(api, beat["id"], "up")
                back = await _events(receiver, 6, skip=4)
                assert set(back) == {"heartbeat.up", "incident.resolved"}
                resolved = back["incident.resolved"]["data"]["object"]
                assert resolved["id"] == incident["id"] and resolved["status"] == "resolved"
                assert resolved["resolution_message"].startswith(
                    "nightly backup is up again after "
                )


async def _wait_status(
    api: httpx.AsyncClient, heartbeat_id: str, status: str, seconds: float = 3
) -> None:
    with trio.fail_after(seconds):
        while (await api.get(f"/heartbeats/{heartbeat_id}")).json()["status"] != status:
            await trio.sleep(0.05)


async def _events(receiver: Receiver, count: int, skip: int = 0) -> dict[str, dict[str, Any]]:
    """The events of deliveries ``skip`` to ``count`` by type (deliveries to one endpoint
    run concurrently: their order is not the events')."""
    received = await receiver.wait_for(count)
    events = [json.loads(r.body) for r in received[skip:count]]
    by_type = {e["type"]: e for e in events}
    assert len(by_type) == len(events), [e["type"] for e in events]
    return by_type
