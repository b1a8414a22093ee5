"""``uptrio bench sweep``: one run per monitor count, then one table and one chart of
CPU per check and lateness against the monitor count.

Each run is a complete `bench.run.run_bench` (its own service, database and targets,
its report in ``<output>/<count>/``); runs go one after the other, smallest first.
``<output>/sweep.json`` holds the rows of the table and the parameters; ``sweep.png``
the chart.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import trio
from rich.table import Table

from .output import fmt, print_table, table_console, write_chart, write_json
from .plan import BenchParams
from .report import GOALS, build_report, machine_info
from .run import run_bench

__all__ = ["run_sweep", "sweep_row", "write_sweep_chart"]


def sweep_row(report: dict[str, Any]) -> dict[str, Any]:
    """The figures of one run that the sweep compares."""
    s = report["service"]
    b = report.get("baseline") or {}
    return {
        "monitors": report["parameters"]["monitors"],
        "scheduled_per_second": s["checks"]["scheduled_per_second"],
        "achieved_per_second": s["checks"]["achieved_per_second"],
        "missed": s["checks"]["missed"],
        "service_missed": s["checks"]["service_missed"],
        "lateness_p50_ms": s["lateness_ms"]["target"]["p50"],
        "lateness_p99_ms": s["lateness_ms"]["target"]["p99"],
        "lateness_max_ms": s["lateness_ms"]["target"]["max"],
        "service_lateness_p99_ms": s["lateness_ms"]["service"]["p99"],
        "probe_p99_ms": s["probe_latency_ms"]["stored"]["p99"],
        "service_cpu_ms_per_check": s["cpu"]["service_ms_per_check"],
        "postgres_cpu_ms_per_check": s["cpu"]["postgres_ms_per_check"],
        "total_cpu_ms_per_check": s["cpu"]["total_ms_per_check"],
        "baseline_cpu_ms_per_check": (b.get("cpu") or {}).get("ms_per_check"),
        "baseline_lateness_p99_ms": ((b.get("lateness_ms") or {}).get("target") or {}).get("p99"),
        "service_memory_per_monitor_kb": s["memory"]["service"]["added_per_monitor_kb"],
        "postgres_memory_per_monitor_kb": s["memory"]["postgres"]["added_per_monitor_kb"],
        "monitors_created_per_second": report["creation"]["monitors_per_second"],
        "api_get_monitor_p99_ms": (s["api"]["get_monitor_ms"] or {}).get("p99"),
        "commit_delay_p99_ms": s["store"]["commit_delay_ms"]["p99"],
    }


def _table(rows: list[dict[str, Any]], cores: int | None) -> Table:
    table = Table(title=f"uptrio bench sweep ({cores} cores)")
    columns = [
        ("monitors", "monitors", 0),
        ("checks/s sched.", "scheduled_per_second", 0),
        ("checks/s achieved", "achieved_per_second", 0),
        ("missed", "missed", 0),
        ("late p50 ms", "lateness_p50_ms", 2),
        ("late p99 ms", "lateness_p99_ms", 2),
        ("late max ms", "lateness_max_ms", 1),
        ("CPU ms/check svc", "service_cpu_ms_per_check", 3),
        ("CPU ms/check pg", "postgres_cpu_ms_per_check", 3),
        ("CPU ms/check total", "total_cpu_ms_per_check", 3),
        ("baseline ms/check", "baseline_cpu_ms_per_check", 3),
        ("KB/monitor", "service_memory_per_monitor_kb", 1),
        ("created/s", "monitors_created_per_second", 0),
    ]
    for title, _, _ in columns:
        table.add_column(title, justify="right")
    for row in rows:
        table.add_row(*(fmt(row[key], digits) for _, key, digits in columns))
    return table


def write_sweep_chart(rows: list[dict[str, Any]], path: Path, title: str) -> None:
    """CPU ms per check (service, Postgres, together, baseline) and lateness p50 / p99
    (target side) against the monitor count."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    counts = [row["monitors"] for row in rows]

    def series(key: str) -> list[float]:
        return [float("nan") if row[key] is None else float(row[key]) for row in rows]

    figure, (cpu, late) = plt.subplots(1, 2, figsize=(12, 4.8))
    panels = (
        (
            cpu,
            "CPU ms per check",
            (
                ("service_cpu_ms_per_check", "uptrio process"),
                ("postgres_cpu_ms_per_check", "postgres"),
                ("total_cpu_ms_per_check", "together"),
                ("baseline_cpu_ms_per_check", "bare trio baseline"),
            ),
            GOALS["total_cpu_ms_per_check"],
            "goal {:g} ms",
        ),
        (
            late,
            "lateness at the target, ms",
            (
                ("lateness_p50_ms", "p50"),
                ("lateness_p99_ms", "p99"),
                ("lateness_max_ms", "max"),
                ("baseline_lateness_p99_ms", "baseline p99"),
            ),
            GOALS["lateness_p99_ms"],
            "goal p99 {:g} ms",
        ),
    )
    for axis, label_y, lines, goal, goal_label in panels:
        for key, label in lines:
            axis.plot(counts, series(key), marker="o", label=label)
        axis.axhline(goal, color="grey", linestyle="--", label=goal_label.format(goal))
        axis.set_xlabel("monitors")
        axis.set_ylabel(label_y)
        axis.legend(fontsize=8)
        axis.grid(alpha=0.3)
    cpu.set_ylim(bottom=0)
    late.set_yscale("log")
    figure.suptitle(title)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def run_sweep(
    runs: Sequence[BenchParams], output: Path, argv: list[str], *, chart: bool = True
) -> list[dict[str, Any]]:
    """Run each of ``runs`` (smallest first), write every run's files and the sweep's
    table (stdout), ``sweep.json`` and ``sweep.png`` in ``output``; return the rows."""
    output.mkdir(parents=True, exist_ok=True)
    console = table_console()
    rows: list[dict[str, Any]] = []
    for params in sorted(runs, key=lambda p: p.monitors):
        record = trio.run(run_bench, params, argv)
        report = build_report(record)
        run_dir = params.output_dir
        if chart:
            write_chart(report, run_dir / "chart.png")
        write_json(report, run_dir / "report.json")
        print_table(report, console)
        rows.append(sweep_row(report))
    machine = machine_info()
    console.print(_table(rows, machine["cores"]))
    first = runs[0]
    title = (
        f"{first.type_label} monitors every {first.interval_seconds} s, "
        f"window {first.window_seconds:g} s ({machine['cores']} cores)"
    )
    write_json(
        {"rows": rows, "machine": machine, "commands": {"bench": argv}, "title": title},
        output / "sweep.json",
    )
    if chart:
        write_sweep_chart(rows, output / "sweep.png", title)
    console.print(f"sweep: {output / 'sweep.json'}")
    return rows
