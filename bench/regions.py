"""``uptrio bench --nodes N --regions R``: monitors probed from several regions
(docs/regions.md; docs/benchmarks.md, Regions), read from the store and the nodes, and the
report's ``regions`` section (`regions_section`) with its table (`print_regions`).

The N nodes run in regions ``r1`` to ``rR`` in turn (`bench.nodes.node_region`) and every
monitor is created with all R regions and the default quorum, so each monitor is probed
R times an interval, once by a node of each region. Before the monitors are created the
run waits until every region's 256 buckets are held (`wait_region_pools`, the
``pool_leases`` of docs/several-nodes.md, Regions). After the window `read_regions` reads:

- the checks stored per monitor and region whose ``created`` (whole epoch seconds) lies
  in ``[floor(window start), floor(window start) + window seconds)``: a span of whole
  intervals holds exactly ``window intervals`` checks of each monitor in each region;
- the monitors' status changes and the regions' moves (``status_changes``,
  ``region_moves``) in that span and over the whole run, the incidents, and the monitors
  not ``up`` at the end. With healthy targets none should move after its first ``up``.

`regions_section` adds, per region and in total: checks stored against expected
(monitors times regions times intervals), missed (a monitor's region short of its expected
checks) and extra, the nodes' scheduling lateness p50/p99 (their
``uptrio_schedule_lateness_seconds`` summed), and CPU per stored check (the region's nodes;
in total the nodes and Postgres, and CPU per monitor and interval, the figure to compare
against the same run with ``--regions 1``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import trio
from rich.console import Console
from rich.table import Table

from .metrics import histogram_delta, histogram_summary
from .nodes import BUCKETS, merge_snapshots, node_region
from .output import fmt, table_console
from .run import RunRecord
from .service import BenchDatabase

__all__ = [
    "RegionRecord",
    "print_regions",
    "read_regions",
    "region_names",
    "regions_section",
    "wait_region_pools",
]


def region_names(regions: int) -> list[str]:
    """``r1`` to ``rR``: the regions of a run with ``regions`` regions."""
    return [f"r{k}" for k in range(1, regions + 1)]


async def wait_region_pools(bench_db: BenchDatabase, regions: list[str], seconds: float) -> None:
    """Wait (at most ``seconds``) until each region of ``regions`` has all 256 of its
    buckets held by an unexpired lease (``pool_leases``, docs/several-nodes.md, Regions).

    Raises:
        trio.TooSlowError: not held in time.
    """

    async def held(connection: Any) -> dict[str, int]:
        rows = await connection.fetch(
            "SELECT region, count(*) AS n FROM pool_leases WHERE region = ANY($1::text[]) "
            "AND node IS NOT NULL AND expires_at > now() GROUP BY region",
            regions,
        )
        return {str(r["region"]): int(r["n"]) for r in rows}

    with trio.fail_after(seconds):
        while True:
            counts = await bench_db.run(held, timeout_seconds=10.0)
            if all(counts.get(r, 0) == BUCKETS for r in regions):
                return
            await trio.sleep(0.2)


@dataclass(slots=True)
class RegionRecord:
    """What `read_regions` read from the store.

    Attributes:
        regions: the run's region names.
        span: the whole epoch seconds ``[start, end)`` of the checks counted.
        counts: region -> monitor id -> checks stored in ``span``.
        status_changes_in_span, status_changes_to_down: the monitors' moves in ``span``
            and to ``down`` over the whole run.
        region_moves_in_span, region_moves_to_down: region -> its views' moves in
            ``span``, and to ``down`` over the whole run.
        incidents: incidents stored (the bench opens none itself).
        monitors_not_up: the bench's monitors whose status was not ``up`` at the end.
    """

    regions: list[str]
    span: tuple[int, int]
    counts: dict[str, dict[str, int]] = field(default_factory=dict)
    status_changes_in_span: int = 0
    status_changes_to_down: int = 0
    region_moves_in_span: dict[str, int] = field(default_factory=dict)
    region_moves_to_down: dict[str, int] = field(default_factory=dict)
    incidents: int = 0
    monitors_not_up: int = 0


async def read_regions(
    bench_db: BenchDatabase,
    monitor_ids: list[str],
    regions: list[str],
    window_start: float,
    window_seconds: float,
) -> RegionRecord:
    """The store's side of a run with regions (module docstring); ``window_start`` epoch
    seconds, ``window_seconds`` whole intervals."""
    start = math.floor(window_start)
    span = (start, start + round(window_seconds))
    record = RegionRecord(regions=regions, span=span)

    async def query(connection: Any) -> None:
        rows = await connection.fetch(
            "SELECT region, monitor_id, count(*) AS n FROM checks WHERE created >= $1 "
            "AND created < $2 AND monitor_id = ANY($3::text[]) GROUP BY region, monitor_id",
            span[0], span[1], monitor_ids,
        )  # fmt: skip
        for r in rows:
            record.counts.setdefault(str(r["region"]), {})[r["monitor_id"]] = int(r["n"])
        changes = await connection.fetchrow(
            "SELECT count(*) FILTER (WHERE created >= $1 AND created < $2) AS span, "
            "count(*) FILTER (WHERE to_status = 'down') AS down FROM status_changes "
            "WHERE monitor_id = ANY($3::text[])",
            span[0], span[1], monitor_ids,
        )  # fmt: skip
        record.status_changes_in_span = int(changes["span"])
        record.status_changes_to_down = int(changes["down"])
        for r in await connection.fetch(
            "SELECT region, count(*) FILTER (WHERE created >= $1 AND created < $2) AS span, "
            "count(*) FILTER (WHERE to_status = 'down') AS down FROM region_moves "
            "WHERE monitor_id = ANY($3::text[]) GROUP BY region",
            span[0], span[1], monitor_ids,
        ):  # fmt: skip
            record.region_moves_in_span[str(r["region"])] = int(r["span"])
            record.region_moves_to_down[str(r["region"])] = int(r["down"])
        record.incidents = int(await connection.fetchval("SELECT count(*) FROM incidents"))
        record.monitors_not_up = int(
            await connection.fetchval(
                "SELECT count(*) FROM monitors WHERE id = ANY($1::text[]) AND status <> 'up'",
                monitor_ids,
            )
        )

    await bench_db.run(query, timeout_seconds=300.0)
    return record


def _checks(counts: dict[str, int], monitor_ids: list[str], per_monitor: int) -> dict[str, int]:
    """Stored against expected over ``monitor_ids``, ``per_monitor`` expected each."""
    short = [per_monitor - counts.get(m, 0) for m in monitor_ids]
    return {
        "expected": per_monitor * len(monitor_ids),
        "stored": sum(counts.get(m, 0) for m in monitor_ids),
        "missed": sum(s for s in short if s > 0),
        "extra": -sum(s for s in short if s < 0),
        "monitors_short": sum(1 for s in short if s > 0),
    }


def _lateness(nodes: list[Any]) -> dict[str, float | None]:
    """The nodes' ``uptrio_schedule_lateness_seconds`` over the window, summed, in ms."""
    measured = [n.metrics for n in nodes if n.metrics is not None]
    if not measured:
        return histogram_summary(None)
    before = merge_snapshots([m[0] for m in measured])
    after = merge_snapshots([m[1] for m in measured])
    return histogram_summary(
        histogram_delta(before, after, "uptrio_schedule_lateness_seconds"), 1000.0
    )


def _cpu_seconds(nodes: list[Any]) -> float | None:
    spans = [n.cpu for n in nodes]
    if any(s is None for s in spans):
        return None
    return float(sum(s[1].seconds - s[0].seconds for s in spans))


def _per(seconds: float | None, count: float) -> float | None:
    """Milliseconds of ``seconds`` per one of ``count``."""
    return None if seconds is None or not count else seconds * 1e3 / count


def regions_section(record: RunRecord) -> dict[str, Any] | None:
    """The report's ``regions`` section (module docstring); None without ``--regions``."""
    cluster = record.service.cluster
    found: RegionRecord | None = None if cluster is None else cluster.regions
    if found is None:
        return None
    params, phase = record.params, record.service
    monitor_ids = [record.ids[p.index] for p in record.plans if p.index in record.ids]
    per_monitor = params.window_intervals
    rows: list[dict[str, Any]] = []
    for name in found.regions:
        nodes = [
            n for k, n in enumerate(cluster.nodes, 1) if node_region(k, params.regions) == name
        ]
        checks: dict[str, int] = _checks(found.counts.get(name, {}), monitor_ids, per_monitor)
        cpu_s = _cpu_seconds(nodes)
        rows.append({  # per region
            "name": name,
            "nodes": [n.name for n in nodes],
            "checks": checks,
            "lateness_ms": _lateness(nodes),
            "cpu": {
                "service_seconds": cpu_s,
                "service_ms_per_check": _per(cpu_s, checks["stored"]),
            },
            "region_moves_in_window": found.region_moves_in_span.get(name, 0),
            "region_moves_to_down": found.region_moves_to_down.get(name, 0),
        })  # fmt: skip
    total = {
        key: sum(r["checks"][key] for r in rows)
        for key in ("expected", "stored", "missed", "extra", "monitors_short")
    }
    service_s = _cpu_seconds(cluster.nodes)
    postgres = phase.cpu.get("postgres")
    postgres_s = None if postgres is None else postgres[1].seconds - postgres[0].seconds
    both = None if service_s is None or postgres_s is None else service_s + postgres_s
    monitor_intervals = len(monitor_ids) * per_monitor
    return {
        "count": len(found.regions),
        "window": {"start": found.span[0], "end": found.span[1], "intervals": per_monitor},
        "per_region": rows,
        "total": {
            "monitors": len(monitor_ids),
            "checks": total,
            "lateness_ms": _lateness(cluster.nodes),
            "cpu": {
                "service_seconds": service_s,
                "postgres_seconds": postgres_s,
                "service_ms_per_check": _per(service_s, total["stored"]),
                "postgres_ms_per_check": _per(postgres_s, total["stored"]),
                "ms_per_check": _per(both, total["stored"]),
                "ms_per_monitor_interval": _per(both, monitor_intervals),
            },
            "status_changes_in_window": found.status_changes_in_span,
            "status_changes_to_down": found.status_changes_to_down,
            "region_moves_in_window": sum(found.region_moves_in_span.values()),
            "incidents": found.incidents,
            "monitors_not_up": found.monitors_not_up,
        },
    }


def print_regions(report: dict[str, Any], console: Console | None = None) -> None:
    """Print the ``regions`` section (nothing without it): a row per region and the
    total, then the moves."""
    regions = report.get("regions")
    if not regions:
        return
    console = console or table_console()
    table = Table(title=f"per region ({regions['count']} regions, every monitor in each)")
    for column in (
        "region", "nodes", "checks stored / expected", "missed", "extra",
        "lateness p50/p99 ms", "service CPU ms/check", "moves",
    ):  # fmt: skip
        table.add_column(column, justify="left" if column in ("region", "nodes") else "right")
    for r in regions["per_region"]:
        c, late = r["checks"], r["lateness_ms"]
        table.add_row(
            r["name"], ", ".join(r["nodes"]), f"{fmt(c['stored'])} / {fmt(c['expected'])}",
            fmt(c["missed"]), fmt(c["extra"]), f"{fmt(late['p50'])} / {fmt(late['p99'])}",
            fmt(r["cpu"]["service_ms_per_check"], 3), fmt(r["region_moves_in_window"]),
        )  # fmt: skip
    t = regions["total"]
    c, late, cpu = t["checks"], t["lateness_ms"], t["cpu"]
    table.add_row(
        "total", "", f"{fmt(c['stored'])} / {fmt(c['expected'])}", fmt(c["missed"]),
        fmt(c["extra"]), f"{fmt(late['p50'])} / {fmt(late['p99'])}",
        fmt(cpu["service_ms_per_check"], 3), fmt(t["region_moves_in_window"]),
    )  # fmt: skip
    console.print(table)
    console.print(
        f"CPU per check: service {fmt(cpu['service_ms_per_check'], 3)} ms + Postgres "
        f"{fmt(cpu['postgres_ms_per_check'], 3)} ms; per monitor and interval "
        f"{fmt(cpu['ms_per_monitor_interval'], 3)} ms (compare with --regions 1); monitor "
        f"moves in the window {fmt(t['status_changes_in_window'])}, to down "
        f"{fmt(t['status_changes_to_down'])}; incidents {fmt(t['incidents'])}; monitors "
        f"not up {fmt(t['monitors_not_up'])}",
        highlight=False,
    )
