"""``uptrio bench --nodes N``: the service phase of a run with N ``uptrio serve`` processes
on one Postgres (docs/several-nodes.md; docs/benchmarks.md, ``uptrio bench``).

Timeline of `cluster_phase` (wall clock; `bench.run` does the rest: targets, arrivals,
the report)::

    Postgres up ─ node-1 up ─ node-2..N up ─ buckets split ─ tokens ─ POST /monitors,
    spread over the nodes ─ warm-up ─┬──── window ────┬─ SIGTERM to every node
                                     quiet    ▲       quiet
                              (--kill-node K) SIGKILL node-K at the middle quiet instant

The bench starts the embedded Postgres itself (`open_bench_database`, in its data directory;
or uses ``--database-url``) and gives every node its URL, so no node owns the database and
any node may be killed. Node ``k`` is named ``node-k``, has its own data directory (and so
its own admin socket) and a port the OS picks; all share one ``UPTRIO_JWT_SECRET``
(docs/several-nodes.md, One secret per database). The run waits until every node holds its
share of the 256 buckets (``bucket_leases``) and answers ``/readyz`` 200.

What is measured, besides what one service's run measures (the `PhaseRecord` of the
whole, with each node's process as the CPU group ``service-k``): each node's ``/metrics``
and CPU at both ends of the window (a killed node: just before its kill), its memory,
which node held each monitor's bucket at the window's start and end (`ClusterRecord`),
and, from the store, pairs of checks of one monitor closer than half an interval
(stored twice) and the longest gap between a monitor's stored checks. `bench.cluster_report`
turns these into the report's ``nodes`` section; `bench.nodes` starts the nodes and
asks the database.
"""

from __future__ import annotations

import math
import secrets
import signal
import time
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import trio

from .analysis import phases_by_index, quiet_offset
from .api import ApiLatencies, CreateOutcome, TokenPool, create_monitors, read_load
from .display import Display
from .measure import (
    PhaseRecord,
    Sampler,
    next_quiet,
    server_version,
    sleep_until_wall,
    snapshot_cpu,
    stored_checks,
)
from .metrics import MetricsSnapshot, scrape
from .nodes import (
    BUCKETS,
    DEFAULT_LEASE_SECONDS,
    held_buckets,
    merge_snapshots,
    node_region,
    owners,
    start_nodes,
    stored_gaps,
    wait_ready,
    wait_split,
)
from .plan import BenchParams, MonitorPlan
from .procstats import CpuSnapshot, MemorySample, ProcessGroup
from .regions import RegionRecord, read_regions, region_names, wait_region_pools
from .run import RunExtension
from .service import (
    BenchDatabase,
    ServiceProcess,
    claim_secret,
    mint_tokens,
    open_bench_database,
)
from .targets import TargetSet

__all__ = ["ClusterRecord", "NodeRecord", "cluster_phase"]


@dataclass(slots=True)
class NodeRecord:
    """One node of a run: its name, pid, URL, log and command; its ``/metrics`` and CPU
    at the window's start and end (a killed node: just before the kill, ``killed_at``
    epoch seconds); memory idle and at its peak in the window (RSS); its exit code
    (-9 when killed)."""

    name: str
    pid: int
    base_url: str
    log: Path
    command: list[str]
    metrics: tuple[MetricsSnapshot, MetricsSnapshot] | None = None
    cpu: tuple[CpuSnapshot, CpuSnapshot] | None = None
    memory_idle: MemorySample | None = None
    memory_peak: MemorySample | None = None
    peak_rss_hwm: int | None = None
    killed_at: float | None = None
    exit_code: int | None = None


@dataclass(slots=True)
class ClusterRecord:
    """What `cluster_phase` measured beyond one service's `PhaseRecord`.

    Attributes:
        nodes: the `NodeRecord` of node 1 to N.
        lease_seconds: the nodes' lease, seconds.
        kill_node: the node killed (1 to N), or None.
        kill_at: the quiet instant it was killed at (epoch seconds), or None.
        buckets_taken_at: when the others held every bucket again after the kill
            (epoch seconds; None: not within three leases plus 10 s).
        split_seconds: from the first node's start to every node holding its share.
        buckets_at_start: buckets held per node at the window's start.
        owner_start, owner_end: monitor index -> the node holding its bucket at the
            window's start and end (a bucket held by none is left out).
        stored_close: monitor index -> pairs of consecutive stored checks closer than
            half an interval, the later one in the window or after (only monitors with
            one or more); ``stored_close_whole_run`` the same from the monitors'
            creation on (a created monitor is checked at once: a node that is not its
            owner and the owner could both).
        stored_longest_gap: monitor index -> longest time between two consecutive
            stored checks, the later one in the window (seconds; ``created`` is whole
            seconds).
        regions: with ``--regions``, the store's figures per region (`bench.regions`).
    """

    nodes: list[NodeRecord]
    lease_seconds: float
    kill_node: int | None = None
    kill_at: float | None = None
    buckets_taken_at: float | None = None
    split_seconds: float = 0.0
    buckets_at_start: dict[str, int] = field(default_factory=dict)
    owner_start: dict[int, str] = field(default_factory=dict)
    owner_end: dict[int, str] = field(default_factory=dict)
    stored_close: dict[int, int] = field(default_factory=dict)
    stored_close_whole_run: dict[int, int] = field(default_factory=dict)
    stored_longest_gap: dict[int, int] = field(default_factory=dict)
    regions: RegionRecord | None = None


async def _kill(
    cluster: ClusterRecord,
    node: ServiceProcess,
    groups: dict[str, ProcessGroup],
    bench_db: BenchDatabase,
) -> None:
    """At ``cluster.kill_at``: read the node's ``/metrics``, CPU and peak RSS, SIGKILL
    it, then wait until the other nodes hold every bucket (``buckets_taken_at``)."""
    number = cluster.kill_node
    assert number is not None and cluster.kill_at is not None
    record = cluster.nodes[number - 1]
    await sleep_until_wall(cluster.kill_at)
    async with httpx.AsyncClient(base_url=node.base_url) as client:
        after = await scrape(client, time.time())
    group = groups.pop(f"service-{number}")
    if record.metrics is not None:
        record.metrics = (record.metrics[0], after)
    if record.cpu is not None:
        record.cpu = (record.cpu[0], group.cpu(time.time()))
    record.peak_rss_hwm = group.peak_rss_bytes()
    node.process.send_signal(signal.SIGKILL)
    record.killed_at = time.time()
    others = [n.name for n in cluster.nodes if n.name != record.name]
    with trio.move_on_after(3 * cluster.lease_seconds + 10):
        while True:
            held = await held_buckets(bench_db)
            if sum(held.get(n, 0) for n in others) == BUCKETS:
                cluster.buckets_taken_at = time.time()
                return
            await trio.sleep(0.25)


async def cluster_phase(
    params: BenchParams,
    plans: list[MonitorPlan],
    targets: TargetSet,
    data_dir: Path,
    out_dir: Path,
    display: Display,
    nursery: trio.Nursery,
    extension: RunExtension | None,
) -> tuple[PhaseRecord, CreateOutcome, dict[int, str], list[str], str | None]:
    """The service phase of `bench.run.run_bench` with ``params.nodes`` nodes (module
    docstring); a `bench.run.ServicePhase`. The returned record's ``cluster`` is the
    `ClusterRecord`.

    Raises:
        ValueError: an ``extension`` (the webhooks bench runs one service only).
        RuntimeError: a node did not start (its log says why).
        trio.TooSlowError: the buckets were not split within 60 s plus five leases.
    """
    if extension is not None:
        raise ValueError("uptrio bench webhooks runs one service: --nodes 1")
    record = PhaseRecord(name="service", started_at=time.time())
    interval = float(params.interval_seconds)
    lease = params.lease_seconds or DEFAULT_LEASE_SECONDS
    env = {"UPTRIO_JWT_SECRET": secrets.token_hex(32)}
    display.set_phase(f"starting {params.nodes} nodes")
    async with (
        open_bench_database(data_dir, params.database_url, params.postgres_settings) as bench_db,
        AsyncExitStack() as stack,
    ):
        started = time.monotonic()
        if params.database_url:
            await claim_secret(data_dir / "node-1", bench_db.url, env)
        nodes = await start_nodes(
            stack, params, bench_db, data_dir, out_dir, targets.ports.dns, env
        )
        names = [f"node-{k}" for k in range(1, params.nodes + 1)]
        cluster = ClusterRecord(
            nodes=[
                NodeRecord(name, n.pid, n.base_url, n.log_path, n.command)
                for name, n in zip(names, nodes, strict=True)
            ],
            lease_seconds=lease,
            kill_node=params.kill_node,
        )
        record.cluster = cluster
        # With --regions, ownership and gaps are read in one region's pool and checks:
        # the killed node's (--kill-node), else r1's (docs/benchmarks.md, Regions).
        watched = node_region(params.kill_node or 1, params.regions) if params.regions else None
        display.set_phase("waiting for the buckets to split")
        await wait_split(bench_db, names, 60.0 + 5 * lease)
        if params.regions:
            await wait_region_pools(bench_db, region_names(params.regions), 60.0 + 5 * lease)
        for node in nodes:
            await wait_ready(node.base_url, 30.0)
        cluster.split_seconds = time.monotonic() - started
        groups = {
            f"service-{k}": ProcessGroup("service", n.pid, include_children=False)
            for k, n in enumerate(nodes, start=1)
        }
        postmaster = bench_db.postmaster_pid()
        if postmaster is not None:
            groups["postgres"] = ProcessGroup("postgres", postmaster)
        target_groups = {
            f"target-{k}": ProcessGroup("target", pid) for k, pid in enumerate(targets.pids())
        }
        pool_token, reader = await mint_tokens(data_dir / "node-1", bench_db.url, "bench", 2, env)
        pools = [TokenPool([pool_token])]
        await trio.sleep(0.5)
        record.memory_idle = {name: g.memory(pss=name == "postgres") for name, g in groups.items()}
        sampler = Sampler(record, groups, targets, display)
        nursery.start_soon(sampler.run, 24 * 3600.0)
        try:
            display.set_phase("creating monitors", total=len(plans))

            def progress(created: int) -> None:
                display.done = created

            urls = [n.base_url for n in nodes]
            creation = await create_monitors(urls, pools, plans, params, progress)
            ids = creation.ids
            phases = phases_by_index(ids, interval, len(plans))
            offset, gap = quiet_offset(phases, interval)
            record.quiet_gap_seconds = gap
            record.window_start = next_quiet(time.time() + params.warmup, offset, interval)
            record.window_end = record.window_start + params.window_seconds
            if params.kill_node is not None:
                cluster.kill_at = record.window_start + (params.window_intervals // 2) * interval
            display.set_phase("warm-up", ends_at=record.window_start)
            await sleep_until_wall(record.window_start - min(2.0, interval / 2))
            cluster.owner_start = await owners(bench_db, ids, watched)
            cluster.buckets_at_start = await held_buckets(bench_db)
            monitor_ids = [ids[p.index] for p in plans if p.index in ids]
            sampler.in_window = True
            await _window(
                record, cluster, nodes, groups, target_groups, bench_db, params, reader,
                monitor_ids, display,
            )  # fmt: skip
            sampler.in_window = False
            cluster.owner_end = await owners(bench_db, ids, watched)
            display.set_phase("stopping the nodes")
            stop_at = record.window_end
            if time.time() > record.window_end + gap / 2 - 0.002:
                stop_at = next_quiet(time.time(), offset, interval)
            await sleep_until_wall(stop_at)
            async with trio.open_nursery() as stopping:
                for node, node_record in zip(nodes, cluster.nodes, strict=True):
                    stopping.start_soon(_stop, node, node_record)
            record.stopped_at = time.time()
            # the largest exit status of a node that was not killed
            record.exit_code = max(
                abs(n.exit_code or 0) for n in cluster.nodes if n.killed_at is None
            )
        finally:
            sampler.stop()
        _sum_memory(record, cluster)
        display.set_phase("reading the store")
        record.stored_counts, record.stored_latency_ms = await stored_checks(
            bench_db, ids, record.window_start, record.window_end
        )
        record.stored_window_seconds = math.floor(record.window_end) - math.ceil(
            record.window_start
        )
        gaps = await stored_gaps(bench_db, ids, interval, record.window_start, watched)
        cluster.stored_close, cluster.stored_close_whole_run, cluster.stored_longest_gap = gaps
        if params.regions:
            cluster.regions = await read_regions(
                bench_db, monitor_ids, region_names(params.regions), record.window_start,
                record.window_end - record.window_start,
            )  # fmt: skip
        version = await bench_db.run(server_version)
    return record, creation, ids, nodes[0].command, version


async def _stop(node: ServiceProcess, node_record: NodeRecord) -> None:
    """SIGTERM a node still running and wait for it; record its exit code."""
    node.terminate()
    node_record.exit_code = await node.wait_stopped()


async def _window(
    record: PhaseRecord,
    cluster: ClusterRecord,
    nodes: list[ServiceProcess],
    groups: dict[str, ProcessGroup],
    target_groups: dict[str, ProcessGroup],
    bench_db: BenchDatabase,
    params: BenchParams,
    reader: str,
    monitor_ids: list[str],
    display: Display,
) -> None:
    """The measured window: every node's ``/metrics`` and CPU at both ends, the API
    read load on a node that is not killed, the kill in the middle (`_kill` removes the
    killed node's group from ``groups``, which the sampler shares)."""
    async with AsyncExitStack() as stack:
        clients = [
            await stack.enter_async_context(httpx.AsyncClient(base_url=n.base_url)) for n in nodes
        ]
        await sleep_until_wall(record.window_start)
        before = [await scrape(c, time.time()) for c in clients]
        cpu_start = snapshot_cpu(groups | target_groups)
        for k, node_record in enumerate(cluster.nodes, start=1):
            node_record.metrics = (before[k - 1], before[k - 1])
            node_record.cpu = (cpu_start[f"service-{k}"], cpu_start[f"service-{k}"])
        display.set_phase("measuring", ends_at=record.window_end)
        record.api = ApiLatencies()
        reading = 1 if cluster.kill_node == 1 else 0
        async with trio.open_nursery() as load:
            if cluster.kill_node is not None:
                victim = nodes[cluster.kill_node - 1]
                load.start_soon(_kill, cluster, victim, groups, bench_db)
            load.start_soon(
                read_load,
                nodes[reading].base_url,
                reader,
                monitor_ids,
                params.api_rps,
                params.window_seconds - 0.5,
                record.api,
            )
            await sleep_until_wall(record.window_end)
            cpu_end = snapshot_cpu(groups | target_groups)
            for k, node_record in enumerate(cluster.nodes, start=1):
                name = f"service-{k}"
                if node_record.killed_at is not None or name not in groups:
                    continue
                node_record.metrics = (before[k - 1], await scrape(clients[k - 1], time.time()))
                node_record.cpu = (cpu_start[name], cpu_end[name])
                node_record.peak_rss_hwm = groups[name].peak_rss_bytes()
            load.cancel_scope.cancel()  # a takeover not seen by now stays None
    record.metrics = (
        merge_snapshots([n.metrics[0] for n in cluster.nodes if n.metrics]),
        merge_snapshots([n.metrics[1] for n in cluster.nodes if n.metrics]),
    )
    record.cpu = {
        name: (cpu_start[name], cpu_end[name])
        for name in cpu_end
        if not name.startswith("service-")
    }
    for k, node_record in enumerate(cluster.nodes, start=1):
        if node_record.cpu is not None:
            record.cpu[f"service-{k}"] = node_record.cpu


def _sum_memory(record: PhaseRecord, cluster: ClusterRecord) -> None:
    """Each node's memory into its `NodeRecord`, and their sums as the ``service``
    group of ``record`` (RSS idle, the sum of the nodes' peaks, the sum of their
    peak RSS since start)."""
    idle = peak = hwm = 0
    for k, node in enumerate(cluster.nodes, start=1):
        node.memory_idle = record.memory_idle.get(f"service-{k}")
        node.memory_peak = record.memory_peak.get(f"service-{k}")
        idle += node.memory_idle.rss_bytes if node.memory_idle else 0
        peak += node.memory_peak.rss_bytes if node.memory_peak else 0
        hwm += node.peak_rss_hwm or 0
    record.memory_idle["service"] = MemorySample(idle, 0, len(cluster.nodes))
    record.memory_peak["service"] = MemorySample(peak, 0, len(cluster.nodes))
    record.peak_rss_hwm = {"service": hwm or None}
