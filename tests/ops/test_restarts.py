"""Operator restarts of the supervision tree under load (docs/operations.md, The supervision
tree).

The real tree (web.process.service: root over maintenance, store, engine, webhooks, web) runs on
the test's fresh database with 300 monitors checking every second; a prober without I/O
records each probe. ``engine``, ``shard-1`` and ``root`` are restarted while it runs. Real clock
(the database and the web server's socket are real I/O); loopback only; port 0.
"""

from __future__ import annotations

import statistics
import time
from itertools import pairwise

import httpx
import trio

from engine import Apply, EngineSettings
from engine.schedule import phase_offset
from store import Database, StoreSettings, accounts
from tests.api import SECRET
from tests.ops.helpers import NewMonitor, RecordingProber, count_checks, insert_monitors, scrape
from web.http.deps import Dependencies, PingVerb, WebSettings
from web.process.service import ServiceSettings, WebOptions, open_service

LOADED = 300


async def test_restarts_under_load_lose_no_check_and_keep_every_phase(db: Database) -> None:
    with trio.fail_after(45):
        account = await db.transaction(accounts.ensure_account, "acme", int(time.time()))
        loaded = [NewMonitor(url=f"10.0.{i // 250}.{i % 250}:80") for i in range(LOADED)]
        ids = await db.transaction(insert_monitors, account.id, loaded)
        # checked once a minute: never during the test; stored down with thresholds 3
        (slow,) = await db.transaction(
            insert_monitors,
            account.id,
            [
                NewMonitor(
                    url="10.9.9.9:80", status="down", interval_seconds=60, success_threshold=3
                )
            ],
        )
        url_of = dict(zip(ids, (m.url for m in loaded), strict=True))
        prober = RecordingProber()

        def make_deps(apply: Apply, ping: PingVerb) -> Dependencies:
            return Dependencies(
                db=db, apply=apply, ping=ping, jwt_secret=SECRET, settings=WebSettings()
            )

        settings = ServiceSettings(
            engine=EngineSettings(shard_count=4),
            store=StoreSettings(batch_age_seconds=0.05),
            shutdown_seconds=5,
        )
        web = WebOptions(bind=["127.0.0.1:0"], make_deps=make_deps)

        async def get(path: str) -> httpx.Response:
            async with httpx.AsyncClient(base_url=base, timeout=5) as http:
                return await http.get(path)

        async with open_service(db, settings, prober=prober, web=web) as service:
            assert service.engine is not None
            stats = service.metrics.engine_statistics
            assert stats is not None
            base = service.binds[0]
            await trio.sleep(2.2)
            before = scrape((await get("/metrics")).text)
            for name in ("engine", "shard-1", "root"):
                await service.restart(name)
                # every reloaded actor starts from its stored status, not pending
                assert stats.statuses[slow] == "down", name
                assert (await get("/healthz")).status_code == 200  # the same port
                await trio.sleep(1.6)
            after = scrape((await get("/metrics")).text)
            ready = await get("/readyz")
            assert ready.status_code == 200, ready.text
            listing = {s.name: s for s in service.supervisors()}
            assert {"root", "engine", "shard-0", "shard-3"} <= set(listing)
            assert listing["root"].children == 11 and listing["engine"].children == 4
        # Left normally: web, engine, then the store flushed everything.

        produced = stats.checks
        stored = await db.run(count_checks)
        assert stored == produced, f"{produced} checks probed, {stored} stored"
        assert produced >= LOADED * 6, produced

        ok = (("result", "ok"), ("type", "tcp"))
        moved = after[("uptrio_checks_total", ok)] - before[("uptrio_checks_total", ok)]
        assert moved >= LOADED * 3, moved
        assert after[("uptrio_monitors", (("status", "up"),))] == LOADED
        assert after[("uptrio_store_rows_written_total", ())] > 0

        gaps, offsets = [], []
        for monitor_id in ids:
            calls = prober.calls[url_of[monitor_id]]
            assert len(calls) >= 6, (monitor_id, calls)
            gaps += [b[0] - a[0] for a, b in pairwise(calls)]
            phase = phase_offset(monitor_id, 1.0)
            points = [round(wall - phase) for _, wall in calls]
            # No burst: each grid point of the monitor's own phase got one probe at most,
            # restarts included (a late probe is late, never doubled).
            assert len(points) == len(set(points)), (monitor_id, calls)
            offsets += [
                wall - phase - point for (_, wall), point in zip(calls, points, strict=True)
            ]
        assert min(gaps) > 0.5, min(gaps)
        # and the checks fell on their grid points: the phase survived every restart
        assert abs(statistics.median(offsets)) < 0.05, statistics.median(offsets)
        assert max(abs(o) for o in offsets) < 0.45, max(abs(o) for o in offsets)
