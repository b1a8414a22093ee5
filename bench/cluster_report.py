"""The ``nodes`` section of a report with several nodes (`bench.cluster`;
docs/benchmarks.md, ``uptrio bench``), and its table (`print_nodes`).

`build_report` (`bench.report`) keeps every figure of one service's run for the whole
cluster (``service``: the nodes' ``/metrics`` summed, their CPU added, Postgres once)
and adds ``nodes`` (`cluster_section`):

- ``per_node``: for each node, the monitors whose bucket it held at the window's start,
  their checks as the targets saw them (scheduled, achieved, missed, duplicates,
  lateness), the checks the node counted itself (``uptrio_checks_total``), its CPU per
  check and cores, its memory (RSS). A killed node's window ends at its kill.
- ``exactly_once``: whether each monitor was probed by one node. The targets count
  arrivals per monitor and grid slot: two nodes probing one monitor give a slot two
  arrivals (``monitors_with_duplicate_arrivals``; ``monitors_at_twice_expected``: as
  many arrivals as two nodes would send); the store is read for consecutive checks of
  a monitor closer than half an interval, whole-second rounding aside, or one
  probe's row twice (``stored_duplicates``, `bench.nodes.stored_gaps`). Each node's own count
  of checks equals the arrivals at its monitors when it probed only those.
- ``failover`` (``--kill-node``): the longest gap per monitor between two consecutive probes
  (arrivals at its target, the later one in the window, or to the window's end when it was
  not probed again), as p50 / p99 / max over the killed node's monitors and over all,
  against the bound of docs/several-nodes.md: lease + one interval; the wait from the kill
  to each of the killed node's monitors' first probe; when the others held every bucket
  again; the longest gap between stored checks (whole seconds).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
from rich.console import Console
from rich.table import Table

from .analysis import distribution, longest_gaps, slot_arrivals, window_figures
from .cluster import ClusterRecord, NodeRecord
from .metrics import counter_delta, gauge_value, histogram_delta, histogram_summary
from .output import fmt, table_console
from .run import RunRecord

__all__ = ["cluster_section", "print_nodes"]

_MB = 2**20


def _owned(cluster: ClusterRecord, name: str, size: int) -> npt.NDArray[np.bool_]:
    mask = np.zeros(size, dtype=bool)
    for index, owner in cluster.owner_start.items():
        if owner == name and index < size:
            mask[index] = True
    return mask


def _node_section(
    record: RunRecord,
    node: NodeRecord,
    owned: npt.NDArray[np.bool_],
    arrivals: tuple[Any, Any],
    observable: npt.NDArray[np.bool_],
) -> dict[str, Any]:
    """One node's figures (module docstring)."""
    params, phase, cluster = record.params, record.service, record.service.cluster
    end = phase.window_end
    if node.killed_at is not None and cluster.kill_at is not None:
        end = cluster.kill_at
    figures = window_figures(
        arrivals[0],
        arrivals[1],
        record.phases,
        observable & owned,
        params.interval_seconds,
        phase.window_start,
        end,
    )
    before, after = node.metrics if node.metrics else (None, None)
    counted = missed = rows = fenced = held = None
    lateness = histogram_summary(None)
    if before is not None and after is not None:
        counted = counter_delta(before, after, "uptrio_checks_total")
        missed = counter_delta(before, after, "uptrio_checks_missed_total")
        rows = counter_delta(before, after, "uptrio_store_rows_written_total")
        fenced = counter_delta(before, after, "uptrio_fenced_writes_refused_total")
        held = gauge_value(after, "uptrio_node_buckets_held")
        late = histogram_delta(before, after, "uptrio_schedule_lateness_seconds")
        lateness = histogram_summary(late, 1000.0)
    cpu_s = cores = None
    if node.cpu is not None:
        cpu_s = node.cpu[1].seconds - node.cpu[0].seconds
        cores = cpu_s / max(1e-6, node.cpu[1].at - node.cpu[0].at)
    denominator = counted if counted else figures.achieved
    idle, peak, hwm = node.memory_idle, node.memory_peak, node.peak_rss_hwm
    return {
        "name": node.name,
        "killed": node.killed_at is not None,
        "exit_code": node.exit_code,
        "buckets_at_start": cluster.buckets_at_start.get(node.name, 0),
        "buckets_held_at_end": held,
        "monitors_owned": int(owned.sum()),
        "window_seconds": end - phase.window_start,
        "checks": {
            "scheduled": figures.scheduled,
            "achieved": figures.achieved,
            "missed": figures.missed,
            "duplicates": figures.duplicates,
            "service_counted": counted,
            "service_missed": missed,
            "rows_written": rows,
            "fenced_writes_refused": fenced,
        },
        "lateness_ms": {"target": figures.lateness_ms.as_dict(), "service": lateness},
        "cpu": {
            "seconds": cpu_s,
            "ms_per_check": None if cpu_s is None or not denominator else cpu_s * 1e3 / denominator,
            "cores": cores,
        },
        "memory": {
            "idle_mb": None if idle is None else idle.rss_bytes / _MB,
            "peak_mb": None if peak is None else peak.rss_bytes / _MB,
            "peak_rss_since_start_mb": None if hwm is None else hwm / _MB,
        },
        "log": str(node.log),
        "command": node.command,
    }


def _exactly_once(
    record: RunRecord, arrivals: tuple[Any, Any], observable: npt.NDArray[np.bool_]
) -> dict[str, Any]:
    """Whether each monitor was probed by exactly one node (module docstring)."""
    params, phase, cluster = record.params, record.service, record.service.cluster
    phases = np.where(observable, record.phases, np.nan)
    _, slots, count = slot_arrivals(
        arrivals[0], arrivals[1], phases, params.interval_seconds, phase.window_start,
        phase.window_end,
    )  # fmt: skip
    expected = params.window_intervals
    owners = set(cluster.owner_start)
    return {
        "monitors_observed": int(np.count_nonzero(observable & ~np.isnan(record.phases))),
        "monitors_with_an_owner": len(owners),
        "owner_changed_in_window": sum(
            1 for i, n in cluster.owner_start.items() if cluster.owner_end.get(i) != n
        ),
        "expected_arrivals_per_monitor": expected,
        "duplicate_arrivals": int((count - slots).sum()),
        "monitors_with_duplicate_arrivals": int(np.count_nonzero(count > slots)),
        "monitors_at_twice_expected": int(np.count_nonzero(count >= 2 * expected)),
        "max_arrivals_per_monitor": int(count.max()) if count.size else 0,
        "stored_duplicates": sum(cluster.stored_close.values()),
        "monitors_with_stored_duplicates": len(cluster.stored_close),
        "stored_duplicates_whole_run": sum(cluster.stored_close_whole_run.values()),
    }


def _seconds(values: Any) -> dict[str, Any]:
    return distribution(values[~np.isnan(values)]).as_dict()


def _failover(
    record: RunRecord, arrivals: tuple[Any, Any], observable: npt.NDArray[np.bool_]
) -> dict[str, Any] | None:
    """Gaps around the kill (module docstring); None without ``--kill-node``."""
    params, phase, cluster = record.params, record.service, record.service.cluster
    if cluster.kill_node is None:
        return None
    node = cluster.nodes[cluster.kill_node - 1]
    interval = float(params.interval_seconds)
    size = len(record.plans)
    gaps = longest_gaps(
        arrivals[0], arrivals[1], size, phase.window_start, phase.window_end, interval
    )
    gaps[~observable] = np.nan
    killed = _owned(cluster, node.name, size) & observable
    bound = cluster.lease_seconds + interval
    first = np.full(size, np.inf)
    if node.killed_at is not None:
        index, at = arrivals
        after = (at >= node.killed_at) & (at < phase.window_end)
        np.minimum.at(first, index[after], at[after])
    waits = first[killed] - (node.killed_at or 0.0)
    stored = cluster.stored_longest_gap
    killed_ids = np.flatnonzero(killed)
    return {
        "node": node.name,
        "killed_at_offset_seconds": None
        if node.killed_at is None
        else node.killed_at - phase.window_start,
        "lease_seconds": cluster.lease_seconds,
        "interval_seconds": interval,
        "bound_seconds": bound,
        "buckets_taken_seconds": None
        if cluster.buckets_taken_at is None or node.killed_at is None
        else cluster.buckets_taken_at - node.killed_at,
        "killed_node_monitors": int(killed.sum()),
        "longest_gap_seconds": {
            "killed_node_monitors": _seconds(gaps[killed]),
            "other_monitors": _seconds(gaps[observable & ~killed]),
            "all_monitors": _seconds(gaps),
        },
        "monitors_over_bound": int(np.count_nonzero(gaps > bound)),
        "first_probe_after_kill_seconds": _seconds(np.where(np.isinf(waits), np.nan, waits)),
        "killed_node_monitors_not_probed_again": int(np.count_nonzero(np.isinf(waits))),
        "first_probe_over_bound": int(np.count_nonzero(waits > bound)),
        "stored_longest_gap_seconds": {
            "killed_node_monitors": max((stored.get(int(i), 0) for i in killed_ids), default=None),
            "all_monitors": max(stored.values(), default=None),
        },
    }


def cluster_section(
    record: RunRecord, arrivals: tuple[Any, Any], observable: npt.NDArray[np.bool_]
) -> dict[str, Any] | None:
    """The report's ``nodes`` section (module docstring), None for one service.
    ``arrivals``: the arrival log's ``(indices, times)`` of the service's run;
    ``observable``: which monitor indices a target sees."""
    cluster = record.service.cluster
    if cluster is None:
        return None
    size = len(record.plans)
    per_node = [
        _node_section(record, node, _owned(cluster, node.name, size), arrivals, observable)
        for node in cluster.nodes
    ]
    return {
        "count": len(cluster.nodes),
        "lease_seconds": cluster.lease_seconds,
        "split_seconds": cluster.split_seconds,
        "per_node": per_node,
        "exactly_once": _exactly_once(record, arrivals, observable),
        "failover": _failover(record, arrivals, observable),
    }


def _three(node: dict[str, Any] | None) -> str:
    node = node or {}
    return f"{fmt(node.get('p50'))} / {fmt(node.get('p99'))} / {fmt(node.get('max'))}"


def print_nodes(report: dict[str, Any], console: Console | None = None) -> None:
    """Print the ``nodes`` section (nothing for one service): a row per node, then
    whether each monitor was probed once, then the failover."""
    nodes = report.get("nodes")
    if not nodes:
        return
    console = console or table_console()
    table = Table(title=f"per node ({nodes['count']} nodes, lease {nodes['lease_seconds']:g} s)")
    for column in (
        "node", "buckets", "monitors", "checks: counted / targets saw", "missed",
        "duplicates", "lateness p50/p99/max ms", "CPU ms/check", "cores", "peak RSS MB", "exit",
    ):  # fmt: skip
        table.add_column(column, justify="left" if column == "node" else "right")
    for n in nodes["per_node"]:
        c = n["checks"]
        table.add_row(
            n["name"] + (" (killed)" if n["killed"] else ""),
            fmt(n["buckets_at_start"]),
            fmt(n["monitors_owned"]),
            f"{fmt(c['service_counted'], 0)} / {fmt(c['achieved'])}",
            fmt(c["missed"]),
            fmt(c["duplicates"]),
            _three(n["lateness_ms"]["target"]),
            fmt(n["cpu"]["ms_per_check"], 3),
            fmt(n["cpu"]["cores"]),
            fmt(n["memory"]["peak_mb"], 1),
            fmt(n["exit_code"]),
        )
    console.print(table)
    once = nodes["exactly_once"]
    console.print(
        f"probed by exactly one node: {fmt(once['monitors_with_duplicate_arrivals'])} of "
        f"{fmt(once['monitors_observed'])} monitors had a slot probed twice "
        f"({fmt(once['monitors_at_twice_expected'])} at twice the "
        f"{once['expected_arrivals_per_monitor']} arrivals expected); "
        f"{fmt(once['stored_duplicates'])} checks stored twice; "
        f"bucket split took {nodes['split_seconds']:.1f} s",
        highlight=False,
    )
    failover = nodes["failover"]
    if failover:
        gap = failover["longest_gap_seconds"]
        console.print(
            f"failover of {failover['node']} at +{fmt(failover['killed_at_offset_seconds'], 1)} s "
            f"(bound lease + interval = {failover['bound_seconds']:g} s): longest gap per "
            f"monitor p50/p99/max s, its monitors {_three(gap['killed_node_monitors'])}, "
            f"all {_three(gap['all_monitors'])}; over the bound "
            f"{fmt(failover['monitors_over_bound'])}; first probe after the kill "
            f"{_three(failover['first_probe_after_kill_seconds'])} s "
            f"({fmt(failover['first_probe_over_bound'])} over the bound); not probed again "
            f"{fmt(failover['killed_node_monitors_not_probed_again'])}; buckets taken after "
            f"{fmt(failover['buckets_taken_seconds'], 1)} s",
            highlight=False,
        )
