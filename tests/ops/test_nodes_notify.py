"""Commands and pings made through one node reach the owner of the bucket within a second
(docs/several-nodes.md, Changes made through another node, Pings on any node), with two real
``uptrio serve`` processes on one Postgres (the fixture of ``tests/ops/test_nodes.py``: 2 s
leases, 40 http monitors every second on a local target that counts arrivals per monitor's
path).

Without ``LISTEN``/``NOTIFY`` these changes would reach the owner only by its
reconciliation, every 5 s: each test's window is shorter than that. A node added: the
buckets moving from the first node to the new one leave no monitor unprobed for longer
than one interval beyond its own. Loopback only.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import trio

from store import Database, accounts, leases
from tests.ops.test_nodes import _BASES, _setup, _two_nodes
from tests.targets import HttpTarget
from web.http.auth import issue_token
from web.http.versioning import CURRENT_VERSION
from web.routes import PERMISSIONS

_SECRET = b"nodes-test-secret"  # the nodes' UPTRIO_JWT_SECRET (tests/ops/test_nodes.py)
_NOTIFIED_SECONDS = 1.0
"""How soon a change made through one node must be in effect on the owner, seconds."""


async def _client(db: Database, node: str) -> httpx.AsyncClient:
    """An API client of node ``node``, with a token of account ``default`` that may do
    everything."""
    now = int(time.time())
    _, token = await db.transaction(
        accounts.create_token,
        "default",
        list(PERMISSIONS),
        now=now,
        expires_at=None,
        current_version=CURRENT_VERSION,
    )
    jwt = issue_token(_SECRET, token.id, now=now, expires_at=None)
    headers = {"Authorization": f"Bearer {jwt}"}
    return httpx.AsyncClient(base_url=_BASES[node], headers=headers, timeout=10)


async def _buckets_of(db: Database, node: str) -> set[int]:
    async def fetch(connection: Any) -> set[int]:
        rows = await connection.fetch(
            "SELECT bucket FROM bucket_leases WHERE node = $1 AND expires_at > now()", node
        )
        return {r["bucket"] for r in rows}

    return await db.run(fetch)


async def _monitor_ids(db: Database) -> dict[str, str]:
    """Monitor id by URL."""

    async def fetch(connection: Any) -> dict[str, str]:
        return {r["url"]: r["id"] for r in await connection.fetch("SELECT id, url FROM monitors")}

    return await db.run(fetch)


async def _checks_started_after(connection: Any, monitor_id: str, second: int) -> int:
    """The checks of ``monitor_id`` whose probe started (``created``, epoch seconds) in a
    later second than ``second``."""
    return int(
        await connection.fetchval(
            "SELECT count(*) FROM checks WHERE monitor_id = $1 AND created > $2",
            monitor_id,
            second,
        )
    )


@asynccontextmanager
async def _cluster(
    tmp: Path, database_url: str, db: Database, nursery: trio.Nursery
) -> AsyncIterator[tuple[HttpTarget, list[str]]]:
    """A target, 40 monitors on it (their paths), and nodes a and b holding 128 buckets
    each."""
    target = HttpTarget()
    await nursery.start(target.run)
    paths = await _setup(db, target)
    async with _two_nodes(tmp, database_url, db):
        yield target, paths


async def _paths_on(
    db: Database, target: HttpTarget, paths: list[str], node: str
) -> tuple[dict[str, str], list[str]]:
    """Monitor ids by URL, and the paths of the monitors node ``node`` runs."""
    held = await _buckets_of(db, node)
    ids = await _monitor_ids(db)
    return ids, [p for p in paths if leases.bucket_of(ids[target.url(p)]) in held]


def _arrivals(target: HttpTarget, path: str, after: float, before: float = float("inf")) -> int:
    return sum(1 for r in target.requests if r.path == path and after < r.at <= before)


async def test_a_node_added_then_changes_and_pings_through_it_reach_the_owner_in_a_second(
    tmp_path: Path, database_url: str, db: Database, nursery: trio.Nursery
) -> None:
    async with _cluster(tmp_path, database_url, db, nursery) as (target, paths):
        with trio.fail_after(60):
            owned_by_a = await _buckets_of(db, "a")
            ids, on_a = await _paths_on(db, target, paths, "a")
            patched, paused, deleted = on_a[:3]
            await trio.sleep(1.5)  # the moved actors are on their grid
            async with await _client(db, "b") as b:
                # PATCH through b: interval 1 s -> 3 s on a
                response = await b.patch(
                    f"/monitors/{ids[target.url(patched)]}", json={"interval_seconds": 3}
                )
                assert response.status_code == 200, response.text
                patched_at = trio.current_time()
                # pause and delete through b: a starts no probe of them after a second
                response = await b.post(f"/monitors/{ids[target.url(paused)]}/pause")
                assert response.status_code == 200, response.text
                paused_at = trio.current_time()
                paused_second = int(time.time())  # epoch seconds of the pause response
                response = await b.delete(f"/monitors/{ids[target.url(deleted)]}")
                assert response.status_code == 204, response.text
                deleted_at = trio.current_time()
                # a monitor created through b in a bucket a holds: a probes it at once
                created_at, created_path = await _create_on(b, target, owned_by_a)
                # a ping sent to b of a heartbeat a runs
                await _ping_through(b, owned_by_a)
                await trio.sleep_until(patched_at + 5.0)
            settled = patched_at + _NOTIFIED_SECONDS
            # every 3 s from a second after the PATCH: 1 or 2 in 3.9 s (every 1 s: 4)
            assert _arrivals(target, patched, settled, settled + 3.9) <= 2
            assert _arrivals(target, paused, paused_at + _NOTIFIED_SECONDS) == 0
            # nor is a check stored that started after the pause response (a probe a started
            # before it was told is refused by the store). Checks are stamped to the second,
            # so only a later second is surely after the response: a probe started in the
            # pause's own second before the pause committed, and stored by a batch whose
            # statement began before that commit, started before the response and may be
            # stored (docs/several-nodes.md, A pause through another node; the store's
            # refusal of the pause's own second is tested in
            # tests/store/test_check_batches.py).
            after = await db.run(_checks_started_after, ids[target.url(paused)], paused_second)
            assert after == 0
            assert _arrivals(target, deleted, deleted_at + _NOTIFIED_SECONDS) == 0
            first = min(r.at for r in target.requests if r.path == created_path)
            assert first - created_at <= _NOTIFIED_SECONDS + 1.0  # one interval
            # the control: every other monitor still probed every second
            others = [p for p in paths if p not in (patched, paused, deleted)]
            for path in others:
                assert _arrivals(target, path, paused_at, paused_at + 3.5) >= 3, path
            _assert_moved_without_a_gap(target, others, [p for p in others if p not in on_a])


def _assert_moved_without_a_gap(
    target: HttpTarget, paths: Sequence[str], moved: Sequence[str]
) -> None:
    """Node b added (the cluster's start): no monitor was probed by both nodes (no two
    probes under half an interval apart); the monitors that stayed on a missed no grid
    point (every second: under 1.5 s between two probes); and those whose buckets moved
    to b (``moved``, some) missed at most the one point of their hand-over, which happens
    only when the hand-over took longer than a third of an interval (docs/several-nodes.md,
    "Buckets handed over at once, and without a gap": on a quiet machine it is quicker)."""
    assert moved
    gaps = _gaps(target, paths)
    shortest = min(min(g) for g in gaps.values())
    assert shortest >= 0.5, shortest
    stayed = [max(g) for p, g in gaps.items() if p not in moved]
    assert max(stayed) < 1.5, stayed
    skipped = {p: [x for x in gaps[p] if x >= 1.5] for p in moved}
    assert all(len(s) <= 1 and max(s, default=0) < 2.5 for s in skipped.values()), skipped


async def _create_on(
    api: httpx.AsyncClient, target: HttpTarget, buckets: set[int]
) -> tuple[float, str]:
    """Create monitors through ``api`` until one's bucket is in ``buckets``; delete the
    others at once. Its creation time (trio clock, seconds) and path."""
    for attempt in range(40):
        path = f"/created-{attempt}"
        body = {
            "name": path,
            "url": target.url(path),
            "type": "http",
            "interval_seconds": 1,
            "timeout_seconds": 1,
        }
        response = await api.post("/monitors", json=body)
        assert response.status_code == 201, response.text
        created_at = trio.current_time()
        monitor_id = response.json()["id"]
        if leases.bucket_of(monitor_id) in buckets:
            return created_at, path
        assert (await api.delete(f"/monitors/{monitor_id}")).status_code == 204
    raise AssertionError("no monitor landed in the other node's buckets")


async def _ping_through(b: httpx.AsyncClient, owned_by_a: set[int]) -> None:
    """Through node ``b``: create a heartbeat that a runs, ping it (up within a second),
    ping its /fail (down within a second); an unknown key is 404."""
    for _attempt in range(40):
        response = await b.post("/heartbeats", json={"name": "job", "period_seconds": 60})
        assert response.status_code == 201, response.text
        heartbeat = response.json()
        if leases.bucket_of(heartbeat["id"]) in owned_by_a:
            break
    else:
        raise AssertionError("no heartbeat landed in a's buckets")
    assert heartbeat["status"] == "pending"
    key = heartbeat["ping_url"].rsplit("/", 1)[1]
    unknown = await b.get(f"/ping/{'0' * 32}")
    assert unknown.status_code == 404, unknown.text
    assert unknown.json()["error"]["code"] == "resource_missing"
    pinged = await b.get(f"/ping/{key}")  # b does not run it
    assert pinged.status_code == 200, pinged.text
    sent = trio.current_time()
    status = ""
    while status != "up":
        assert trio.current_time() - sent <= _NOTIFIED_SECONDS + 0.5, status
        await trio.sleep(0.05)
        response = await b.get(f"/heartbeats/{heartbeat['id']}")
        status = response.json()["status"]
    pings = (await b.get(f"/heartbeats/{heartbeat['id']}/pings")).json()["data"]
    assert [p["kind"] for p in pings] == ["success"]  # stored once
    failed = await b.get(f"/ping/{key}/fail")
    assert failed.status_code == 200, failed.text
    with trio.fail_after(_NOTIFIED_SECONDS + 0.5):
        while (await b.get(f"/heartbeats/{heartbeat['id']}")).json()["status"] != "down":
            await trio.sleep(0.05)


def _gaps(target: HttpTarget, paths: Sequence[str]) -> dict[str, list[float]]:
    """Per path, the times between consecutive arrivals, seconds."""
    gaps: dict[str, list[float]] = {}
    for path in paths:
        times = sorted(r.at for r in target.requests if r.path == path)
        gaps[path] = [b - a for a, b in itertools.pairwise(times)]
    return gaps
