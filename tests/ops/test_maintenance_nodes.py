"""A maintenance window made through one node acts on a monitor another node probes
(docs/maintenance.md, "When a window starts and ends", "Paused checks";
docs/several-nodes.md): two real ``uptrio serve`` processes on one Postgres (the fixture
of ``tests/ops/test_nodes.py``: 2 s leases), a monitor (http, every second,
``failure_threshold`` 1) whose bucket node ``b`` holds, every window made through node
``a``.

- A window with ``suppress_alerts``: the target fails inside it; ``b`` writes the down
  and opens nothing; at the end exactly one incident opens (by whichever node's walker
  claims the end, or ``b``'s next failed check: the two never both).
- A window with ``pause_checks``: ``b`` stops probing inside it (told through the change
  notification), and probes again after it by itself.

Loopback only.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import trio

from store import Database, accounts
from tests.ops.test_alert_failover import _owner
from tests.ops.test_maintenance_story import quiet_for
from tests.ops.test_nodes import _two_nodes
from tests.ops.test_nodes_notify import _client
from tests.targets import HttpTarget


async def _json(answer: httpx.Response, status: int = 200) -> Any:
    assert answer.status_code == status, answer.text
    return answer.json()


async def _monitor_of_b(http: httpx.AsyncClient, db: Database, target: HttpTarget) -> str:
    """A monitor whose bucket node ``b`` holds, made through ``a``; its id (the others
    made on the way are deleted)."""
    for i in range(40):
        made = await _json(
            await http.post(
                "/monitors",
                json={
                    "name": f"web {i}",
                    "url": target.url(f"/m{i}"),
                    "type": "http",
                    "interval_seconds": 1,
                    "timeout_seconds": 1,
                    "failure_threshold": 1,
                },
            ),
            201,
        )
        if await _owner(db, made["id"]) == "b":
            return str(made["id"])
        assert (await http.delete(f"/monitors/{made['id']}")).status_code == 204
    raise AssertionError("no bucket of b in 40 tries")


def _probes(target: HttpTarget, path: str) -> int:
    return sum(1 for r in target.requests if r.path == path)


async def test_a_window_made_through_one_node_acts_on_a_monitor_of_the_other(
    tmp_path: Path, database_url: str, db: Database, nursery: trio.Nursery
) -> None:
    target = HttpTarget()
    await nursery.start(target.run)
    await db.transaction(
        accounts.create_first_token, "default", ["monitors.read"], now=1, current_version="v1"
    )
    async with _two_nodes(tmp_path, database_url, db):
        http = await _client(db, "a")
        try:
            with trio.fail_after(60):
                monitor = await _monitor_of_b(http, db, target)
                path = f"/monitors/{monitor}"
                while (await _json(await http.get(path)))["status"] != "up":
                    await trio.sleep(0.1)
                url = (await _json(await http.get(path)))["url"]
                probed = "/" + url.rsplit("/", 1)[1]

                now = int(time.time())
                held = await _json(
                    await http.post(
                        "/maintenance-windows",
                        json={
                            "title": "switch",
                            "monitors": [monitor],
                            "starts_at": now,
                            "ends_at": now + 5,
                        },
                    ),
                    201,
                )
                await target.set_mode("error")
                while (body := await _json(await http.get(path)))["status"] != "down":
                    await trio.sleep(0.1)
                assert body["suppressed_by"] == {"type": "maintenance", "id": held["id"]}
                assert (await _json(await http.get("/incidents")))["data"] == []
                while time.time() < now + 7:  # past the end: one incident, then no more
                    await trio.sleep(0.2)
                incidents = (await _json(await http.get("/incidents")))["data"]
                assert [i["monitor"] for i in incidents] == [monitor]

                await target.set_mode("ok")
                now = int(time.time())
                await _json(
                    await http.post(
                        "/maintenance-windows",
                        json={
                            "title": "rack move",
                            "monitors": [monitor],
                            "starts_at": now,
                            "ends_at": now + 4,
                            "pause_checks": True,
                        },
                    ),
                    201,
                )
                while not (await _json(await http.get(path)))["in_maintenance"]:
                    await trio.sleep(0.1)
                # the walker's poll and b's notification: then nothing until the end
                before = await quiet_for(lambda: _probes(target, probed), 1.2, before=now + 3)
                await trio.sleep(max(0.0, now + 3.8 - time.time()))
                assert _probes(target, probed) == before  # b probes nothing inside
                while _probes(target, probed) < before + 2:  # and again after, by itself
                    await trio.sleep(0.1)
        finally:
            await http.aclose()
