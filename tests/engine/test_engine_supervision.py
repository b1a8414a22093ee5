"""Supervision in the running engine: a probe that raises (a bug) restarts its own actor
only, and restart intensity escalates as in Erlang/OTP (docs/operations.md, The supervision
tree).

The probe bug is made by a :class:`Prober` whose ``probe`` raises for one URL; every
other monitor probes a real local target. Real clock: the database and sockets are real.
"""

from __future__ import annotations

import time
from functools import partial

import pytest
import trio

from engine import (
    Backoff,
    EngineSettings,
    Intensity,
    Prober,
    ProbeResult,
    ProbeSpec,
    SupervisorEscalation,
    run_engine,
)
from store import Database, StoreSettings, run_store_writer
from tests.store.helpers import new_monitor
from tests.targets import HttpTarget

CRASH_URL = "http://127.0.0.1:9/crash"
TINY_BACKOFF = Backoff(min_seconds=0.01, max_seconds=0.05, random_factor=0.0)


class BuggyProber(Prober):
    """Probes normally, but raises for :data:`CRASH_URL`, as a bug in probe code would."""

    async def probe(self, spec: ProbeSpec) -> ProbeResult:
        if spec.url == CRASH_URL:
            raise RuntimeError("a bug in the probe")
        return await super().probe(spec)


async def add_monitor(db: Database, url: str) -> str:
    record = await new_monitor(
        db,
        created=int(time.time()),
        url=url,
        type="http",
        interval_seconds=1,
        timeout_seconds=1,
        failure_threshold=2,
    )
    return record.id


async def test_crashing_probe_restarts_its_actor_and_spares_the_others(
    db: Database, http_target: HttpTarget
) -> None:
    with trio.fail_after(20):
        healthy = await add_monitor(db, http_target.url("/healthy"))
        crasher = await add_monitor(db, CRASH_URL)
        settings = EngineSettings(
            shard_count=1,
            monitor_intensity=Intensity(max_restarts=100, period_seconds=60),
            monitor_backoff=TINY_BACKOFF,
        )
        async with trio.open_nursery() as nursery:
            writer = await nursery.start(
                partial(run_store_writer, db, StoreSettings(batch_age_seconds=0.05))
            )
            engine = await nursery.start(run_engine, db, writer, BuggyProber(), settings)
            await trio.sleep(4.5)
            shard = engine.shards[0].supervisor
            assert shard is not None
            info = shard.child_info(crasher)
            assert info is not None and info.restarts >= 2
            assert "a bug in the probe" in (info.last_failure or "")
            assert shard.child_info(healthy) is not None
            assert shard.child_info(healthy).restarts == 0  # type: ignore[union-attr]
            arrivals = [r.at for r in http_target.requests if r.path == "/healthy"]
            assert len(arrivals) >= 4
            # Still on its 1 s grid: every arrival within 0.25 s of a whole second after
            # the first (a late one does not shift the next), none skipped or doubled.
            offsets = [at - arrivals[0] for at in arrivals]
            assert all(abs(o - round(o)) < 0.25 for o in offsets), offsets
            assert [round(o) for o in offsets] == list(range(len(offsets))), offsets
            nursery.cancel_scope.cancel()


async def test_restart_intensity_escalates_past_the_engine(db: Database) -> None:
    with trio.fail_after(30):
        await add_monitor(db, CRASH_URL)
        settings = EngineSettings(
            shard_count=1,
            monitor_intensity=Intensity(max_restarts=1, period_seconds=60),
            monitor_backoff=TINY_BACKOFF,
            shard_intensity=Intensity(max_restarts=1, period_seconds=60),
        )
        async with trio.open_nursery() as nursery:
            writer = await nursery.start(run_store_writer, db)
            started = trio.current_time()
            with pytest.raises(SupervisorEscalation) as raised:
                await run_engine(db, writer, BuggyProber(), settings)
            # shard-0 escalated twice (two monitor crashes each); the engine tolerated
            # one shard restart and escalated the second.
            assert raised.value.supervisor_name == "engine"
            assert raised.value.child_id == "shard-0"
            assert isinstance(raised.value.__cause__, SupervisorEscalation)
            assert trio.current_time() - started < 10
            nursery.cancel_scope.cancel()
