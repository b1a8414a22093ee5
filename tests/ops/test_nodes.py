"""Several real ``uptrio serve`` processes on one Postgres (docs/several-nodes.md): every
monitor is probed by exactly one node (the target counts the arrivals per monitor's path), a
joining node gets half the buckets, and a node killed with SIGKILL has its monitors probed
again by the other within the lease plus one interval, with no check stored twice; ``uptrio
nodes list`` shows the split.

Both nodes use the session's embedded Postgres (a fresh database, ``--database-url``),
data directories of their own, one JWT secret, and 2 s leases; the monitors (http, every
second, on a local target) are inserted before the nodes start. Loopback only.
"""

from __future__ import annotations

import itertools
import re
import signal
import subprocess
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import trio

from store import Database, accounts
from tests.ops.helpers import NewMonitor, insert_monitors, scrape
from tests.targets import HttpTarget
from tests.web.helpers import CLI, ROOT, service_env

_LEASE = 2.0
_BASES: dict[str, str] = {}
"""Each node's base URL, by name (filled by :func:`_serve`)."""


def _command(data_dir: Path, database_url: str, name: str, *extra: str) -> list[str]:
    return [
        *CLI, "serve", "--host", "127.0.0.1", "--port", "0", "--data-dir", str(data_dir),
        "--database-url", database_url, "--shutdown-seconds", "2", "--node-name", name,
        "--lease-seconds", str(_LEASE), "--no-webhooks", *extra,
    ]  # fmt: skip


async def _serve(tmp: Path, database_url: str, name: str, *extra: str) -> trio.Process:
    """Start node ``name`` (``extra``: more flags of ``uptrio serve``); return once it
    listens (its URL in :data:`_BASES`)."""
    env = service_env()
    env["UPTRIO_JWT_SECRET"] = "nodes-test-secret"
    process = await trio.lowlevel.open_process(
        _command(tmp / name, database_url, name, *extra),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd=ROOT,
    )
    assert process.stdout is not None
    out = ""
    while not (found := re.search(r"listening on (http://127\.0\.0\.1:\d+)", out)):
        chunk = await process.stdout.receive_some(4096)
        assert chunk, out
        out += chunk.decode()
    _BASES[name] = found.group(1)
    return process


async def _held(db: Database) -> dict[str, int]:
    async def fetch(connection: Any) -> dict[str, int]:
        rows = await connection.fetch(
            "SELECT node, count(*) AS n FROM bucket_leases "
            "WHERE node IS NOT NULL AND expires_at > now() GROUP BY node"
        )
        return {r["node"]: r["n"] for r in rows}

    return await db.run(fetch)


async def _wait_held(db: Database, wanted: dict[str, int]) -> None:
    while await _held(db) != wanted:
        await trio.sleep(0.1)


async def _stored_at_most_once(db: Database, target: HttpTarget) -> None:
    """Every monitor has at most as many checks stored as probes its target saw, counting
    arrivals less than 0.5 s apart (two nodes probing one grid point) once: no probe is
    stored twice, and no two nodes both store the same grid point."""

    async def fetch(connection: Any) -> dict[str, int]:
        rows = await connection.fetch(
            "SELECT m.url, count(c.id) AS n FROM monitors m "
            "LEFT JOIN checks c ON c.monitor_id = m.id GROUP BY m.url"
        )
        return {r["url"]: r["n"] for r in rows}

    stored = await db.run(fetch)
    for url, count in stored.items():
        times = sorted(r.at for r in target.requests if target.url(r.path) == url)
        points = sum(1 for i, t in enumerate(times) if i == 0 or t - times[i - 1] >= 0.5)
        assert count <= points, (url, count, times)


async def _account_id(connection: Any) -> str:
    return str(await connection.fetchval("SELECT id FROM accounts"))


@asynccontextmanager
async def _two_nodes(
    tmp: Path, database_url: str, db: Database, *extra: str
) -> AsyncIterator[tuple[trio.Process, trio.Process]]:
    """Node ``a`` (all 256 buckets), then node ``b`` (both with the flags ``extra``);
    yields once they hold 128 each (the buckets moved to the new node); kills what is
    left on exit."""
    started: list[trio.Process] = []
    try:
        with trio.fail_after(30):
            started.append(await _serve(tmp, database_url, "a", *extra))
            await _wait_held(db, {"a": 256})
            started.append(await _serve(tmp, database_url, "b", *extra))
            await _wait_held(db, {"a": 128, "b": 128})
        yield started[0], started[1]
    finally:
        for process in started:
            if process.returncode is None:
                process.send_signal(signal.SIGCONT)
                process.kill()
            with trio.CancelScope(shield=True):
                await process.wait()


async def _setup(db: Database, target: HttpTarget) -> list[str]:
    """Account ``default`` and 40 http monitors (every second, one path each); the paths."""
    await db.transaction(
        accounts.create_first_token, "default", ["monitors.read"], now=1, current_version="v1"
    )
    account = await db.run(_account_id)
    paths = [f"/m{i}" for i in range(40)]
    await db.transaction(
        insert_monitors,
        account,
        [NewMonitor(url=target.url(p), type="http", failure_threshold=1) for p in paths],
    )
    return paths


async def test_two_nodes_split_the_monitors_and_one_takes_over_after_a_sigkill(
    tmp_path: Path, database_url: str, db: Database, nursery: trio.Nursery
) -> None:
    target = HttpTarget()
    await nursery.start(target.run)
    paths = await _setup(db, target)
    async with _two_nodes(tmp_path, database_url, db) as (a, b):
        with trio.fail_after(60):
            listed = await trio.run_process(
                [*CLI, "nodes", "list", "--database-url", database_url],
                capture_stdout=True,
                env=service_env(),
                cwd=ROOT,
            )
            rows = [line.split() for line in listed.stdout.decode().splitlines()]
            head = ["NAME", "BUCKETS", "MONITORS", "HEARTBEATS", "STATE", "RENEWED"]
            assert rows[0][:6] == head
            assert [(r[0], r[1], r[4]) for r in rows[1:]] == [
                ("a", "128", "live"),
                ("b", "128", "live"),
            ]
            assert sum(int(r[2]) for r in rows[1:]) == len(paths)  # each runs on one node
            await trio.sleep(1.5)  # the moved actors are on their grid

            seen = len(target.requests)
            await trio.sleep(4.0)
            counts = Counter(r.path for r in target.requests[seen:])
            # every second by one node: 4 (3 to 5 at the window's edges); two: 8
            assert set(counts) == set(paths)
            assert all(3 <= counts[p] <= 5 for p in paths), counts

            a.kill()  # SIGKILL: no hand-over; b takes a's buckets once they expire
            await a.wait()
            killed = trio.current_time()
            await _wait_held(db, {"b": 256})
            taken = trio.current_time() - killed
            assert taken <= _LEASE + 1.0, taken  # expiry + one renewal of b
            await trio.sleep(2.0)
            after = {p: [r.at for r in target.requests if r.path == p] for p in paths}
            # the lease + one interval (1 s) from the kill, with 0.5 s for loading
            waits = [min(t for t in times if t > killed) - killed for times in after.values()]
            assert max(waits) <= _LEASE + 1.0 + 0.5, waits
            # a monitor added behind the engines' backs: its owner finds it by reconciling
            # (every 5 s) and probes it at once
            account = await db.run(_account_id)
            added = target.url("/added")
            await db.transaction(insert_monitors, account, [NewMonitor(url=added, type="http")])
            with trio.fail_after(5.0 + 1.0):
                while not any(r.path == "/added" for r in target.requests):
                    await trio.sleep(0.05)
            b.send_signal(signal.SIGTERM)
            assert await b.wait() == 0  # every check it probed is stored
            assert await _held(db) == {}  # a graceful stop gives every bucket back
            await _stored_at_most_once(db, target)


async def test_a_node_stopped_past_its_lease_stores_nothing_for_the_buckets_it_lost(
    tmp_path: Path, database_url: str, db: Database, nursery: trio.Nursery
) -> None:
    target = HttpTarget()
    await nursery.start(target.run)
    await _setup(db, target)
    async with _two_nodes(tmp_path, database_url, db) as (a, b):
        with trio.fail_after(60):
            a.send_signal(signal.SIGSTOP)  # a long pause: its leases lapse, b takes them
            await _wait_held(db, {"b": 256})
            await trio.sleep(1.0)
            resumed = trio.current_time()
            a.send_signal(signal.SIGCONT)  # its actors wake up overdue, past its lease
            await trio.sleep(2.0)
            # a knows its lease lapsed on its own clock: it probes nothing until it has
            # renewed and learned what it lost, so no monitor is probed by both nodes
            times: dict[str, list[float]] = {}
            for r in target.requests:
                if r.at >= resumed - 0.5:
                    times.setdefault(r.path, []).append(r.at)
            doubled = {p: t for p, t in times.items() if min(_steps(t), default=1.0) < 0.5}
            assert not doubled, doubled
            assert await _metric(_BASES["a"], "uptrio_checks_withheld_total") > 0
            assert (await _held(db))["b"] >= 128  # a rejoined with new epochs, or none yet
            for process in (a, b):
                process.send_signal(signal.SIGTERM)
                assert await process.wait() == 0
            await _stored_at_most_once(db, target)


def _steps(times: list[float]) -> list[float]:
    """The gaps between consecutive arrivals, seconds."""
    ordered = sorted(times)
    return [later - earlier for earlier, later in itertools.pairwise(ordered)]


async def _metric(base: str, name: str) -> float:
    async with httpx.AsyncClient(base_url=base, timeout=5) as http:
        text = (await http.get("/metrics")).text
    return scrape(text)[(name, ())]
