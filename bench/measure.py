"""What a bench phase measures (docs/benchmarks.md, "`uptrio bench`": the window, its
quiet instants, CPU, memory, the targets' arrivals, the store's rows): the raw record of
one phase (`PhaseRecord`), the per-second `Sampler`, the quiet instants (`next_quiet`,
`sleep_until_wall`), the CPU snapshots at the window's ends, the profile of the window,
and the checks the store kept (`stored_checks`).

`bench.run` drives the phases of one service and the baseline with these,
`bench.cluster` those of several nodes; `bench.report` reads the records. Times are epoch
seconds (wall clock), CPU in seconds, memory in bytes, response times in milliseconds.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import trio

from .api import ApiLatencies
from .display import Display
from .metrics import MetricsSnapshot
from .procstats import CpuSnapshot, MemorySample, ProcessGroup
from .profile import record_profile, summarize
from .service import BenchDatabase
from .targets import TargetSet

__all__ = [
    "PhaseRecord",
    "Sampler",
    "next_quiet",
    "profile_window",
    "server_version",
    "sleep_until_wall",
    "snapshot_cpu",
    "stored_checks",
]


_SAMPLE_SECONDS = 1.0


@dataclass(slots=True)
class PhaseRecord:
    """Raw measurements of one phase (the service, or the baseline).

    Times are epoch seconds; ``cpu[group] = (at window start, at window end)``;
    ``memory_idle`` before the monitors exist; ``memory_peak`` the largest sample of the
    window (RSS for the service and baseline, PSS for Postgres); ``series`` one dict per
    second of samples (time, CPU shares, memory, target arrivals); ``cluster`` what
    `bench.cluster` measured per node (None for one service).
    """

    name: str
    started_at: float = 0.0
    window_start: float = 0.0
    window_end: float = 0.0
    stopped_at: float = 0.0
    quiet_gap_seconds: float = 0.0
    cpu: dict[str, tuple[CpuSnapshot, CpuSnapshot]] = field(default_factory=dict)
    memory_idle: dict[str, MemorySample] = field(default_factory=dict)
    memory_peak: dict[str, MemorySample] = field(default_factory=dict)
    peak_rss_hwm: dict[str, int | None] = field(default_factory=dict)
    metrics: tuple[MetricsSnapshot, MetricsSnapshot] | None = None
    api: ApiLatencies | None = None
    series: list[dict[str, float]] = field(default_factory=list)
    stored_counts: dict[int, int] | None = None
    stored_latency_ms: list[float] = field(default_factory=list)
    stored_window_seconds: int = 0
    profile: dict[str, object] | None = None
    baseline_records: dict[str, list[Any]] | None = None
    exit_code: int | None = None
    cluster: Any = None  # bench.cluster.ClusterRecord with several nodes, else None


def next_quiet(after: float, offset: float, interval: float) -> float:
    """The first quiet instant (``offset`` into the interval, wall time) at or after
    ``after`` (epoch seconds)."""
    return after + ((offset - after) % interval)


async def sleep_until_wall(at: float) -> None:
    """Sleep until wall time ``at`` (epoch seconds); returns at once if it is past."""
    await trio.sleep(max(0.0, at - time.time()))


class Sampler:
    """Samples CPU, memory and target arrivals once per second into a phase's series
    and the live display, until `stop`."""

    def __init__(
        self,
        record: PhaseRecord,
        groups: dict[str, ProcessGroup],
        targets: TargetSet,
        display: Display,
    ) -> None:
        self.record = record
        self.groups = groups
        self.targets = targets
        self.display = display
        self.in_window = False
        self._stop = trio.Event()

    def stop(self) -> None:
        """End `run` after its current sample."""
        self._stop.set()

    def _memory(self, name: str, group: ProcessGroup) -> MemorySample:
        return group.memory(pss=name == "postgres")

    async def run(self, max_seconds: float) -> None:
        """Sample every second for at most ``max_seconds``."""
        previous: tuple[float, dict[str, float], int] | None = None
        deadline = time.monotonic() + max_seconds
        while not self._stop.is_set() and time.monotonic() < deadline:
            now = time.time()
            cpu = {name: g.cpu(now).seconds for name, g in self.groups.items()}
            memory = {name: self._memory(name, g) for name, g in self.groups.items()}
            arrivals = await self.targets.arrivals()
            if self.in_window:
                for name, sample in memory.items():
                    peak = self.record.memory_peak.get(name)
                    size = sample.pss_bytes if name == "postgres" else sample.rss_bytes
                    if peak is None or size > (
                        peak.pss_bytes if name == "postgres" else peak.rss_bytes
                    ):
                        self.record.memory_peak[name] = sample
            if previous is not None:
                then, cpu_then, arrivals_then = previous
                elapsed = max(1e-6, now - then)
                point: dict[str, float] = {
                    "t": now,
                    "arrivals_per_second": (arrivals - arrivals_then) / elapsed,
                }
                live: dict[str, str] = {
                    "target arrivals": f"{point['arrivals_per_second']:,.0f} /s",
                }
                for name in self.groups:
                    share = (cpu[name] - cpu_then[name]) / elapsed
                    point[f"{name}_cpu"] = share
                    size = memory[name].pss_bytes if name == "postgres" else memory[name].rss_bytes
                    point[f"{name}_mb"] = size / 2**20
                    live[name] = f"CPU {share * 100:5.1f} %   memory {size / 2**20:8.1f} MB"
                self.record.series.append(point)
                self.display.live = live
            previous = (now, cpu, arrivals)
            with trio.move_on_after(_SAMPLE_SECONDS):
                await self._stop.wait()


def snapshot_cpu(groups: dict[str, ProcessGroup]) -> dict[str, CpuSnapshot]:
    """Each group's CPU seconds so far, stamped now."""
    now = time.time()
    return {name: group.cpu(now) for name, group in groups.items()}


async def profile_window(record: PhaseRecord, pid: int, seconds: float, out_dir: Path) -> None:
    """py-spy on ``pid`` for the window; its summary goes into ``record.profile``."""
    path = out_dir / f"profile-{record.name}.txt"
    failure = await record_profile(pid, seconds, path)
    record.profile = {"error": failure} if failure else {"file": str(path), **summarize(path)}


async def server_version(connection: Any) -> str:
    """Postgres's ``server_version``."""
    return str(await connection.fetchval("SHOW server_version"))


async def stored_checks(
    bench_db: BenchDatabase, ids: dict[int, str], window_start: float, window_end: float
) -> tuple[dict[int, int], list[float]]:
    """Stored checks per monitor index (whole run) and the response times (ms) of the
    checks started in the window's whole seconds (``created`` is whole epoch seconds)."""
    index_of = {monitor_id: index for index, monitor_id in ids.items()}

    async def query(connection: Any) -> tuple[list[Any], list[Any]]:
        counts = await connection.fetch(
            "SELECT monitor_id, count(*) AS n FROM checks GROUP BY monitor_id"
        )
        latencies = await connection.fetch(
            "SELECT response_time_ms FROM checks WHERE created >= $1 AND created < $2",
            int(np.ceil(window_start)),
            int(np.floor(window_end)),
        )
        return counts, latencies

    counts, latencies = await bench_db.run(query)
    by_index = {
        index_of[row["monitor_id"]]: int(row["n"])
        for row in counts
        if row["monitor_id"] in index_of
    }
    return by_index, [float(row["response_time_ms"]) for row in latencies]
