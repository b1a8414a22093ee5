"""A tiny ``uptrio bench status-pages``: the real command end to end (history, cold
renders, the load, wrk on loopback), checked for a complete report. It asserts no speed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def test_bench_status_pages_reports_renders_and_throughput(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("UPTRIO_")}
    output = tmp_path / "pages"
    done = subprocess.run(
        [sys.executable, "-m", "web.cli", "bench", "status-pages", "--monitors", "40",
         "--interval", "2", "--timeout", "1", "--warmup", "1", "--http-target", "builtin",
         "--components", "5", "--days", "3", "--pages", "2", "--wrk-seconds", "1",
         "--wrk-rounds", "1", "--wrk-connections", "4", "--no-progress",
         "--output", str(output)],
        capture_output=True, text=True, timeout=120, cwd=ROOT, env=env, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "goals:" in done.stdout, done.stdout
    report: dict[str, Any] = json.loads((output / "status-pages.json").read_text())
    cold = report["cold_render"]
    assert cold["cold"]["count"] == cold["cached"]["count"] == 2
    assert cold["html_bytes"] > 1000 and cold["incidents"] == 3
    load = report["under_load"]
    assert load["monitors"] == 40
    for name in ("healthz", "live_page", "history_page"):
        figures = load["figures"][name]
        assert figures["requests_per_second"] > 0
        assert figures["non_2xx_3xx"] == 0 and figures["socket_errors"] == 0, figures
    assert load["figures"]["live_page"]["ratio_to_healthz"] > 0
    goals = report["goals"]
    assert isinstance(goals["throughput_met"], bool) and isinstance(goals["cold_render_met"], bool)
