"""A probe in flight when the service is told to stop is finished and stored
(docs/operations.md, Shutdown).

The real tree (``web.process.service``) on the test's fresh database, with the real prober and
an http monitor whose target (``tests.targets.HttpTarget``, 127.0.0.1, port 0) answers
300 ms after the request arrives. As soon as the target has the request, the service
is stopped the way SIGTERM stops ``uptrio serve`` (leaving ``open_service``): the probe
already sent must finish (bounded by its timeout and the shutdown deadline) and its
check must be stored; no new probe starts meanwhile. Real clock; loopback only.
"""

from __future__ import annotations

import time

import trio

from engine import EngineSettings, Prober
from store import Connection, Database, StoreSettings, accounts
from tests.ops.helpers import NewMonitor, insert_monitors
from tests.targets import open_http_target
from web.process.service import ServiceSettings, open_service

SLOW_SECONDS = 0.3


async def _checks(connection: Connection, monitor_id: str) -> list[tuple[str, float]]:
    rows = await connection.fetch(
        "SELECT status, response_time_ms FROM checks WHERE monitor_id = $1", monitor_id
    )
    return [(row["status"], row["response_time_ms"]) for row in rows]


async def test_a_probe_in_flight_at_stop_is_finished_and_stored(db: Database) -> None:
    with trio.fail_after(30):
        async with open_http_target(mode="slow", slow_seconds=SLOW_SECONDS) as target:
            account = await db.transaction(accounts.ensure_account, "acme", int(time.time()))
            (monitor_id,) = await db.transaction(
                insert_monitors,
                account.id,
                [NewMonitor(url=target.url("/"), type="http", timeout_seconds=5)],
            )
            settings = ServiceSettings(
                engine=EngineSettings(shard_count=1),
                store=StoreSettings(batch_age_seconds=0.05),
                shutdown_seconds=5,
            )
            async with open_service(db, settings, prober=Prober()) as service:
                stats = service.metrics.engine_statistics
                assert stats is not None
                while not target.requests:  # the probe is sent: the target holds it
                    await trio.sleep(0.005)
                stop_began = trio.current_time()
            stop_seconds = trio.current_time() - stop_began
            sent = len(target.requests)
            stored = await db.run(_checks, monitor_id)
        assert sent >= 1
        assert len(stored) == sent == stats.checks, f"{sent} probes sent, {stored} stored"
        assert all(s == "up" and ms >= SLOW_SECONDS * 1000 * 0.9 for s, ms in stored), stored
        assert stop_seconds < settings.shutdown_seconds, stop_seconds
