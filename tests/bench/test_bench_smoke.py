"""A tiny ``uptrio bench``: the real command, end to end, checked for a complete and
consistent report. It asserts no speed.

Rules as elsewhere: loopback only (the bench's targets listen on 127.0.0.0/8), ports
chosen by the OS, a time limit on the whole run (the command's own ``timeout``).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.bench.helpers import uptrio

# Figures read from the service's /metrics: absent (and reported missing) only while the
# service has no such endpoint.
_METRICS_FIGURES = (
    "service.checks.service_",
    "service.lateness_ms.service.",
    "service.store.",
    "service.probe_latency_ms.service_histogram.",
    "service.supervisor_restarts",
)


def _bench(tmp_path: Path) -> dict[str, Any]:
    output = tmp_path / "out"
    done = uptrio(
        "bench",
        "--monitors",
        "200",
        "--type",
        "mix",
        "--interval",
        "2",
        "--timeout",
        "1",
        "--duration",
        "4",
        "--warmup",
        "1",
        "--api-rps",
        "4",
        "--http-target",
        "builtin",
        "--baseline",
        "--no-progress",
        "--output",
        str(output),
        timeout=90,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "checks/s achieved" in done.stdout, done.stdout
    assert (output / "chart.png").stat().st_size > 10_000
    assert (output / "service.log").exists()
    report: dict[str, Any] = json.loads((output / "report.json").read_text())
    return report


def test_bench_reports_every_figure_and_counts_agree(tmp_path: Path) -> None:
    report = _bench(tmp_path)
    service, baseline = report["service"], report["baseline"]

    metrics_present = service["checks"]["service_counted"] is not None
    if metrics_present:
        assert report["missing"] == []
    else:  # only what /metrics would have given is missing
        assert all(m.startswith(_METRICS_FIGURES) for m in report["missing"]), report["missing"]

    params = report["parameters"]
    assert params["monitors"] == 200 and params["window_intervals"] == 2
    assert report["creation"]["monitors"] == 200
    assert report["plan"]["types"] == {"http": 50, "tcp": 50, "dns": 50, "ping": 50}
    assert report["machine"]["cores"] >= 1 and report["versions"]["postgres"]

    for phase in (service, baseline):
        checks = phase["checks"]
        # 200 monitors, each on its grid, for two whole intervals
        assert checks["scheduled"] == 400
        assert checks["achieved"] + checks["missed"] == checks["scheduled"]
        assert checks["duplicates"] == 0
        assert phase["lateness_ms"]["target"]["count"] == checks["achieved"]
        assert phase["series"] and phase["samples"]
    # the window opens and closes at quiet instants: the service counted what the
    # targets saw, but for a probe that reached its target just before the window closed
    # and was counted (when it finished) after the service's counter was read: on a
    # loaded machine the widest gap between 200 monitors' grid points (tens of
    # milliseconds) can be shorter than a probe's lateness plus its response
    if metrics_present:
        counted, seen = service["checks"]["service_counted"], service["checks"]["achieved"]
        assert seen - 2 <= counted <= seen, (counted, seen)
        assert service["checks"]["service_failures"] == 0
    # stopped at a quiet instant: every check a target saw is a stored row, per monitor
    consistency = service["run_consistency"]
    assert consistency["monitors_compared"] == 200
    assert consistency["mismatched_monitors"] == 0, consistency
    assert consistency["target_total"] == consistency["stored_total"] > 400
    assert baseline["checks"]["own_count"] == baseline["checks"]["achieved"]

    cpu = service["cpu"]
    assert cpu["total_ms_per_check"] is not None
    together = cpu["service_ms_per_check"] + cpu["postgres_ms_per_check"]
    assert cpu["total_ms_per_check"] == pytest.approx(together)
    assert report["ratios"]["total_cpu_vs_baseline"] is not None
    assert service["memory"]["service"]["peak_mb"] > 0
    assert service["api"]["statuses"] == {
        "200": service["api"]["get_monitor_ms"]["count"]
        + service["api"]["list_monitors_ms"]["count"]
    }


def test_bench_history_reports_latency_sizes_and_a_partition_drop(tmp_path: Path) -> None:
    output = tmp_path / "history"
    done = uptrio(
        "bench", "history", "--monitors", "20", "--days", "3", "--raw-days", "1",
        "--raw-interval", "300", "--requests", "3", "--output", str(output), timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    report: dict[str, Any] = json.loads((output / "history.json").read_text())
    assert report["load"]["monitors"] == 20
    assert report["sizes"]["rollup_rows"] == 20 * 3 * 24
    assert report["sizes"]["raw_check_rows"] == 20 * 86_400 // 300
    assert report["sizes"]["bytes_per_raw_check"] > 0
    cases = {(row["days"], row["granularity"]) for row in report["availability"]}
    assert cases == {(d, g) for d in (1, 30, 90, 400) for g in ("-", "day")}
    assert all(0 < row["p50_ms"] <= row["max_ms"] for row in report["availability"])
    assert report["drop_partition"]["rows"] > 0 and report["drop_partition"]["seconds"] >= 0
    assert "availability, one monitor" in done.stdout


def _pair(mode: str, output: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """``uptrio bench <mode>`` (webhooks or alerts: two runs side by side) at a tiny
    scale: 20 monitors every second, a quarter flapping, a 2 s window; it must succeed."""
    done = uptrio(
        "bench", mode, "--monitors", "20", "--interval", "1", "--timeout", "1",
        "--window", "2", "--warmup", "1", "--flapping", "0.25", "--api-rps", "0",
        "--http-target", "builtin", *extra, "--drain", "10", "--no-progress",
        "--no-chart", "--output", str(output),
        timeout=150,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def test_bench_alerts_notifies_every_alert_once(tmp_path: Path) -> None:
    """``uptrio bench alerts`` at a tiny scale: 20 monitors every second, a quarter
    flapping, a real webhook endpoint and a default policy paging a webhook channel, both
    on the bench's receiver. It asserts the report's shape, that every event of the
    window reached the receiver signed and that no notification was lost or sent twice,
    not speed. (``uptrio bench webhooks`` is the same pair without the policy,
    ``bench.pair``: this one test covers both.)"""
    output = tmp_path / "alerts"
    done = _pair("alerts", output)
    assert "commit to first notification" in done.stdout, done.stdout
    result: dict[str, Any] = json.loads((output / "report.json").read_text())
    assert result["reference"]["total_ms_per_check"] > 0
    assert result["alerting"]["total_ms_per_check"] > 0
    assert result["cpu_ratio"] is not None
    assert result["reference"]["missed"] == result["alerting"]["missed"] == 0
    figures, hooks = result["alert_figures"], result["webhook_figures"]
    assert figures["channel_type"] == "webhook" and figures["policy"].startswith("esc_")
    # 5 flapping monitors: an alert for each move into down, its trigger and, once up
    # again, its resolution notice
    raised = figures["alerts_raised"]
    assert 1 <= raised == hooks["events_by_type"]["alert.triggered"], hooks["events_by_type"]
    kinds = figures["notifications"]
    assert set(kinds) <= {"trigger", "resolved"} and sum(kinds["trigger"].values()) == raised
    assert kinds["trigger"]["failed"] == 0 and kinds["trigger"]["pending"] == 0
    assert figures["lost"] == 0 and hooks["lost"] == 0
    whole = figures["whole_run"]
    assert whole["duplicates"] == 0 and whole["succeeded_not_received"] == 0
    assert whole["received_posts"] >= figures["received"] >= kinds["trigger"]["succeeded"]
    latency = figures["first_notification_latency_ms"]
    assert latency["count"] + figures["alerts_without_first_notification"] == raised
    assert latency["count"] >= 1 and 0 < latency["p50"] <= latency["p99"] <= latency["max"]
    assert set(result["goals"]) == {
        "first_notification_p99_ms_at_most_1000", "every_alert_notified",
        "none_lost_or_twice", "cpu_at_most_5_percent_more",
    }  # fmt: skip
    assert result["goals"]["none_lost_or_twice"] is True
    # the webhook endpoint: every event of the window delivered, signed
    assert hooks["track_commit_timestamp"] == "on"
    types = hooks["events_by_type"]
    assert {"monitor.down", "incident.created", "alert.triggered"} <= set(types)
    assert hooks["deliveries"] == {"succeeded": hooks["events_written"], "pending": 0,
                                   "failed": 0}  # fmt: skip
    assert hooks["received"] == hooks["events_written"]
    assert hooks["whole_run"]["succeeded_not_received"] == 0
    changes = hooks["status_change_latency_ms"]
    assert changes["count"] == types["monitor.down"] + types.get("monitor.up", 0)
    signatures = hooks["signatures"]
    assert signatures["checked"] >= 1 and signatures["valid"] == signatures["checked"]
