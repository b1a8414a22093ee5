"""The nodes of ``uptrio bench --nodes N`` (`bench.cluster`) and what the bench asks
their database: each node's command line, starting them, waiting until the buckets are
split and every node is ready, which node holds each monitor's bucket, and the gaps and
doubles among stored checks. The service is seen as a user sees it (the ``uptrio``
command, HTTP, SQL on ``bucket_leases``, ``monitors`` and ``checks``).
"""

from __future__ import annotations

import dataclasses
import math
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import httpx
import trio

from .metrics import Labels, MetricsSnapshot
from .plan import BenchParams
from .service import BenchDatabase, ServiceProcess, run_service_process, service_command

__all__ = [
    "BUCKETS",
    "DEFAULT_LEASE_SECONDS",
    "held_buckets",
    "merge_snapshots",
    "node_command",
    "node_region",
    "owners",
    "start_nodes",
    "stored_gaps",
    "wait_ready",
    "wait_split",
]

BUCKETS = 256
"""Buckets the monitors are split into (docs/several-nodes.md, Buckets)."""

DEFAULT_LEASE_SECONDS = 10.0
"""``uptrio serve --lease-seconds``'s default (docs/several-nodes.md)."""


def node_command(
    params: BenchParams, data_dir: Path, database_url: str, number: int, dns_port: int
) -> list[str]:
    """``uptrio serve`` of node ``number`` (1 to N): one service's command
    (`service_command`) on ``database_url``, with ``--node-name node-<number>``, its own
    data directory and the run's ``--lease-seconds``; with ``params.regions`` its region
    (`node_region`), with ``params.probe_source_addresses`` ``--probe-source-address
    127.0.0.<number + 1>``."""
    command = service_command(
        dataclasses.replace(params, database_url=database_url),
        data_dir / f"node-{number}",
        dns_port,
    )
    command += ["--node-name", f"node-{number}"]
    if params.lease_seconds is not None:
        command += ["--lease-seconds", f"{params.lease_seconds:g}"]
    if params.regions:
        command += ["--region", node_region(number, params.regions)]
    if params.probe_source_addresses:
        command += ["--probe-source-address", f"127.0.0.{number + 1}"]
    return command


def node_region(number: int, regions: int) -> str:
    """The region of node ``number`` (1 to N) among ``regions``: ``r1`` to ``rR`` in
    turn (node 1 in r1, node R + 1 in r1 again)."""
    return f"r{(number - 1) % regions + 1}"


def merge_snapshots(snapshots: list[MetricsSnapshot]) -> MetricsSnapshot:
    """One snapshot summing every sample of ``snapshots`` by (name, labels): counters,
    gauges and histogram buckets of the nodes added up, as the whole cluster's.
    Missing when any is."""
    at = max(s.at for s in snapshots)
    broken = [s for s in snapshots if s.missing]
    if broken:
        return MetricsSnapshot(at=at, missing=True, error=broken[0].error)
    samples: dict[tuple[str, Labels], float] = {}
    for snapshot in snapshots:
        for key, value in snapshot.samples.items():
            samples[key] = samples.get(key, 0.0) + value
    return MetricsSnapshot(at=at, samples=samples)


async def held_buckets(bench_db: BenchDatabase) -> dict[str, int]:
    """Unexpired buckets per node (``bucket_leases``)."""
    rows = await _rows(
        bench_db,
        "SELECT node, count(*) AS n FROM bucket_leases "
        "WHERE node IS NOT NULL AND expires_at > now() GROUP BY node",
        timeout_seconds=10.0,
    )
    return {str(r["node"]): int(r["n"]) for r in rows}


async def wait_split(bench_db: BenchDatabase, names: list[str], seconds: float) -> dict[str, int]:
    """Wait (at most ``seconds``) until every bucket is held and every node of ``names``
    holds what the fair share leaves it: a node takes up to ``ceil(256 / N)``
    (docs/several-nodes.md, Leases), so the last may hold ``256 - (N - 1) * ceil(256 / N)``
    (84 of 256 with 3 nodes); the split.

    Raises:
        trio.TooSlowError: not split in time.
    """
    share = BUCKETS - (len(names) - 1) * math.ceil(BUCKETS / len(names))
    with trio.fail_after(seconds):
        while True:
            held = await held_buckets(bench_db)
            if sum(held.values()) == BUCKETS and all(held.get(n, 0) >= share for n in names):
                return held
            await trio.sleep(0.2)


async def wait_ready(base_url: str, seconds: float) -> None:
    """Wait (at most ``seconds``) for ``/readyz`` to answer 200."""
    async with httpx.AsyncClient(base_url=base_url, timeout=5.0) as client:
        with trio.fail_after(seconds):
            while True:
                if (await client.get("/readyz")).status_code == 200:
                    return
                await trio.sleep(0.2)


async def _rows(
    bench_db: BenchDatabase, sql: str, *args: Any, timeout_seconds: float = 60.0
) -> list[Any]:
    """The rows of one query (at most ``timeout_seconds``)."""

    async def query(connection: Any) -> list[Any]:
        return list(await connection.fetch(sql, *args))

    return await bench_db.run(query, timeout_seconds=timeout_seconds)


async def owners(
    bench_db: BenchDatabase, ids: dict[int, str], region: str | None = None
) -> dict[int, str]:
    """Monitor index -> the node whose unexpired lease holds its bucket now: in
    ``region``'s pool (``--regions``: the monitors run under their regions' leases), or
    None: the any-region pool."""
    index_of = {monitor_id: index for index, monitor_id in ids.items()}
    rows = await _rows(
        bench_db,
        "SELECT m.id, l.node FROM monitors m JOIN pool_leases l "
        "ON l.region = coalesce($1::text, '') AND l.bucket = m.bucket "
        "AND l.node IS NOT NULL AND l.expires_at > now()",
        region,
    )
    return {index_of[r["id"]]: str(r["node"]) for r in rows if r["id"] in index_of}


async def stored_gaps(
    bench_db: BenchDatabase,
    ids: dict[int, str],
    interval: float,
    window_start: float,
    region: str | None = None,
) -> tuple[dict[int, int], dict[int, int], dict[int, int]]:
    """Per monitor index: consecutive stored checks closer than half ``interval``, the
    later one in the window or after it, and the same over the whole run; the longest
    gap (seconds) ending at a check of the window or later. With ``region``, only that
    region's checks (``--regions``: each region probes every monitor).

    A check's ``created`` is whole seconds, so two checks of consecutive grid slots can
    share a second (at a 1-s interval, a slot at .995 s and the next probe 10 ms late;
    or a monitor taken over, checked at once and again at a grid point half an interval
    later). A pair counts when its ``created`` seconds differ by less than half an
    interval less one second (closer than half an interval whatever the rounding), or
    when both rows have the same second and the same response time (one probe's row
    written twice: two probes never take the same microseconds)."""
    index_of = {monitor_id: index for index, monitor_id in ids.items()}
    rows = await _rows(
        bench_db,
        "SELECT monitor_id, count(*) FILTER (WHERE twice) AS close_all, "
        "count(*) FILTER (WHERE twice AND created >= $2) AS close, "
        "max(gap) FILTER (WHERE created >= $2) AS longest FROM ("
        " SELECT monitor_id, created, gap, gap < $1::float8 - 1"
        "  OR (gap = 0 AND response_time_ms = previous_ms) AS twice FROM ("
        "  SELECT monitor_id, created, response_time_ms,"
        "   created - lag(created) OVER w AS gap, lag(response_time_ms) OVER w AS previous_ms"
        "  FROM checks WHERE $3::text IS NULL OR region = $3"
        "  WINDOW w AS (PARTITION BY monitor_id ORDER BY created, response_time_ms)) c) g "
        "GROUP BY monitor_id",
        interval / 2,
        math.ceil(window_start),
        region,
        timeout_seconds=300.0,
    )
    rows = [r for r in rows if r["monitor_id"] in index_of]  # the bench's monitors only
    close = {index_of[r["monitor_id"]]: int(r["close"]) for r in rows if r["close"]}
    close_all = {index_of[r["monitor_id"]]: int(r["close_all"]) for r in rows if r["close_all"]}
    longest = {
        index_of[r["monitor_id"]]: int(r["longest"]) for r in rows if r["longest"] is not None
    }
    return close, close_all, longest


async def start_nodes(
    stack: AsyncExitStack,
    params: BenchParams,
    bench_db: BenchDatabase,
    data_dir: Path,
    out_dir: Path,
    dns_port: int,
    env: dict[str, str],
) -> list[ServiceProcess]:
    """Node 1 (it applies the migrations), then the others; each stopped when
    ``stack`` closes (SIGTERM, then SIGKILL after 30 s)."""
    nodes = []
    for number in range(1, params.nodes + 1):
        command = node_command(params, data_dir, bench_db.url, number, dns_port)
        log = out_dir / f"service-{number}.log"
        nodes.append(await stack.enter_async_context(run_service_process(command, log, env)))
    return nodes
