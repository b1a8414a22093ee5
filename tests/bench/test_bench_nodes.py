"""``uptrio bench --nodes 2`` and ``--kill-node`` at a tiny scale (docs/benchmarks.md,
``uptrio bench``): the real command, two real ``uptrio serve`` processes on the bench's
embedded Postgres, checked for the report's shape and for what the figures must say: with
two nodes every monitor is probed by exactly one node (each node counts exactly the arrivals
at its own monitors' targets, no slot gets two arrivals, no check is stored twice), and
after a SIGKILL the killed node's monitors are probed again by the other; with
``--regions 3`` on three nodes every monitor is probed once per region and interval. It
asserts no speed.

20 http monitors every second, 2 s leases, a 6 s warm-up (a monitor created through the
node that does not hold its bucket reaches its owner by reconciliation, every 5 s).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.bench.helpers import uptrio

_LEASE = 2.0
_INTERVAL = 1.0


def _bench(tmp_path: Path, *extra: str, nodes: int = 2, monitors: int = 20) -> dict[str, Any]:
    output = tmp_path / "out"
    done = uptrio(
        "bench", "--nodes", str(nodes), "--monitors", str(monitors), "--interval", "1",
        "--timeout", "1", "--warmup", "6", "--lease-seconds", str(_LEASE), "--api-rps", "2",
        "--http-target", "builtin", "--no-progress", "--no-chart", "--output", str(output),
        *extra, timeout=90,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"per node ({nodes} nodes" in done.stdout, done.stdout
    assert all((output / f"service-{k}.log").exists() for k in range(1, nodes + 1))
    report: dict[str, Any] = json.loads((output / "report.json").read_text())
    return report


def _shape(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The figures of one service's report are there, for the whole cluster, and a row
    per node; returns the rows."""
    assert report["parameters"]["nodes"] == 2
    assert report["creation"]["monitors"] == 20
    service, nodes = report["service"], report["nodes"]
    checks = service["checks"]
    assert checks["achieved"] + checks["missed"] == checks["scheduled"]
    assert service["cpu"]["service_ms_per_check"] > 0 and service["cpu"]["postgres_ms_per_check"]
    assert service["memory"]["service"]["peak_mb"] > 0
    assert nodes["count"] == 2 and nodes["lease_seconds"] == _LEASE
    per_node = nodes["per_node"]
    assert [n["name"] for n in per_node] == ["node-1", "node-2"]
    assert sum(n["buckets_at_start"] for n in per_node) == 256
    assert all(n["buckets_at_start"] == 128 for n in per_node)
    # every monitor's bucket is held by exactly one node
    assert sum(n["monitors_owned"] for n in per_node) == 20
    assert nodes["exactly_once"]["monitors_with_an_owner"] == 20
    for node in per_node:
        assert node["cpu"]["ms_per_check"] > 0 and node["memory"]["peak_mb"] > 0
        assert node["lateness_ms"]["target"]["count"] == node["checks"]["achieved"]
    assert report["missing"] == []
    return per_node  # type: ignore[no-any-return]


def test_two_nodes_each_probe_their_own_monitors_once(tmp_path: Path) -> None:
    report = _bench(tmp_path, "--window", "3")
    per_node = _shape(report)
    once = report["nodes"]["exactly_once"]
    assert report["nodes"]["failover"] is None
    assert once["owner_changed_in_window"] == 0
    # no monitor's slot got two probes (two nodes probing it), none stored twice
    assert once["duplicate_arrivals"] == 0 and once["monitors_with_duplicate_arrivals"] == 0
    assert once["stored_duplicates"] == 0
    assert once["max_arrivals_per_monitor"] <= once["expected_arrivals_per_monitor"]
    # each node probed exactly its own monitors: its count is their targets' arrivals
    for node in per_node:
        assert node["checks"]["service_counted"] == node["checks"]["achieved"] > 0, node
        assert node["checks"]["duplicates"] == 0 and node["exit_code"] == 0
    assert sum(n["checks"]["achieved"] for n in per_node) == report["service"]["checks"]["achieved"]
    assert report["service"]["run_consistency"]["mismatched_monitors"] == 0


def test_a_killed_nodes_monitors_are_probed_again_by_the_other(tmp_path: Path) -> None:
    report = _bench(tmp_path, "--window", "8", "--kill-node")
    per_node = _shape(report)
    killed, survivor = per_node[1], per_node[0]
    assert killed["killed"] and killed["exit_code"] == -9 and survivor["exit_code"] == 0
    failover = report["nodes"]["failover"]
    assert failover["node"] == "node-2"
    assert failover["bound_seconds"] == _LEASE + _INTERVAL
    assert 3.0 <= failover["killed_at_offset_seconds"] < 5.0  # the window's middle
    assert failover["killed_node_monitors"] == killed["monitors_owned"] > 0
    # every monitor of the killed node was probed again, within the lease plus an
    # interval of the kill (0.5 s more for loading them)
    assert failover["killed_node_monitors_not_probed_again"] == 0
    waits = failover["first_probe_after_kill_seconds"]
    assert waits["count"] == failover["killed_node_monitors"]
    assert waits["max"] <= _LEASE + _INTERVAL + 0.5
    gaps = failover["longest_gap_seconds"]
    assert gaps["killed_node_monitors"]["count"] == failover["killed_node_monitors"]
    # a gap spans the time before the kill too: at most an interval more
    assert gaps["killed_node_monitors"]["max"] <= _LEASE + 2 * _INTERVAL + 0.5
    assert gaps["other_monitors"]["max"] < 2 * _INTERVAL
    assert failover["buckets_taken_seconds"] is not None
    assert failover["buckets_taken_seconds"] <= _LEASE + 1.0
    # the survivor probed its own monitors and the killed node's: more than its own
    assert survivor["checks"]["service_counted"] > survivor["checks"]["achieved"]
    once = report["nodes"]["exactly_once"]
    assert once["monitors_with_duplicate_arrivals"] == 0 and once["stored_duplicates"] == 0


def test_three_regions_probe_every_monitor_once_each(tmp_path: Path) -> None:
    report = _bench(
        tmp_path, "--window", "3", "--regions", "3", "--probe-source-addresses",
        nodes=3, monitors=30,
    )  # fmt: skip
    assert report["parameters"]["regions"] == 3
    assert "--region" in report["nodes"]["per_node"][2]["command"]
    regions = report["regions"]
    assert regions["count"] == 3 and regions["window"]["intervals"] == 3
    assert [r["name"] for r in regions["per_region"]] == ["r1", "r2", "r3"]
    assert [r["nodes"] for r in regions["per_region"]] == [["node-1"], ["node-2"], ["node-3"]]
    # each region stored each monitor's check of each interval: 30 x 3 x 3 in total
    for region in regions["per_region"]:
        assert region["checks"]["expected"] == 30 * 3, region
        assert region["checks"]["stored"] == 30 * 3 and region["checks"]["missed"] == 0, region
        assert region["lateness_ms"]["count"] > 0 and region["cpu"]["service_ms_per_check"] > 0
        assert region["region_moves_in_window"] == 0 and region["region_moves_to_down"] == 0
    total = regions["total"]
    assert total["checks"]["expected"] == total["checks"]["stored"] == 30 * 3 * 3
    assert total["checks"]["missed"] == total["checks"]["extra"] == 0
    assert total["cpu"]["postgres_ms_per_check"] > 0 and total["cpu"]["ms_per_monitor_interval"]
    # healthy targets: no monitor moved after its first up, none down, no incident
    assert total["status_changes_in_window"] == total["status_changes_to_down"] == 0
    assert total["incidents"] == 0 and total["monitors_not_up"] == 0
    # the targets saw each slot probed three times, once from each node's address
    once = report["nodes"]["exactly_once"]
    assert once["max_arrivals_per_monitor"] == 3 * once["expected_arrivals_per_monitor"]
