"""Maintenance windows through the real service tree, as a user lives them
(docs/maintenance.md; README, "Maintenance windows"): a window over a monitor, its target
stopped inside it (no incident, no page), still down at the window's end (exactly one
incident and one page, then); and a window with ``pause_checks`` (no checks inside it,
checks again after it, by themselves).

Everything is real and on 127.0.0.1: ``web.process.service.open_service`` runs the store,
the engine, the listener (a lease, as ``uptrio serve`` has), the notifier, both walkers
and the web server on the test's database; the page goes to a Slack stand-in
(``tests.receiver.Receiver`` behind ``NotifierSettings.provider_bases``).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
import trio

from engine import Apply, EngineSettings, LeaseSettings, NotifierSettings
from store import Database, StoreSettings
from tests.api import SECRET, mint_token
from tests.receiver import Receiver
from tests.targets import HttpTarget, open_http_target
from web.http.deps import Dependencies, PingVerb, WebSettings
from web.process.service import ServiceSettings, WebOptions, open_service

SLACK_HOOK = "https://hooks.slack.com/services/T0001/B0001/abcdEFGH1234"


@asynccontextmanager
async def _service(
    db: Database, slack: Receiver
) -> AsyncIterator[tuple[httpx.AsyncClient, HttpTarget]]:
    """The service (one node, leased) and an API client with an owner token, and a local
    HTTP target."""
    _, token = await mint_token(db, "acme")
    notifier = NotifierSettings(
        provider_bases={"slack": f"http://127.0.0.1:{slack.port}"},
        retry_base_seconds=0.2,
        poll_seconds=0.05,
    )
    settings = ServiceSettings(
        engine=EngineSettings(shard_count=2),
        store=StoreSettings(batch_age_seconds=0.05),
        webhooks=None,
        notifier=notifier,
        maintenance=None,
        shutdown_seconds=5,
        leases=LeaseSettings(node_name="solo", lease_seconds=5),
    )

    def make_deps(apply: Apply, ping: PingVerb) -> Dependencies:
        return Dependencies(
            db=db,
            apply=apply,
            ping=ping,
            jwt_secret=SECRET,
            settings=WebSettings(),
            channels=notifier.channel_settings(settings.target_policy),
        )

    web = WebOptions(bind=["127.0.0.1:0"], make_deps=make_deps)
    async with open_http_target() as target, open_service(db, settings, web=web) as service:
        headers = {"Authorization": f"Bearer {token}"}
        async with httpx.AsyncClient(base_url=service.binds[0], headers=headers, timeout=10) as api:
            yield api, target


async def quiet_for(count: Callable[[], int], seconds: float, before: float) -> int:
    """Wait until ``count()`` has not changed for ``seconds``; fail if that has not
    happened by ``before`` (epoch seconds). The count then."""
    last, since = count(), time.time()
    while time.time() - since < seconds:
        assert time.time() < before, "still probed inside the window"
        await trio.sleep(0.1)
        if (now := count()) != last:
            last, since = now, time.time()
    return last


async def _create(api: httpx.AsyncClient, path: str, body: dict[str, Any]) -> dict[str, Any]:
    answer = await api.post(path, json=body)
    assert answer.status_code == 201, answer.text
    created: dict[str, Any] = answer.json()
    return created


async def _get(api: httpx.AsyncClient, path: str, **params: Any) -> Any:
    answer = await api.get(path, params=params)
    assert answer.status_code == 200, answer.text
    return answer.json()


async def _monitor(api: httpx.AsyncClient, target: HttpTarget) -> dict[str, Any]:
    monitor = await _create(
        api,
        "/monitors",
        {
            "name": "checkout api",
            "url": target.url("/health"),
            "type": "http",
            "interval_seconds": 1,
            "timeout_seconds": 1,
            "failure_threshold": 1,
        },
    )
    return monitor


async def _wait(api: httpx.AsyncClient, path: str, key: str, value: Any, seconds: float = 6) -> Any:
    """Poll ``path`` until its ``key`` is ``value``; the body."""
    with trio.fail_after(seconds):
        while True:
            body = await _get(api, path)
            if body[key] == value:
                return body
            await trio.sleep(0.05)


async def test_a_window_holds_back_the_page_and_the_incident_until_its_end(
    db: Database, nursery: trio.Nursery
) -> None:
    with trio.fail_after(40):
        slack = Receiver()
        await nursery.start(slack.serve)
        async with _service(db, slack) as (api, target):
            chat = await _create(
                api,
                "/notification-channels",
                {"name": "ops chat", "type": "slack", "config": {"webhook_url": SLACK_HOOK}},
            )
            await _create(
                api,
                "/escalation-policies",
                {
                    "name": "ops",
                    "default": True,
                    "steps": [
                        {"delay_seconds": 0, "targets": [{"type": "channel", "id": chat["id"]}]}
                    ],
                },
            )
            monitor = await _monitor(api, target)
            path = f"/monitors/{monitor['id']}"
            await _wait(api, path, "status", "up")
            now = int(time.time())
            window = await _create(
                api,
                "/maintenance-windows",
                {
                    "title": "database upgrade",
                    "monitors": [monitor["id"]],
                    "starts_at": now,
                    "ends_at": now + 4,
                },
            )
            assert window["status"] == "in_progress"
            await _wait(api, path, "in_maintenance", True)
            await _create(
                api,
                "/status-pages",
                {
                    "name": "Acme",
                    "slug": "acme",
                    "components": [{"monitor": monitor["id"], "name": "Checkout"}],
                },
            )

            # the target stops inside the window: down, said why, nothing opened or sent
            await target.set_mode("error")
            down = await _wait(api, path, "status", "down")
            assert down["suppressed_by"] == {"type": "maintenance", "id": window["id"]}
            assert (await _get(api, "/incidents"))["data"] == []
            assert (await _get(api, "/alerts"))["data"] == []
            assert slack.received == []
            # the public page says so (its copy is at most 10 s old: the first read)
            summary = await _get(api, "/status/acme/summary.json")
            assert [c["state"] for c in summary["components"]] == ["under_maintenance"]
            assert summary["state"] == "under_maintenance"
            assert [m["title"] for m in summary["scheduled_maintenances"]] == ["database upgrade"]

            # still down at the end: one incident and one page, then, and no more
            await slack.wait_for(1)
            assert time.time() >= now + 4
            await trio.sleep(2)
            incidents = (await _get(api, "/incidents"))["data"]
            alerts = (await _get(api, "/alerts"))["data"]
            assert len(incidents) == 1 and len(alerts) == 1 and len(slack.received) == 1
            assert incidents[0]["monitor"] == monitor["id"]
            assert incidents[0]["created"] in (now + 4, now + 5)  # at the end, not later
            after = await _get(api, path)
            assert after["in_maintenance"] is False and after["suppressed_by"] is None
            types = [
                e["type"]
                for e in (await _get(api, "/events", limit=100))["data"]
                if e["type"].startswith("maintenance.")
            ]
            assert sorted(types) == [
                "maintenance.created",
                "maintenance.ended",
                "maintenance.started",
            ]
            # availability keeps the window's time apart from up and down
            end = int(time.time())
            figures = await _get(api, f"{path}/availability", start=now - 60, end=end)
            assert figures["maintenance_seconds"] == 4
            counted = ("up", "down", "paused", "unknown", "maintenance")
            assert sum(figures[f"{k}_seconds"] for k in counted) == end - (now - 60)


async def test_a_window_with_pause_checks_pauses_them_and_they_resume_by_themselves(
    db: Database, nursery: trio.Nursery
) -> None:
    with trio.fail_after(40):
        slack = Receiver()
        await nursery.start(slack.serve)
        async with _service(db, slack) as (api, target):
            monitor = await _monitor(api, target)
            path = f"/monitors/{monitor['id']}"
            await _wait(api, path, "status", "up")
            now = int(time.time())
            await _create(
                api,
                "/maintenance-windows",
                {
                    "title": "rack move",
                    "monitors": [monitor["id"]],
                    "starts_at": now,
                    "ends_at": now + 4,
                    "pause_checks": True,
                },
            )
            await _wait(api, path, "in_maintenance", True)
            # the walker tells the engine within its poll: then nothing until the end
            served = await quiet_for(lambda: len(target.requests), 1.2, before=now + 3)
            await trio.sleep(max(0.0, now + 3.8 - time.time()))
            assert len(target.requests) == served  # not probed inside the window
            with trio.fail_after(5):
                while len(target.requests) < served + 2:  # and again after it
                    await trio.sleep(0.1)
