"""Regions and quorum as a user lives it (docs/regions.md; README, "Regions and
quorum"): three nodes on one Postgres, one in each of the regions ``eu``, ``us`` and
``ap``, each probing from its own loopback address (``--probe-source-address``
127.0.0.2, .3, .4), and a local HTTP target that answers 403 to the addresses it denies,
as nginx's ``deny`` does. A monitor listed in all three regions with quorum 2 is up while
all see it up; one region blocked at the target is down in its own view only (the
monitor stays up, no incident); a second blocked takes the monitor down with exactly one
incident naming both regions; unblocked, it is up and the incident resolved. Then the
``ap`` node, its region's only one, stops: ``ap`` becomes ``unknown``, never ``down``,
once unheard for two intervals and 10 s (``store.quorum.SILENCE_SLACK_SECONDS``).

Each node is the real tree (``web.process.service.open_service``) with its lease actor,
engine, fenced store and a real prober bound to its source address; the ``eu`` node
serves the API. Real clock, real sockets on loopback (Linux routes all of 127.0.0.0/8 to
``lo``, so 127.0.0.2 to .4 need no set-up).
"""

from __future__ import annotations

from contextlib import AsyncExitStack
from typing import Any

import httpx
import trio

from engine import Apply, EngineSettings, LeaseSettings, Prober, source_address
from store import Database, StoreSettings
from store.quorum import SILENCE_SLACK_SECONDS
from tests.api import SECRET, mint_token
from tests.ops.helpers import create, until
from tests.targets import HttpTarget, open_http_target
from web.http.deps import Dependencies, PingVerb, WebSettings
from web.process.service import ServiceSettings, WebOptions, open_service

SOURCES = {"eu": "127.0.0.2", "us": "127.0.0.3", "ap": "127.0.0.4"}
"""Each node's region and the address its probes leave from."""
INTERVAL = 1
"""The monitor's interval, seconds."""


def _settings(region: str) -> ServiceSettings:
    return ServiceSettings(
        engine=EngineSettings(shard_count=1),
        store=StoreSettings(batch_age_seconds=0.05),
        leases=LeaseSettings(node_name=f"node-{region}", lease_seconds=1.5, region=region),
        webhooks=None,
        maintenance=None,
        shutdown_seconds=3,
    )


def _web(db: Database) -> WebOptions:
    def make_deps(apply: Apply, ping: PingVerb) -> Dependencies:
        return Dependencies(
            db=db, apply=apply, ping=ping, jwt_secret=SECRET, settings=WebSettings()
        )

    return WebOptions(bind=["127.0.0.1:0"], make_deps=make_deps)


class _View:
    """The monitor and its incidents as the API shows them, read on every poll."""

    def __init__(self, api: httpx.AsyncClient, monitor_id: str) -> None:
        self.api = api
        self.monitor_id = monitor_id
        self.monitor: dict[str, Any] = {}
        self.incidents: list[dict[str, Any]] = []

    async def read(self) -> None:
        answer = await self.api.get(f"/monitors/{self.monitor_id}")
        assert answer.status_code == 200, answer.text
        self.monitor = answer.json()
        listed = await self.api.get("/incidents", params={"limit": 100})
        assert listed.status_code == 200, listed.text
        self.incidents = [i for i in listed.json()["data"] if i["monitor"] == self.monitor_id]

    async def until(self, status: str, regions: dict[str, str], seconds: float = 6) -> None:
        """Poll until the monitor is ``status`` with ``region_status`` ``regions``."""
        with trio.move_on_after(seconds):
            while True:
                await self.read()
                if self.monitor["status"] == status and self.monitor["region_status"] == regions:
                    return
                await trio.sleep(0.1)
        raise AssertionError(f"not {status} {regions} within {seconds} s: {self.monitor}")


async def test_a_region_blocked_is_not_an_outage_two_are_one_incident(db: Database) -> None:
    with trio.fail_after(45):
        _, token = await mint_token(db, "acme")
        async with open_http_target() as target, AsyncExitStack() as stack:
            nodes = {}
            for region in ("eu", "us"):
                nodes[region] = await stack.enter_async_context(
                    open_service(
                        db,
                        _settings(region),
                        prober=Prober(source_address=source_address(SOURCES[region])),
                        web=_web(db) if region == "eu" else None,
                    )
                )
            async with open_service(
                db, _settings("ap"), prober=Prober(source_address=source_address(SOURCES["ap"]))
            ):
                api = await stack.enter_async_context(
                    httpx.AsyncClient(
                        base_url=nodes["eu"].binds[0],
                        headers={"Authorization": f"Bearer {token}"},
                        timeout=5,
                    )
                )
                view = await _story(api, target)
            await _silent_region(view)


async def _story(api: httpx.AsyncClient, target: HttpTarget) -> _View:
    """Up, one region blocked, two, unblocked; the view of the monitor at the end."""
    monitor = await create(
        api,
        "/monitors",
        {
            "name": "api",
            "url": target.url("/health"),
            "type": "http",
            "interval_seconds": INTERVAL,
            "timeout_seconds": 1,
            "failure_threshold": 1,
            "success_threshold": 1,
            "regions": ["eu", "us", "ap"],
            "region_quorum": 2,
        },
    )
    assert monitor["region_quorum"] == 2
    view = _View(api, monitor["id"])
    await view.until("up", {"eu": "up", "us": "up", "ap": "up"}, seconds=10)
    # each region probes from its own node's address
    await until(lambda: set(target.peers) >= set(SOURCES.values()), "every source seen")
    assert set(target.peers) <= set(SOURCES.values()), target.peers

    target.denied.add(SOURCES["eu"])
    await view.until("up", {"eu": "down", "us": "up", "ap": "up"})
    assert view.incidents == []

    target.denied.add(SOURCES["us"])
    await view.until("down", {"eu": "down", "us": "down", "ap": "up"})
    [incident] = view.incidents
    assert incident["description"].startswith("Down in eu, us (2 of 3). "), incident
    assert incident["status"] != "resolved", incident

    target.denied.clear()
    await view.until("up", {"eu": "up", "us": "up", "ap": "up"})
    # the quorum moves the monitor once each way: still one incident, now resolved
    with trio.fail_after(5):
        while view.incidents[0]["status"] != "resolved":
            await trio.sleep(0.1)
            await view.read()
    assert [i["id"] for i in view.incidents] == [incident["id"]]
    return view


async def _silent_region(view: _View) -> None:
    """``ap``'s only node has stopped: its view is ``unknown`` once unheard for two
    intervals and the slack, never ``down``, and the monitor stays up."""
    stopped = trio.current_time()
    seen: list[str] = []
    limit = 2 * INTERVAL + SILENCE_SLACK_SECONDS + 3  # its last check may be that late
    with trio.move_on_after(limit):
        while True:
            await view.read()
            seen.append(view.monitor["region_status"]["ap"])
            if seen[-1] == "unknown":
                break
            await trio.sleep(0.2)
    assert seen[-1] == "unknown", f"ap still {seen[-1]} {limit} s after its node stopped"
    assert set(seen) == {"up", "unknown"}, seen
    assert trio.current_time() - stopped >= 2 * INTERVAL + SILENCE_SLACK_SECONDS - 1.5
    assert view.monitor["status"] == "up"
    assert view.monitor["region_status"] == {"eu": "up", "us": "up", "ap": "unknown"}
    assert len(view.incidents) == 1
