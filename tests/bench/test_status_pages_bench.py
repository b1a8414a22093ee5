"""A tiny ``uptrio bench status-pages``: the real command end to end (history, cold
renders, the load, wrk on loopback), checked for a complete report. It asserts no speed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.bench.helpers import uptrio


def test_bench_status_pages_reports_renders_and_throughput(tmp_path: Path) -> None:
    output = tmp_path / "pages"
    done = uptrio(
        "bench", "status-pages", "--monitors", "40", "--interval", "2", "--timeout", "1",
        "--warmup", "1", "--http-target", "builtin", "--components", "5", "--days", "3",
        "--pages", "2", "--wrk-seconds", "1", "--wrk-rounds", "1", "--wrk-connections", "4",
        "--no-progress", "--output", str(output), timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "goals:" in done.stdout, done.stdout
    report: dict[str, Any] = json.loads((output / "status-pages.json").read_text())
    cold = report["cold_render"]
    assert cold["cold"]["count"] == cold["cached"]["count"] == 2
    assert cold["html_bytes"] > 1000 and cold["incidents"] == 1
    load = report["under_load"]
    assert load["monitors"] == 40
    for name in ("healthz", "live_page", "history_page"):
        figures = load["figures"][name]
        assert figures["requests_per_second"] > 0
        assert figures["non_2xx_3xx"] == 0 and figures["socket_errors"] == 0, figures
    assert load["figures"]["live_page"]["ratio_to_healthz"] > 0
    goals = report["goals"]
    assert isinstance(goals["throughput_met"], bool) and isinstance(goals["cold_render_met"], bool)
