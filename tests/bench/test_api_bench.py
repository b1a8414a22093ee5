"""A tiny ``uptrio bench api``: the real command end to end (the service without engine,
monitors made through the API, wrk on ``/healthz``, one monitor and a page of 100 in
turns), checked for a complete report. It asserts no speed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.bench.helpers import uptrio


def test_bench_api_reports_each_route_against_healthz(tmp_path: Path) -> None:
    output = tmp_path / "api"
    done = uptrio(
        "bench", "api", "--monitors", "101", "--wrk-seconds", "1", "--wrk-rounds", "1",
        "--wrk-connections", "2", "--output", str(output), timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "goals: GET /monitors/:id >= 60% of /healthz" in done.stdout, done.stdout
    report: dict[str, Any] = json.loads((output / "report.json").read_text())
    assert report["monitors"] == 101
    figures = report["figures"]
    assert set(figures) == {"healthz", "monitor", "list_100"}
    for name, row in figures.items():
        assert row["requests_per_second"] > 0 and len(row["per_round"]) == 1, row
        assert row["non_2xx_3xx"] == 0 and row["socket_errors"] == 0, (name, row)
        assert 0 < row["p50_ms"] <= row["p99_ms"], row
    for name in ("monitor", "list_100"):
        assert figures[name]["ratio_to_healthz"] > 0
        goal = report["goals"][name]
        assert goal["share_of_healthz"] == figures[name]["ratio_to_healthz"]
        assert isinstance(goal["met"], bool)
    assert report["goals"]["monitor"]["share_of_healthz_min"] == 0.6
    assert report["profiles"] is None  # only with --profile
