"""Writing a report out: the table on stdout (`print_table`), the JSON file
(`write_json`) and the PNG chart of lateness and throughput over time (`write_chart`,
matplotlib with the Agg backend, imported only when drawing).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

__all__ = ["fmt", "print_table", "write_chart", "write_json"]


def fmt(value: Any, digits: int = 2, suffix: str = "") -> str:
    """``value`` for a table cell: numbers rounded, thousands separated, None as
    ``missing``."""
    if value is None:
        return "[dim]missing[/]"
    if isinstance(value, bool):
        return "[green]yes[/]" if value else "[red]no[/]"
    if isinstance(value, int):
        return f"{value:,}{suffix}"
    if isinstance(value, float):
        if abs(value) >= 1000:
            return f"{value:,.0f}{suffix}"
        return f"{value:,.{digits}f}{suffix}"
    return str(value) + suffix


def _get(tree: Any, path: str) -> Any:
    for key in path.split("."):
        if not isinstance(tree, dict):
            return None
        tree = tree.get(key)
    return tree


def _three(tree: Any, path: str) -> str:
    """``p50 / p99 / max`` of a distribution at ``path``."""
    node = _get(tree, path) or {}
    top = node.get("max", node.get("max_bound"))
    prefix = "≤" if "max_bound" in node else ""
    return f"{fmt(node.get('p50'))} / {fmt(node.get('p99'))} / {prefix}{fmt(top)}"


def table_console() -> Console:
    """A console for stdout, 130 columns wide when it is not a terminal."""
    console = Console()
    return console if console.is_terminal else Console(width=130)


def _machine_state(machine: dict[str, Any]) -> str | None:
    """The machine's load and Python speed at the report (``bench.report.machine_info``),
    as the table's caption; None for a report made before they were recorded."""
    if "python_speed_us" not in machine:
        return None
    load = "/".join(f"{value:.2f}" for value in machine["load_average"])
    return f"at the end: load average {load}; sum(range(1000)) in {machine['python_speed_us']} us"


def print_table(report: dict[str, Any], console: Console | None = None) -> None:
    """Print the report's figures as one table (service, baseline and their ratio)."""
    console = console or table_console()
    p = report["parameters"]
    s = report["service"]
    b = report.get("baseline")
    table = Table(
        title=(
            f"uptrio bench: {p['monitors']:,} {p['type_label']} monitors every "
            f"{p['interval_seconds']} s, window {p['window_seconds']:g} s "
            f"({report['machine']['cores']} cores)"
        ),
        caption=_machine_state(report["machine"]),
        show_lines=False,
    )
    table.add_column("figure")
    table.add_column("uptrio", justify="right")
    table.add_column("bare trio baseline", justify="right")
    rows: list[tuple[str, str, str]] = [
        ("monitors created per second", fmt(report["creation"]["monitors_per_second"], 0), ""),
        (
            "checks/s scheduled",
            fmt(_get(s, "checks.scheduled_per_second"), 1),
            fmt(_get(b, "checks.scheduled_per_second"), 1) if b else "",
        ),
        (
            "checks/s achieved (targets saw)",
            fmt(_get(s, "checks.achieved_per_second"), 1),
            fmt(_get(b, "checks.achieved_per_second"), 1) if b else "",
        ),
        ("checks in window: service counted", fmt(_get(s, "checks.service_counted"), 0), ""),
        (
            "missed checks (targets / service)",
            f"{fmt(_get(s, 'checks.missed'))} / {fmt(_get(s, 'checks.service_missed'), 0)}",
            fmt(_get(b, "checks.missed")) if b else "",
        ),
        (
            "lateness at target p50/p99/max ms",
            _three(s, "lateness_ms.target"),
            _three(b, "lateness_ms.target") if b else "",
        ),
        (
            "gap - interval p50/p99/max ms",
            _three(s, "lateness_ms.gap_jitter"),
            _three(b, "lateness_ms.gap_jitter") if b else "",
        ),
        (
            "lateness, own records p50/p99/max ms",
            _three(s, "lateness_ms.service"),
            _three(b, "lateness_ms.own") if b else "",
        ),
        (
            "probe latency p50/p99/max ms",
            _three(s, "probe_latency_ms.stored"),
            _three(b, "probe_latency_ms.own") if b else "",
        ),
        (
            "CPU ms per check: process",
            fmt(_get(s, "cpu.service_ms_per_check"), 3),
            fmt(_get(b, "cpu.ms_per_check"), 3) if b else "",
        ),
        ("CPU ms per check: postgres", fmt(_get(s, "cpu.postgres_ms_per_check"), 3), ""),
        (
            "CPU ms per check: together",
            fmt(_get(s, "cpu.total_ms_per_check"), 3),
            fmt(_get(report, "ratios.total_cpu_vs_baseline"), 1, "x baseline") if b else "",
        ),
        (
            "cores busy: process / postgres / targets",
            f"{fmt(_get(s, 'cpu.service_cores'))} / {fmt(_get(s, 'cpu.postgres_cores'))} / "
            f"{fmt(_get(s, 'cpu.targets_cores'))}",
            f"{fmt(_get(b, 'cpu.cores'))} / - / {fmt(_get(b, 'cpu.targets_cores'))}" if b else "",
        ),
        (
            "memory peak MB (process; postgres PSS)",
            f"{fmt(_get(s, 'memory.service.peak_mb'), 1)}; "
            f"{fmt(_get(s, 'memory.postgres.peak_mb'), 1)}",
            fmt(_get(b, "memory.baseline.peak_mb"), 1) if b else "",
        ),
        (
            "memory KB per monitor (added; postgres)",
            f"{fmt(_get(s, 'memory.service.added_per_monitor_kb'), 1)}; "
            f"{fmt(_get(s, 'memory.postgres.added_per_monitor_kb'), 1)}",
            fmt(_get(b, "memory.baseline.added_per_monitor_kb"), 1) if b else "",
        ),
        (
            "store rows written per second (metrics; rows)",
            f"{fmt(_get(s, 'store.rows_written_per_second'), 1)}; "
            f"{fmt(_get(s, 'store.rows_stored_per_second'), 1)}",
            "",
        ),
        ("store batch size p50/p99/max", _three(s, "store.batch_size"), ""),
        ("store flush ms p50/p99/max", _three(s, "store.flush_ms"), ""),
        ("probe end to commit ms p50/p99/max", _three(s, "store.commit_delay_ms"), ""),
        ("store rows dropped", fmt(_get(s, "store.rows_dropped"), 0), ""),
        ("API GET /monitors/:id p50/p99/max ms", _three(s, "api.get_monitor_ms"), ""),
        ("API GET /monitors p50/p99/max ms", _three(s, "api.list_monitors_ms"), ""),
        (
            "checks seen by targets = stored rows",
            f"{fmt(_get(s, 'run_consistency.target_total'))} = "
            f"{fmt(_get(s, 'run_consistency.stored_total'))} "
            f"({fmt(_get(s, 'run_consistency.mismatched_monitors'))} monitors differ)",
            "",
        ),
    ]
    for row in rows:
        table.add_row(*row)
    console.print(table)
    goals = report["goals"]
    targets = goals["targets"]
    console.print(
        ("goals" if goals.get("at_goal_load") else "goals (set for another load)")
        + f": no missed check {fmt(goals['no_missed_check'])}, "
        f"p99 lateness ≤ {targets['lateness_p99_ms']:g} ms {fmt(goals['lateness_p99_within'])}, "
        f"≤ {targets['total_cpu_ms_per_check']:g} CPU ms/check {fmt(goals['total_cpu_within'])}, "
        f"≤ {targets['service_memory_per_monitor_kb']:g} KB/monitor {fmt(goals['memory_within'])}"
    )
    for name in ("service", "baseline"):
        profile = (report.get(name) or {}).get("profile")
        if profile and profile.get("leaf"):
            parts = ", ".join(f"{part} {share:g} %" for share, part in profile.get("split", []))
            console.print(f"[bold]{name} profile[/] ({profile['samples']} samples): {parts}")
            console.print("top leaves:")
            for share, function in profile["leaf"][:12]:
                console.print(f"  {share:5.1f} %  {function}", highlight=False)
    if report["missing"]:
        console.print(f"[yellow]missing figures:[/] {', '.join(report['missing'])}")


def write_json(report: dict[str, Any], path: Path) -> None:
    """Write the report as indented JSON."""
    path.write_text(json.dumps(report, indent=2, default=str) + "\n")


def write_chart(report: dict[str, Any], path: Path) -> None:
    """Two panels against seconds from the window's start: checks per second the
    targets saw (with the scheduled rate), and lateness p50 / p99 (ms, log scale), for
    the service and, when run, the baseline; the measured window shaded, and the kill
    of a node marked (``--kill-node``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (top, bottom) = plt.subplots(2, 1, figsize=(11, 7), sharex=True)
    p = report["parameters"]
    phases = [("uptrio", report["service"], "tab:blue")]
    if report.get("baseline"):
        phases.append(("bare trio", report["baseline"], "tab:orange"))
    for label, phase, colour in phases:
        series = phase["series"]
        t = [point["t"] for point in series]
        top.plot(t, [point["arrivals"] for point in series], color=colour, label=label)
        for key, style in (("lateness_p50_ms", ":"), ("lateness_p99_ms", "-")):
            values = [point[key] for point in series]
            bottom.plot(
                t,
                [v if v is not None and v > 0 else float("nan") for v in values],
                style,
                color=colour,
                label=f"{label} {key.split('_')[1]}",
            )
    scheduled = report["service"]["checks"]["scheduled_observable_per_second"]
    top.axhline(scheduled, color="grey", linestyle="--", label="scheduled")
    creation = report["creation"]
    for axis in (top, bottom):
        axis.axvspan(0, p["window_seconds"], color="green", alpha=0.08, label="window")
        axis.axvspan(
            creation["started_offset_seconds"],
            creation["finished_offset_seconds"],
            color="grey",
            alpha=0.12,
            label="creating monitors",
        )
        axis.grid(alpha=0.3)
    failover = (report.get("nodes") or {}).get("failover")
    if failover and failover["killed_at_offset_seconds"] is not None:
        for axis in (top, bottom):
            axis.axvline(
                failover["killed_at_offset_seconds"],
                color="tab:red",
                label=f"{failover['node']} killed",
            )
    top.set_ylabel("checks per second at the targets")
    top.legend(loc="lower right", fontsize=8)
    bottom.set_yscale("log")
    bottom.set_ylabel("lateness at the target, ms")
    bottom.set_xlabel("seconds from the start of the measured window")
    bottom.legend(loc="upper right", fontsize=8)
    figure.suptitle(
        f"{p['monitors']:,} {p['type_label']} monitors every {p['interval_seconds']} s "
        f"({report['machine']['cores']} cores)"
    )
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
