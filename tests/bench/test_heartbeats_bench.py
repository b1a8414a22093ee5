"""A tiny ``uptrio bench heartbeats``: the real command end to end (the service, wrk on
/healthz and a ping URL, heartbeats inserted and loaded by an engine restart), checked for
a complete report. It asserts no speed and no memory figure.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.bench.helpers import uptrio


def test_bench_heartbeats_reports_throughput_and_memory(tmp_path: Path) -> None:
    output = tmp_path / "heartbeats"
    done = uptrio(
        "bench", "heartbeats", "--heartbeats", "20", "--period", "30", "--rounds", "0",
        "--wrk-seconds", "1", "--wrk-rounds", "1", "--wrk-connections", "4",
        "--output", str(output), timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "goals:" in done.stdout, done.stdout
    report: dict[str, Any] = json.loads((output / "heartbeats.json").read_text())
    throughput = report["throughput"]
    for name in ("healthz", "ping"):
        figures = throughput["figures"][name]
        assert figures["requests_per_second"] > 0
        assert figures["non_2xx_3xx"] == 0 and figures["socket_errors"] == 0, figures
    assert throughput["stored"] >= throughput["answered"] > 0  # no ping answered 200 lost
    assert throughput["service_exit_status"] == 0
    memory = report["memory"]
    assert memory["heartbeats"] == 20 and memory["rss_loaded_bytes"] > 0
    assert memory["down_at_end"] == 0
    goals = report["goals"]
    assert isinstance(goals["throughput_met"], bool) and isinstance(goals["memory_met"], bool)
