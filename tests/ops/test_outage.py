"""A database outage while monitors run (docs/operations.md, A database outage).

A dedicated embedded Postgres in the test's temporary directory (the session's server,
shared by the other tests, is never stopped) is stopped for 5 s with ``pg_ctl stop -m fast``
and started again, while the real tree (web.process.service) runs 20 monitors every second
and the real app answers API requests. The node holds bucket leases of 1.5 s, as every
``uptrio serve`` does (docs/several-nodes.md, Leases), so the outage outlives three of them:
its own leases, which no other node claimed meanwhile, still take every buffered check.

The story: probes go on and statuses move in memory; the store buffers (and, with a
small bound, drops the oldest, counted); API requests fail fast with
``database_unavailable``; ``/readyz`` says so; when Postgres is back everything
buffered is written once and the API answers again, all without a restart.
Real clock; loopback only.
"""

from __future__ import annotations

import time

import structlog
import trio

from engine import EngineSettings, LeaseSettings
from store import (
    CheckRecord,
    Database,
    EmbeddedPostgres,
    StoreActor,
    StoreSettings,
    WriteCheck,
    apply_migrations,
    open_database,
)
from tests.api import Api, mint_token, web_deps
from tests.ops.helpers import NewMonitor, RecordingProber, insert_monitors, scrape
from web.process.app import create_app
from web.process.metrics import Metrics
from web.process.ops import Operations
from web.process.service import ServiceSettings, open_service

MONITORS = 20
OUTAGE_SECONDS = 5.0
LEASE_SECONDS = 1.5  # the outage outlives three leases
SMALL_BOUND = 50
SYNTHETIC = 200


async def _count(db: Database, where: str = "TRUE") -> int:
    async def query(connection: object) -> int:
        return int(await connection.fetchval(f"SELECT count(*) FROM checks WHERE {where}"))  # type: ignore[attr-defined]

    return await db.run(query)


def _synthetic(monitor_id: str, n: int) -> CheckRecord:
    return CheckRecord(
        id=f"chk_synthetic_{n:04d}",
        monitor_id=monitor_id,
        status="up",
        response_time_ms=1.0,
        status_code=None,
        error_code=None,
        error_message=None,
        created=int(time.time()),
    )


async def test_database_outage_buffers_drops_oldest_past_the_bound_and_recovers(
    own_postgres: EmbeddedPostgres,
) -> None:
    with trio.fail_after(60):
        async with open_database(own_postgres.url, min_size=1, max_size=5) as db:
            await db.run(apply_migrations)
            account, jwt = await mint_token(db)
            ids = await db.transaction(
                insert_monitors,
                account.id,
                [NewMonitor(url=f"10.1.0.{i}:80") for i in range(MONITORS)],
            )
            prober = RecordingProber()
            settings = ServiceSettings(
                engine=EngineSettings(shard_count=2),
                # retried every 0.1 s: the store writes its buffer before the lease
                # actor's next renewal (every 0.5 s) once Postgres is back
                store=StoreSettings(batch_age_seconds=0.05, retry_max_seconds=0.1),
                leases=LeaseSettings(node_name="outage", lease_seconds=LEASE_SECONDS),
                shutdown_seconds=5,
            )
            async with open_service(db, settings, prober=prober) as service:
                assert service.engine is not None
                stats = service.metrics.engine_statistics
                assert stats is not None
                deps = web_deps(db.with_deadline(2.0), service.engine)
                ops = Operations(metrics=service.metrics, engine_state=service.engine.state)
                app = create_app(deps, ops=ops)
                small_metrics = Metrics()
                small = StoreActor(
                    db,
                    StoreSettings(
                        batch_size=20,
                        batch_age_seconds=0.05,
                        buffer_limit=SMALL_BOUND,
                        retry_max_seconds=0.5,
                    ),
                )
                small_metrics.attach(writer=small.writer)
                async with app.test_app() as test_app, trio.open_nursery() as nursery:
                    api = Api(test_app.test_client(), jwt)
                    await nursery.start(small.run)
                    with trio.fail_after(5):
                        while set(stats.statuses.values()) != {"up"}:
                            await trio.sleep(0.05)
                    await service.writer.flush()
                    code, body, _ = await api.get("/readyz")
                    assert code == 200 and body["status"] == "ready", body

                    # ---- Postgres stops ------------------------------------------------
                    await trio.to_thread.run_sync(own_postgres.stop_server)
                    began, checks_at_stop = trio.current_time(), stats.checks
                    prober.ok = False  # the targets go down during the outage, too

                    started = trio.current_time()
                    code, body, _ = await api.get("/monitors")
                    api_seconds = trio.current_time() - started
                    assert code == 500, body
                    assert body["error"]["type"] == "api_error"
                    assert body["error"]["code"] == "database_unavailable"
                    assert api_seconds < 2.0, api_seconds
                    code, body, _ = await api.get("/readyz")
                    assert code == 503 and "database" in body["not_ready"], body

                    with structlog.testing.capture_logs() as logged:
                        with trio.fail_after(1):  # producers never block on an outage
                            for n in range(SYNTHETIC):
                                await small.writer.write(WriteCheck(check=_synthetic(ids[0], n)))
                        await trio.sleep(OUTAGE_SECONDS - (trio.current_time() - began))
                    assert set(stats.statuses.values()) == {"down"}, "statuses move in memory"
                    probed_in_outage = stats.checks - checks_at_stop
                    buffered = service.store.statistics.buffered
                    assert not service.store.statistics.database_available
                    assert probed_in_outage >= MONITORS * (OUTAGE_SECONDS - 1)
                    assert buffered >= probed_in_outage
                    assert small.statistics.dropped == SYNTHETIC - SMALL_BOUND
                    dropped_lines = [e for e in logged if "dropped the oldest" in e["event"]]
                    assert sum(e["dropped"] for e in dropped_lines) >= 1

                    # ---- Postgres is back -------------------------------------------
                    await trio.to_thread.run_sync(own_postgres.start_server)
                    await service.writer.flush(timeout_seconds=15)
                    await small.writer.flush(timeout_seconds=15)
                    recovery_seconds = trio.current_time() - began - OUTAGE_SECONDS
                    code, body, _ = await api.get("/monitors", query={"limit": 100})
                    assert code == 200, body
                    assert {m["status"] for m in body["data"]} == {"down"}
                    code, body, _ = await api.get("/readyz")
                    assert code == 200, body
                    small_figures = scrape(small_metrics.render().decode())
                    small.writer.close()
                    await small.wait_finished()
            # The tree stopped: the store wrote everything queued.
            store = service.store.statistics
            stored = await _count(db, "id NOT LIKE 'chk_synthetic_%'")
            assert stored == stats.checks, f"{stats.checks} probed, {stored} stored"
            assert store.rows_written == stored and store.dropped == 0
            assert store.fenced_refused == 0
            assert store.retries >= 1 and store.outages == 1
            synthetic = await _count(db, "id LIKE 'chk_synthetic_%'")
            assert synthetic == SMALL_BOUND
            assert small_figures[("uptrio_store_rows_dropped_total", ())] == SYNTHETIC - SMALL_BOUND
            # the newest results survived, the oldest were dropped
            assert await _count(db, f"id = 'chk_synthetic_{SYNTHETIC - 1:04d}'") == 1
            assert await _count(db, "id = 'chk_synthetic_0000'") == 0
            print(
                f"\noutage figures: {probed_in_outage} checks probed during a "
                f"{OUTAGE_SECONDS:.0f} s outage, {buffered} buffered at its end (max "
                f"{store.max_buffered}), all {stats.checks} checks stored exactly once, "
                f"0 dropped; written {recovery_seconds:.2f} s after Postgres came back; "
                f"API failed in {api_seconds * 1000:.0f} ms; bound {SMALL_BOUND}: "
                f"{SYNTHETIC} handed over, {small.statistics.dropped} oldest dropped, "
                f"{synthetic} stored"
            )
