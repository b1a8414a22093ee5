"""``uptrio bench windows``: what active maintenance windows cost per check
(docs/benchmarks.md, "uptrio bench windows"; docs/maintenance.md).

Whole-service runs on this 2-core machine differ by up to 10 % from one to the next,
more than the 3 % this is about, so both sides are measured in *one* run of
`bench.run.run_bench`, in alternating phases: ``--monitors`` http monitors every
``--interval`` (``failure_threshold`` 1; ``--flapping`` and ``--failing`` shares as
given) and `WindowsRun` as its extension:

1. once the monitors exist, ``--windows`` one-off maintenance windows are made through
   the API (``POST /maintenance-windows``), each covering its share of the monitors (10
   each for 1,000 over 10,000), every effect at its default (``suppress_alerts`` and
   ``exclude_from_availability`` on; no ``pause_checks``: checks go on), scheduled a
   month ahead;
2. the measured window is cut into ``--phases`` phases, ABBA order: in *A* no window is
   open, in *B* every one is. A phase starts by switching them, one SQL statement moving
   each window's occurrence to ``[now - 1 s, now + 1 day)`` (B) or back a month ahead
   (A), with its start marked handled, so the walker writes no events (what is measured
   is the windows' presence on the hot path: the batch's window lookups, held-back
   moves, the records' reads, the reconciliation's digest), then settles for
   ``--settle`` seconds; the CPU seconds of the service and of Postgres are read at the
   measured span's ends (whole seconds);
3. after the run, the checks stored with ``created`` in each measured span are counted.

Figures: per phase, CPU milliseconds per check (service + Postgres), checks, and the
``monitor.down`` events a window held back (proof that B's windows were open); the
median of the A phases and of the B phases; their ratio (goal: at most
:data:`RATIO_GOAL`).
"""

from __future__ import annotations

import dataclasses
import math
import statistics
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx

from .measure import sleep_until_wall
from .output import write_json
from .pair import finish
from .plan import BenchParams
from .procstats import CpuSnapshot
from .report import build_report
from .run import run_bench
from .service import BenchDatabase
from .targets import TargetSet
from .webhooks import start_flapping

__all__ = ["RATIO_GOAL", "WindowsRun", "print_windows", "run_windows_bench"]

RATIO_GOAL = 1.03
"""Goal: CPU per check with every window open over none, at most."""
_AHEAD = 30 * 86_400
"""Where a closed phase puts the occurrences: a month ahead, seconds."""


@dataclasses.dataclass(slots=True)
class _Phase:
    """One phase: ``open`` (B) or not (A); its measured span (whole epoch seconds) and
    the CPU seconds of each group at its ends; the checks stored in it."""

    open: bool
    start: int
    end: int
    cpu: dict[str, float] = dataclasses.field(default_factory=dict)
    checks: int = 0
    held: int = 0
    """``monitor.down`` events held back by a window in the span: a B phase's proof that
    its windows were open (0 in A; with no flapping or failing target, 0 in B too)."""

    def ms_per_check(self) -> float | None:
        return 1000 * sum(self.cpu.values()) / self.checks if self.checks else None


class WindowsRun:
    """The run's extension (module docstring); `figures` once it is over."""

    def __init__(
        self, windows: int, phases: int, settle_seconds: float, interval: float, out_dir: Path
    ) -> None:
        self.windows = windows
        self.interval = interval
        self.out_dir = out_dir
        self.phase_count = phases
        self.settle_seconds = settle_seconds
        self.window_ids: list[str] = []
        self.phases: list[_Phase] = []
        self.figures: dict[str, Any] = {}

    async def monitors_created(
        self, base_url: str, token: str, ids: dict[int, str], targets: TargetSet
    ) -> None:
        """Start the flapping targets' clock (``bench.webhooks.start_flapping``) and make
        the windows, scheduled a month ahead (module docstring).

        Raises:
            RuntimeError: the API refused a window.
        """
        await start_flapping(targets, ids, self.interval, self.out_dir)
        monitors = [ids[i] for i in sorted(ids)]
        per = max(1, math.ceil(len(monitors) / self.windows))
        start = int(time.time()) + _AHEAD
        headers = {"Authorization": f"Bearer {token}"}
        async with httpx.AsyncClient(base_url=base_url, headers=headers, timeout=30) as client:
            for k in range(self.windows):
                covered = monitors[k * per : (k + 1) * per] or monitors[:1]
                body = {
                    "title": f"bench window {k}",
                    "monitors": covered,
                    "starts_at": start,
                    "ends_at": start + 3600,
                }
                answer = await client.post("/maintenance-windows", json=body)
                if answer.status_code != 201:  # the bench's service lifts the rate limits
                    raise RuntimeError(
                        f"POST /maintenance-windows answered {answer.status_code}: "
                        f"{answer.text[:500]}"
                    )
                self.window_ids.append(str(answer.json()["id"]))

    async def window_opened(
        self,
        bench_db: BenchDatabase,
        snapshot: Callable[[], dict[str, CpuSnapshot]],
        window_start: float,
        window_end: float,
    ) -> None:
        """Run the phases over the window (module docstring)."""
        length = (window_end - window_start) / self.phase_count
        for k in range(self.phase_count):
            begins = window_start + k * length
            is_open = k % 4 in (1, 2)  # ABBA ABBA ...
            await self._switch(bench_db, is_open)
            phase = _Phase(
                is_open, math.ceil(begins + self.settle_seconds), math.floor(begins + length)
            )
            await sleep_until_wall(phase.start)
            first = snapshot()
            await sleep_until_wall(phase.end)
            last = snapshot()
            phase.cpu = {n: last[n].seconds - first[n].seconds for n in ("service", "postgres")}
            self.phases.append(phase)

    async def _switch(self, bench_db: BenchDatabase, is_open: bool) -> None:
        now = int(time.time())
        starts, ends = (now - 1, now + 86_400) if is_open else (now + _AHEAD, now + _AHEAD + 3600)
        ids = self.window_ids

        async def move(connection: Any) -> None:
            await connection.execute(
                "UPDATE maintenance_occurrences SET starts_at = $1, ends_at = $2, "
                "start_handled = $3, end_handled = false WHERE window_id = ANY($4::text[])",
                starts,
                ends,
                is_open,
                ids,
            )

        await bench_db.run(move)

    async def window_closed(self, bench_db: BenchDatabase, window_end: float) -> None:
        """Nothing to drain."""

    async def service_stopped(
        self, bench_db: BenchDatabase, window_start: float, window_end: float
    ) -> None:
        """Count each phase's checks; fill `figures`."""

        async def count(connection: Any) -> list[tuple[int, int]]:
            return [
                (
                    int(
                        await connection.fetchval(
                            "SELECT count(*) FROM checks WHERE created >= $1 AND created < $2",
                            p.start,
                            p.end,
                        )
                    ),
                    int(
                        await connection.fetchval(
                            "SELECT count(*) FROM events WHERE type = 'monitor.down' "
                            "AND created >= $1 AND created < $2 "
                            "AND object -> 'suppressed_by' ->> 'type' = 'maintenance'",
                            p.start,
                            p.end,
                        )
                    ),
                )
                for p in self.phases
            ]

        for phase, (checks, held) in zip(self.phases, await bench_db.run(count), strict=True):
            phase.checks, phase.held = checks, held
        self.figures = figures(self.phases, self.windows)


def figures(phases: list[_Phase], windows: int) -> dict[str, Any]:
    """Per phase and per side (A: none open, B: all open): CPU ms per check, medians, the
    ratio B over A and the goal."""
    rows = [
        {
            "open": p.open,
            "start": p.start,
            "end": p.end,
            "checks": p.checks,
            "held_back_downs": p.held,
            "service_cpu_seconds": round(p.cpu.get("service", 0.0), 3),
            "postgres_cpu_seconds": round(p.cpu.get("postgres", 0.0), 3),
            "ms_per_check": None if (m := p.ms_per_check()) is None else round(m, 4),
        }
        for p in phases
    ]

    def median(is_open: bool) -> float | None:
        values = [r["ms_per_check"] for r in rows if r["open"] is is_open and r["ms_per_check"]]
        return round(statistics.median(values), 4) if values else None

    none, every = median(False), median(True)
    ratio = None if not none or every is None else round(every / none, 4)
    return {
        "windows": windows,
        "phases": rows,
        "none_open_ms_per_check": none,
        "all_open_ms_per_check": every,
        "ratio": ratio,
        "goal": {"ratio_at_most": RATIO_GOAL, "met": ratio is not None and ratio <= RATIO_GOAL},
    }


@asynccontextmanager
async def open_windows_run(
    windows: int, phases: int, settle_seconds: float, interval: float, out_dir: Path
) -> AsyncIterator[WindowsRun]:
    """Yield the `WindowsRun` extension (it holds nothing to close)."""
    yield WindowsRun(windows, phases, settle_seconds, interval, out_dir)


def _prepared(params: BenchParams) -> BenchParams:
    """``params`` once its output directory exists."""
    params.output_dir.mkdir(parents=True, exist_ok=True)
    return params


async def run_windows_bench(
    params: BenchParams,
    argv: list[str],
    output: Path,
    *,
    windows: int,
    phases: int,
    settle_seconds: float,
) -> dict[str, Any]:
    """The run (module docstring); its report goes to ``output/report.json`` with the
    figures under ``windows``, and is returned."""
    run_params = _prepared(dataclasses.replace(params, failure_threshold=1, output_dir=output))
    interval = float(params.interval_seconds)
    async with open_windows_run(windows, phases, settle_seconds, interval, output) as extension:
        record = await run_bench(run_params, argv, extension)
    report = build_report(record)
    result = {"uptrio_bench_windows": 1, "windows": extension.figures, "run": report["service"]}
    write_json(report, output / "run.json")
    return finish(result, report, output / "report.json")


def print_windows(result: dict[str, Any]) -> None:
    """The phases and the ratio, plain text on stdout."""
    figures = result["windows"]
    print(f"{figures['windows']} maintenance windows, phases A (none open) and B (all open)")
    for row in figures["phases"]:
        print(
            f"  {'B' if row['open'] else 'A'} {row['start']}-{row['end']}: "
            f"{row['checks']} checks, {row['held_back_downs']} downs held back, "
            f"{row['ms_per_check']} CPU ms per check "
            f"(service {row['service_cpu_seconds']} s, Postgres {row['postgres_cpu_seconds']} s)"
        )
    print(
        f"  median A {figures['none_open_ms_per_check']}, B {figures['all_open_ms_per_check']}"
        f", ratio {figures['ratio']} (goal <= {RATIO_GOAL}: "
        f"{'met' if figures['goal']['met'] else 'not met'})"
    )
