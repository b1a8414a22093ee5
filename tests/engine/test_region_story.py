"""A monitor with regions through a real engine (docs/regions.md): the engine of region
``eu-west`` keeps that region's view, its checks record the region, and with a quorum of
1 its region's moves move the monitor, whose incident names the region.

Intervals are 1 s on a real clock: the checks are real I/O on 127.0.0.1.
"""

from __future__ import annotations

import pytest
import trio

from engine import Engine, EngineSettings, Prober, run_engine
from store import Database, StoreWriter
from tests.api import Api
from tests.engine.test_story import checks_of, wait_status
from tests.targets import TcpTarget

FAST = {"interval_seconds": 1, "timeout_seconds": 1, "failure_threshold": 1}


@pytest.fixture
async def engine(db: Database, nursery: trio.Nursery, writer: StoreWriter) -> Engine:
    settings = EngineSettings(shard_count=1, region="eu-west")
    engine: Engine = await nursery.start(run_engine, db, writer, Prober(), settings)
    return engine


async def test_the_nodes_region_keeps_its_view_and_moves_the_monitor(
    api: Api, tcp_target: TcpTarget
) -> None:
    with trio.fail_after(30):
        code, monitor, _ = await api.post(
            "/monitors",
            json={
                "name": "db",
                "url": f"tcp://127.0.0.1:{tcp_target.port}",
                "type": "tcp",
                "regions": ["eu-west", "us-east"],
                "region_quorum": 1,
                **FAST,
            },
        )
        assert code == 201, monitor
        mid = monitor["id"]
        up = await wait_status(api, mid, "up", seconds=4)
        assert up["region_status"] == {"eu-west": "up", "us-east": "pending"}
        assert {c["region"] for c in await checks_of(api, mid)} == {"eu-west"}
        await tcp_target.stop()
        down = await wait_status(api, mid, "down")
        assert down["region_status"]["eu-west"] == "down"
        code, listed, _ = await api.get("/incidents")
        assert code == 200
        [incident] = [i for i in listed["data"] if i["monitor"] == mid]
        assert incident["description"].startswith("Down in eu-west (1 of 2). ")
        await tcp_target.start()
        await wait_status(api, mid, "up")
