"""A tiny ``uptrio bench oncall``: the real command end to end (the service, members, a
schedule and overrides made through the API, the four cases timed on one connection),
checked for a complete report. It asserts no speed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.bench.helpers import uptrio


def test_bench_oncall_reports_each_case(tmp_path: Path) -> None:
    output = tmp_path / "oncall"
    done = uptrio(
        "bench", "oncall", "--requests", "8", "--week-requests", "4", "--quarter-requests", "4",
        "--warmup-requests", "2", "--schedule-members", "6", "--overrides", "10",
        "--output", str(output), timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "goal: on-call p99" in done.stdout, done.stdout
    report: dict[str, Any] = json.loads((output / "oncall.json").read_text())
    assert report["schedule"]["members"] == 6 and report["schedule"]["overrides"] == 10
    figures = report["figures"]
    counts = {name: row["count"] for name, row in figures.items()}
    assert counts == {"healthz": 8, "schedule": 8, "on_call": 8, "shifts_7d": 4, "shifts_90d": 4}
    for row in figures.values():
        assert 0 < row["p50_ms"] <= row["p90_ms"] <= row["p99_ms"] <= row["max_ms"], row
        assert row["requests_per_second"] > 0
    assert figures["on_call"]["empty_answers"] == 0  # the first layer has no restriction
    assert figures["on_call"]["mean_items"] >= 1
    assert figures["shifts_90d"]["mean_items"] > figures["shifts_7d"]["mean_items"] > 1
    assert isinstance(report["goal"]["met"], bool)
