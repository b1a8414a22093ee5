"""Regions in a running tree (docs/several-nodes.md, Regions): three nodes in one process
on the test's database, two in ``eu`` and one in ``us``, each the real tree
(web.process.service) with its lease actor, engine and fenced store, and a prober without
I/O recording what it probes. A monitor with ``regions`` ``[eu, us]`` is probed on every
interval by exactly one node of each region, and each one's checks pass the fence (they
carry their region's lease); a monitor without ``regions`` by exactly one node, as
before; a monitor of a region with no node by none. Real clock; no sockets but the
database's.
"""

from __future__ import annotations

import time
from contextlib import AsyncExitStack

import trio

from engine import EngineSettings, LeaseSettings
from store import Connection, Database, StoreSettings, accounts, leases
from tests.ops.helpers import NewMonitor, RecordingProber, insert_monitors, until
from web.process.service import ServiceSettings, open_service

NODES = {"a": "eu", "b": "eu", "c": "us"}


async def _set_regions(connection: Connection, regions: dict[str, list[str]]) -> None:
    for monitor_id, names in regions.items():
        await connection.execute(
            "UPDATE monitors SET regions = $2 WHERE id = $1", monitor_id, names
        )


async def _checks(connection: Connection, monitor_id: str) -> int:
    return int(
        await connection.fetchval("SELECT count(*) FROM checks WHERE monitor_id = $1", monitor_id)
    )


async def test_a_regional_monitor_runs_on_one_node_of_each_of_its_regions(db: Database) -> None:
    with trio.fail_after(40):
        account = await db.transaction(accounts.ensure_account, "acme", int(time.time()))
        urls = {"both": "10.0.0.1:80", "anywhere": "10.0.0.2:80", "nowhere": "10.0.0.3:80"}
        ids = dict(
            zip(
                urls,
                await db.transaction(
                    insert_monitors, account.id, [NewMonitor(url=u) for u in urls.values()]
                ),
                strict=True,
            )
        )
        await db.transaction(_set_regions, {ids["both"]: ["eu", "us"], ids["nowhere"]: ["ap"]})
        probers = {name: RecordingProber() for name in NODES}
        async with AsyncExitStack() as stack:
            services = {}
            for name, region in NODES.items():
                settings = ServiceSettings(
                    engine=EngineSettings(shard_count=2),
                    store=StoreSettings(batch_age_seconds=0.05),
                    leases=LeaseSettings(node_name=name, lease_seconds=1.5, region=region),
                    shutdown_seconds=3,
                )
                services[name] = await stack.enter_async_context(
                    open_service(db, settings, prober=probers[name])
                )
            # the shares settle: buckets above a share are handed over 32 a renewal
            settled = {"a": 128, "b": 128, "c": 256}  # each one's region's share

            def split() -> bool:
                for name, service in services.items():
                    holding = service.metrics.holding
                    assert holding is not None
                    regional = sum(slot >= leases.BUCKETS for slot in holding.held)
                    anywhere = len(holding.held) - regional
                    if regional != settled[name] or anywhere > 86:
                        return False
                return True

            await until(split, "shares settled", seconds=15)
            for prober in probers.values():
                prober.calls.clear()
            await trio.sleep(3.0)
            probed = {
                key: {name: len(p.calls[url]) for name, p in probers.items() if p.calls[url]}
                for key, url in urls.items()
            }
            for service in services.values():
                await service.writer.flush()
            stored = await db.run(_checks, ids["both"])

        # [eu, us]: one eu node (a or b, never both) and the us node, every second
        assert set(probed["both"]) in ({"a", "c"}, {"b", "c"}), probed
        assert all(2 <= n <= 4 for n in probed["both"].values()), probed
        # no regions: exactly one node of any region
        assert len(probed["anywhere"]) == 1, probed
        # a region with no node: nobody
        assert probed["nowhere"] == {}, probed
        # every regional check passed the fence under its region's lease
        refused = sum(s.store.statistics.fenced_refused for s in services.values())
        assert refused == 0
        assert stored >= sum(probed["both"].values())
