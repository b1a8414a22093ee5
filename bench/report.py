"""The report of a bench run: every figure as JSON (`build_report`); `bench.output`
prints it as a table and draws its chart. With several nodes the figures are the whole
cluster's and a ``nodes`` section has them per node (`bench.cluster_report`), with
``--regions`` a ``regions`` section per region (`bench.regions`). This
module assembles the whole report (parameters, machine, versions, creation, ratios,
goals, ``missing``); the ``service`` and ``baseline`` sections are `bench.report_phases`'s.

Units are in the keys: ``_ms`` milliseconds, ``_mb`` mebibytes, ``_kb`` kibibytes,
``per_second`` per wall-clock second of the window. A figure that could not be measured
is ``null`` and its dotted path is listed in ``missing`` (for example every
``/metrics`` figure while the service has no such endpoint).
"""

from __future__ import annotations

import dataclasses
import os
import platform
import subprocess
import timeit
from importlib import metadata
from pathlib import Path
from typing import Any

import psutil

from .cluster_report import cluster_section
from .regions import regions_section
from .report_phases import baseline_section, observable_mask, service_section, window_arrivals
from .run import RunRecord

__all__ = ["GOALS", "GOAL_LOAD", "build_report", "machine_info", "missing_figures"]

GOALS = {
    "missed_checks": 0,
    "lateness_p99_ms": 10.0,
    "total_cpu_ms_per_check": 0.45,
    "service_memory_per_monitor_kb": 20.0,
}
"""The goals for 10,000 http monitors every 10 s (bench/RESULTS.md, 10,000 http monitors
every 10 s)."""

GOAL_LOAD = {"monitors": 10_000, "type_label": "http", "interval_seconds": 10}
"""The load `GOALS` are set for, as report parameters."""

_MB = 2**20


def python_speed_us() -> float:
    """How fast this machine runs Python right now: the best of 5 timings of
    ``sum(range(1000))``, microseconds (about 17 on the 2-core machine of bench/RESULTS.md
    on a good day, twice that on a bad one). A shared or throttled machine's speed drifts
    between runs, and the CPU figures with it; this says by how much. Takes about 0.2 s."""
    best = min(timeit.repeat("sum(range(1000))", number=2000, repeat=5))
    return round(best / 2000 * 1e6, 2)


def machine_info() -> dict[str, Any]:
    """Cores, memory, CPU model, kernel of this machine; its load average (1, 5 and 15
    minutes) and `python_speed_us` when the report is made."""
    model = None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cores": os.cpu_count(),
        "memory_mb": round(psutil.virtual_memory().total / _MB),
        "cpu_model": model,
        "kernel": platform.release(),
        "python": platform.python_version(),
        "load_average": [round(load, 2) for load in os.getloadavg()],
        "python_speed_us": python_speed_us(),
    }


def versions(record: RunRecord) -> dict[str, Any]:
    """Versions of the parts: uptrio (and its git commit), libraries, Postgres."""
    found: dict[str, Any] = {}
    for package in ("uptrio", "trio", "hypercorn", "quart-trio", "asyncpg", "h11", "dnspython"):
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            found[package] = None
    root = Path(__file__).resolve().parents[1]
    try:
        commit = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        found["git_commit"] = commit + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        found["git_commit"] = None
    found["postgres"] = record.postgres_version
    found["http_target"] = record.http_target
    return found


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or not b:
        return None
    return a / b


def missing_figures(value: Any, path: str = "") -> list[str]:
    """Dotted paths of every ``None`` in ``value`` (series and samples excluded)."""
    found: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            if key in (
                "series",
                "samples",
                "mismatched_examples",
                "metrics_error",
                "parameters",
                "profile",
            ):
                continue
            found += missing_figures(item, f"{path}.{key}" if path else str(key))
    elif value is None:
        found.append(path)
    return found


def build_report(record: RunRecord) -> dict[str, Any]:
    """The JSON report of ``record`` (see the module docstring)."""
    params = record.params
    service = service_section(record)
    baseline = baseline_section(record)
    types: dict[str, int] = {}
    behaviours: dict[str, int] = {}
    for plan in record.plans:
        types[plan.type] = types.get(plan.type, 0) + 1
        behaviours[plan.behaviour] = behaviours.get(plan.behaviour, 0) + 1
    parameters: dict[str, Any] = {}
    for item in dataclasses.fields(params):
        value = getattr(params, item.name)
        parameters[item.name] = str(value) if isinstance(value, Path) else value
    parameters.update(
        warmup_seconds_effective=params.warmup,
        window_seconds=params.window_seconds,
        window_intervals=params.window_intervals,
        type_label=params.type_label,
    )
    goals = _goals(service)
    goals["at_goal_load"] = all(parameters[key] == value for key, value in GOAL_LOAD.items())
    report: dict[str, Any] = {
        "uptrio_bench_report": 1,
        "parameters": parameters,
        "commands": {"bench": record.argv, "service": record.service_command},
        "machine": machine_info(),
        "versions": versions(record),
        "plan": {"types": types, "behaviours": behaviours, "notes": record.notes},
        "creation": {
            "started_offset_seconds": record.creation.started_at - record.service.window_start,
            "finished_offset_seconds": record.creation.finished_at - record.service.window_start,
            "monitors": len(record.ids),
            "seconds": record.creation.seconds,
            "monitors_per_second": record.creation.per_second,
            "throttled_answers": record.creation.throttled,
            "busy_answers_retried": record.creation.retried,
        },
        "service": service,
        "baseline": baseline,
        "ratios": {
            "service_cpu_vs_baseline": _ratio(
                service["cpu"]["service_ms_per_check"],
                baseline["cpu"]["ms_per_check"] if baseline else None,
            ),
            "total_cpu_vs_baseline": _ratio(
                service["cpu"]["total_ms_per_check"],
                baseline["cpu"]["ms_per_check"] if baseline else None,
            ),
            "lateness_p99_vs_baseline": _ratio(
                service["lateness_ms"]["target"]["p99"],
                baseline["lateness_ms"]["target"]["p99"] if baseline else None,
            ),
        },
        "goals": goals,
    }
    skip = {"ratios"} if baseline is None else set()
    report["missing"] = [
        m
        for m in missing_figures({k: v for k, v in report.items() if k not in skip})
        if not m.startswith("baseline") or baseline is not None
    ]
    if record.service.cluster is not None:  # several nodes (bench.cluster_report)
        arrivals = window_arrivals(record, record.creation.started_at, record.service.stopped_at)
        report["nodes"] = nodes = cluster_section(record, arrivals, observable_mask(record))
        report["missing"] += [m for m in missing_figures(nodes, "nodes") if m != "nodes.failover"]
        regions = regions_section(record)  # --regions (bench.regions)
        if regions is not None:
            report["regions"] = regions
            report["missing"] += missing_figures(regions, "regions")
    return report


def _goals(service: dict[str, Any]) -> dict[str, Any]:
    late = service["lateness_ms"]["target"]["p99"]
    total = service["cpu"]["total_ms_per_check"]
    memory = service["memory"]["service"]["added_per_monitor_kb"]
    missed = service["checks"]["missed"]
    return {
        "targets": GOALS,
        "no_missed_check": missed == 0,
        "lateness_p99_within": late is not None and late <= GOALS["lateness_p99_ms"],
        "total_cpu_within": total is not None and total <= GOALS["total_cpu_ms_per_check"],
        "memory_within": memory is not None and memory <= GOALS["service_memory_per_monitor_kb"],
    }
