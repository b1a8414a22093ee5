"""Two runs side by side, as ``uptrio bench webhooks`` and ``uptrio bench alerts`` make
them (docs/benchmarks.md): a *reference* run, then the same parameters with flapping
targets and a `bench.run.RunExtension`; their CPU per check and its ratio, and the
latency percentiles both modes report.

`run_pair` makes the two runs and writes each one's ``report.json``; `cpu_of`,
`cpu_ratio` and `print_cpu` put their CPU figures side by side; `latency_figures` gives
the percentiles of a latency sample; `finish` adds the runs' parameters, commands and
versions to a comparison and writes it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from .output import write_chart, write_json
from .plan import BenchParams
from .report import build_report
from .run import RunExtension, RunRecord, run_bench

__all__ = [
    "COMMIT_TIMESTAMPS",
    "CPU_RATIO_GOAL",
    "cpu_of",
    "cpu_ratio",
    "finish",
    "latency_figures",
    "print_cpu",
    "run_pair",
]

COMMIT_TIMESTAMPS = (("track_commit_timestamp", "on"),)
"""The Postgres setting both runs get (`bench.plan.BenchParams.postgres_settings`): the
commit time of every row is ``pg_xact_commit_timestamp(xmin)``."""
CPU_RATIO_GOAL = 1.05
"""Goal: CPU per check of the second run over the reference's, at most."""

Extension = TypeVar("Extension", bound=RunExtension)


def latency_figures(values_ms: list[float]) -> dict[str, float | int | None]:
    """``count``, ``p50``, ``p95``, ``p99``, ``max`` and ``mean`` of ``values_ms``
    (milliseconds, rounded to 0.1; None for an empty sample)."""
    if not values_ms:
        return {"count": 0, "p50": None, "p95": None, "p99": None, "max": None, "mean": None}
    array = np.asarray(values_ms, dtype=np.float64)
    p50, p95, p99 = np.percentile(array, [50, 95, 99])
    return {
        "count": len(values_ms),
        "p50": round(float(p50), 1),
        "p95": round(float(p95), 1),
        "p99": round(float(p99), 1),
        "max": round(float(array.max()), 1),
        "mean": round(float(array.mean()), 1),
    }


def cpu_of(report: dict[str, Any]) -> dict[str, Any]:
    """A run's CPU per check (service, Postgres, together; milliseconds), the checks
    counted, missed checks and the target lateness, from its `bench.report` report."""
    section = report["service"]["cpu"]
    checks = report["service"]["checks"]
    return {
        "service_ms_per_check": section["service_ms_per_check"],
        "postgres_ms_per_check": section["postgres_ms_per_check"],
        "total_ms_per_check": section["total_ms_per_check"],
        "checks_counted": section["checks_counted"],
        "missed": checks["missed"],
        "lateness_ms": report["service"]["lateness_ms"]["target"],
    }


def cpu_ratio(before: dict[str, Any], after: dict[str, Any]) -> float | None:
    """``after``'s total CPU per check over ``before``'s (`cpu_of` sections), or None
    when either is unknown."""
    if before["total_ms_per_check"] and after["total_ms_per_check"] is not None:
        return float(after["total_ms_per_check"] / before["total_ms_per_check"])
    return None


def print_cpu(
    reference: dict[str, Any],
    other: dict[str, Any],
    ratio: float | None,
    labels: tuple[str, str],
) -> None:
    """Both runs' CPU per check and their ratio (`cpu_of` sections), plain text on
    stdout; ``labels`` name the two runs."""

    def cpu(row: dict[str, Any]) -> str:
        parts = (row["service_ms_per_check"], row["postgres_ms_per_check"])
        total = row["total_ms_per_check"]
        if None in parts or total is None:
            return "n/a"
        return f"{parts[0]:.3f} + {parts[1]:.3f} = {total:.3f}"

    width = max(len(label) for label in labels) + 1
    print("CPU ms per check (service + Postgres = total)")
    for label, row in zip(labels, (reference, other), strict=True):
        print(f"  {label + ':':<{width}} {cpu(row)}   missed {row['missed']}")
    print(f"  ratio: {'n/a' if ratio is None else f'{ratio:.3f}'} (goal <= {CPU_RATIO_GOAL})")


async def run_pair(
    params: BenchParams,
    argv: list[str],
    output: Path,
    *,
    name: str,
    open_extension: Callable[[Path, float], AbstractAsyncContextManager[Extension]],
    chart: bool,
) -> tuple[dict[str, dict[str, Any]], Extension]:
    """The *reference* run (no flapping) and the run ``name`` (``params``'
    ``flapping_share``, and the extension ``open_extension(out_dir, max_seconds)``
    yields), one after the other, both with ``failure_threshold`` 1 and commit
    timestamps. Each run's report goes to ``output/<run>/report.json`` (and
    ``chart.png`` when ``chart``). Returns the reports by run name and the extension
    (its figures filled once its run is over)."""
    common = dataclasses.replace(params, failure_threshold=1, postgres_settings=COMMIT_TIMESTAMPS)

    def plan(run: str, flapping: float) -> BenchParams:
        run_params = dataclasses.replace(common, output_dir=output / run, flapping_share=flapping)
        run_params.output_dir.mkdir(parents=True, exist_ok=True)
        return run_params

    reference = plan("reference", 0.0)
    reports = {"reference": _report(await run_bench(reference, argv), reference, chart)}
    second = plan(name, common.flapping_share)
    budget = 3600.0 + params.monitors / 10 + 4 * (params.warmup + params.window_seconds)
    async with open_extension(second.output_dir, budget) as extension:
        record = await run_bench(second, argv, extension)
    reports[name] = _report(record, second, chart)
    return reports, extension


def _report(record: RunRecord, run_params: BenchParams, chart: bool) -> dict[str, Any]:
    """``record``'s report (`bench.report.build_report`), written to the run's
    ``report.json`` (and ``chart.png`` when ``chart``)."""
    report = build_report(record)
    report["files"] = {"json": str(run_params.output_dir / "report.json")}
    if chart:
        write_chart(report, run_params.output_dir / "chart.png")
    write_json(report, run_params.output_dir / "report.json")
    return report


def finish(result: dict[str, Any], report: dict[str, Any], path: Path) -> dict[str, Any]:
    """``result`` with ``report``'s parameters, commands and versions, written to
    ``path`` as JSON; returned."""
    for key in ("parameters", "commands", "versions"):
        result[key] = report[key]
    write_json(result, path)
    return result
