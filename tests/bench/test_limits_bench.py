"""A tiny ``uptrio bench limits``: the real command end to end (an embedded Postgres, two
clusters of two ``uptrio serve`` nodes, the overshoot burst and wrk on both nodes),
checked for a complete report and for the overshoot's counts. It asserts no speed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.bench.helpers import uptrio


def test_bench_limits_reports_overshoot_and_cost_per_request(tmp_path: Path) -> None:
    output = tmp_path / "limits"
    done = uptrio(
        "bench", "limits", "--node-counts", "2", "--limit", "100", "--senders", "4",
        "--wrk-seconds", "1", "--wrk-connections", "2", "--output", str(output), timeout=180,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "overshoot" in done.stdout and "cost per request" in done.stdout, done.stdout
    report: dict[str, Any] = json.loads((output / "limits.json").read_text())
    (run,) = report["runs"]
    assert run["nodes"] == 2
    over = run["overshoot"]
    assert over["sent"] == 110 and over["other_statuses"] == 0 and over["within_the_minute"]
    assert 99 <= over["admitted"] <= 100, over  # within 1 % of the limit, never over
    assert over["refusals_got"] == over["sent"] - over["admitted"]
    assert over["refusals_due"] == 10 and over["statements"] > 0
    cost = run["cost"]
    assert cost["requests"] > 0 and cost["non_2xx"] == 0, cost
    assert cost["cpu_ms_per_request"]["nodes"] > 0 and cost["statements"] > 0
