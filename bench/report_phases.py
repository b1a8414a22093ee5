"""The report's sections of one phase: ``service`` and ``baseline`` (docs/benchmarks.md,
"`uptrio bench`": lateness measured from outside the service as well as from its own
records, CPU per check, memory, the store, the API, and for the service the
``run_consistency`` of the targets' arrivals against the stored checks).

`bench.report.build_report` puts them in the whole report; `window_arrivals` and
`observable_mask` also feed its ``nodes`` section (`bench.cluster_report`). Units are in
the keys, as in `bench.report`: ``_ms`` milliseconds, ``_mb`` mebibytes, ``_kb``
kibibytes, ``per_second`` per wall-clock second of the window; a figure that could not
be measured is ``None``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .analysis import Distribution, arrival_series, distribution, per_monitor_counts, window_figures
from .measure import PhaseRecord
from .metrics import counter_delta, gauge_value, histogram_delta, histogram_summary
from .run import RunRecord

__all__ = ["baseline_section", "observable_mask", "service_section", "window_arrivals"]

_MB = 2**20


def _ms_per_check(cpu_seconds: float | None, checks: float | None) -> float | None:
    if cpu_seconds is None or not checks:
        return None
    return cpu_seconds * 1000.0 / checks


def _cpu_seconds(phase: PhaseRecord, prefix: str) -> float | None:
    names = [n for n in phase.cpu if n == prefix or n.startswith(prefix + "-")]
    if not names:
        return None
    return sum(phase.cpu[n][1].seconds - phase.cpu[n][0].seconds for n in names)


def window_arrivals(record: RunRecord, start: float, end: float) -> tuple[Any, Any]:
    """The targets' arrivals from ``start`` to ``end`` (epoch seconds, end excluded):
    (monitor indices as int64, times as float64 epoch seconds), numpy arrays."""
    indices = np.frombuffer(record.arrivals.indices, dtype=np.int32).astype(np.int64)
    times = np.frombuffer(record.arrivals.times, dtype=np.float64)
    keep = (times >= start) & (times < end)
    return indices[keep], times[keep]


def observable_mask(record: RunRecord) -> Any:
    """A numpy bool array by plan index: whether the targets see that monitor's probes
    (ping only where its arrivals are observable on this machine)."""
    mask = np.zeros(len(record.plans), dtype=bool)
    ping_ok = "ping arrivals not observable" not in " ".join(record.notes)
    for plan in record.plans:
        mask[plan.index] = plan.observable and (plan.type != "ping" or ping_ok)
    return mask


def _target_side(record: RunRecord, phase: PhaseRecord, begin: float) -> dict[str, Any]:
    """Target-side figures of ``phase``'s window, its series and its run totals."""
    params = record.params
    indices, times = window_arrivals(record, begin, phase.stopped_at)
    observable = observable_mask(record)
    figures = window_figures(
        indices,
        times,
        record.phases,
        observable,
        params.interval_seconds,
        phase.window_start,
        phase.window_end,
    )
    series = arrival_series(
        indices,
        times,
        record.phases,
        params.interval_seconds,
        phase.window_start,
        begin,
        phase.stopped_at,
    )
    return {"figures": figures, "series": series, "indices": indices, "times": times}


def _dist(d: Distribution) -> dict[str, Any]:
    return d.as_dict()


def _phase_common(record: RunRecord, phase: PhaseRecord, target: dict[str, Any]) -> dict[str, Any]:
    params = record.params
    window = params.window_seconds
    figures = target["figures"]
    unobservable_scheduled = (
        params.monitors - figures.observable_monitors
    ) * params.window_intervals
    return {
        "window": {
            "start": phase.window_start,
            "end": phase.window_end,
            "seconds": window,
            "intervals": params.window_intervals,
            "quiet_gap_ms": phase.quiet_gap_seconds * 1000.0,
        },
        "checks": {
            "scheduled_per_second": params.monitors / params.interval_seconds,
            "scheduled_observable_per_second": figures.scheduled / window,
            "achieved_per_second": figures.achieved / window,
            "scheduled": figures.scheduled,
            "achieved": figures.achieved,
            "missed": figures.missed,
            "duplicates": figures.duplicates,
            "observable_monitors": figures.observable_monitors,
            "unobservable_scheduled": unobservable_scheduled,
        },
        "lateness_ms": {
            "target": _dist(figures.lateness_ms),
            "gap_jitter": _dist(figures.gap_jitter_ms),
        },
    }


def _memory(phase: PhaseRecord, name: str, monitors: int) -> dict[str, Any]:
    use_pss = name == "postgres"
    idle = phase.memory_idle.get(name)
    peak = phase.memory_peak.get(name)

    def size(sample: Any) -> int | None:
        if sample is None:
            return None
        return int(sample.pss_bytes if use_pss else sample.rss_bytes)

    idle_b, peak_b = size(idle), size(peak)
    figures: dict[str, Any] = {
        "measure": "pss_sum" if use_pss else "rss",
        "idle_mb": None if idle_b is None else idle_b / _MB,
        "peak_mb": None if peak_b is None else peak_b / _MB,
        "per_monitor_kb": None if peak_b is None else peak_b / 1024 / monitors,
        "added_per_monitor_kb": None
        if peak_b is None or idle_b is None
        else (peak_b - idle_b) / 1024 / monitors,
    }
    if not use_pss:  # one process: the kernel kept its peak (VmHWM)
        hwm = phase.peak_rss_hwm.get(name)
        figures["peak_rss_since_start_mb"] = None if hwm is None else hwm / _MB
    return figures


def service_section(record: RunRecord) -> dict[str, Any]:
    """The ``service`` section: the service's window, seen by the targets and by its own
    ``/metrics``, with CPU, memory, store, API and ``run_consistency``."""
    params = record.params
    phase = record.service
    target = _target_side(record, phase, record.creation.started_at)
    out = _phase_common(record, phase, target)
    before, after = phase.metrics if phase.metrics else (None, None)
    checks = out["checks"]
    service_checks = None
    if before is not None and after is not None:
        service_checks = counter_delta(before, after, "uptrio_checks_total")
        checks["service_counted"] = service_checks
        failed = counter_delta(before, after, "uptrio_checks_total", result="failed")
        checks["service_failures"] = 0.0 if failed is None and service_checks else failed
        checks["service_missed"] = counter_delta(before, after, "uptrio_checks_missed_total")
        late = histogram_delta(before, after, "uptrio_schedule_lateness_seconds")
        out["lateness_ms"]["service"] = histogram_summary(late, 1000.0)
        probe = histogram_delta(before, after, "uptrio_probe_duration_seconds")
        probe_summary = histogram_summary(probe, 1000.0)
        store: dict[str, Any] = {
            "rows_written": counter_delta(before, after, "uptrio_store_rows_written_total"),
            "rows_dropped": counter_delta(before, after, "uptrio_store_rows_dropped_total"),
            "batch_size": histogram_summary(
                histogram_delta(before, after, "uptrio_store_batch_size")
            ),
            "flush_ms": histogram_summary(
                histogram_delta(before, after, "uptrio_store_flush_seconds"), 1000.0
            ),
            "commit_delay_ms": histogram_summary(
                histogram_delta(before, after, "uptrio_store_commit_delay_seconds"), 1000.0
            ),
            "queue_depth_at_end": gauge_value(after, "uptrio_store_queue_depth"),
        }
        rows = store["rows_written"]
        store["rows_written_per_second"] = None if rows is None else rows / params.window_seconds
        restarts = counter_delta(before, after, "uptrio_supervisor_restarts_total")
        monitors_gauge = {
            dict(labels).get("status", "?"): value
            for labels, value in after.select("uptrio_monitors")
        }
    else:
        probe_summary = histogram_summary(None)
        store = {}
        restarts = None
        monitors_gauge = {}
    if before is not None and before.missing:
        out["metrics_error"] = before.error
    checks.setdefault("service_counted", None)
    checks.setdefault("service_failures", None)
    checks.setdefault("service_missed", None)
    out["lateness_ms"].setdefault("service", histogram_summary(None))
    for key in (
        "rows_written",
        "rows_written_per_second",
        "rows_dropped",
        "batch_size",
        "flush_ms",
        "commit_delay_ms",
        "queue_depth_at_end",
    ):
        store.setdefault(key, histogram_summary(None) if key.endswith(("_ms", "_size")) else None)
    out["store"] = store
    if phase.stored_window_seconds > 0:
        store["rows_stored_per_second"] = len(phase.stored_latency_ms) / phase.stored_window_seconds
    else:
        store["rows_stored_per_second"] = None
    out["probe_latency_ms"] = {
        "stored": _dist(distribution(phase.stored_latency_ms)),
        "service_histogram": probe_summary,
    }
    denominator = service_checks
    denominator_source = "uptrio_checks_total"
    if denominator is None:
        denominator = checks["achieved"] + checks["unobservable_scheduled"]
        denominator_source = "target arrivals + scheduled checks of unobservable monitors"
    service_s = _cpu_seconds(phase, "service")
    postgres_s = _cpu_seconds(phase, "postgres")
    targets_s = _cpu_seconds(phase, "target")
    total_s = None if service_s is None or postgres_s is None else service_s + postgres_s
    window = params.window_seconds
    out["cpu"] = {
        "checks_counted": denominator,
        "checks_source": denominator_source,
        "service_ms_per_check": _ms_per_check(service_s, denominator),
        "postgres_ms_per_check": _ms_per_check(postgres_s, denominator),
        "total_ms_per_check": _ms_per_check(total_s, denominator),
        "service_cores": None if service_s is None else service_s / window,
        "postgres_cores": None if postgres_s is None else postgres_s / window,
        "targets_cores": None if targets_s is None else targets_s / window,
    }
    out["memory"] = {
        "service": _memory(phase, "service", params.monitors),
        "postgres": _memory(phase, "postgres", params.monitors),
    }
    api = phase.api
    out["api"] = {
        "requests_per_second": params.api_rps,
        "get_monitor_ms": _dist(distribution(api.by_route.get("GET /monitors/:id", [])))
        if api
        else None,
        "list_monitors_ms": _dist(distribution(api.by_route.get("GET /monitors", [])))
        if api
        else None,
        "statuses": api.statuses if api else None,
    }
    out["supervisor_restarts"] = restarts
    out["monitors_by_status"] = monitors_gauge
    out["run_consistency"] = _consistency(record, target)
    return _with_timeline(out, phase, target)


def _with_timeline(
    out: dict[str, Any], phase: PhaseRecord, target: dict[str, Any]
) -> dict[str, Any]:
    """``out`` with what every phase section ends with: the exit code, the per-second
    series of arrivals and samples, and the profile when one was taken."""
    out["exit_code"] = phase.exit_code
    out["series"] = [_point(p) for p in target["series"]]
    out["samples"] = phase.series
    if phase.profile is not None:
        out["profile"] = phase.profile
    return out


def _point(p: Any) -> dict[str, Any]:
    return {
        "t": p.t,
        "arrivals": p.arrivals,
        "lateness_p50_ms": p.lateness_p50_ms,
        "lateness_p99_ms": p.lateness_p99_ms,
    }


def _consistency(record: RunRecord, target: dict[str, Any]) -> dict[str, Any]:
    """Per monitor, over the service's whole run: slots the targets saw against checks
    stored (observable monitors whose targets answer at once; slow ones may be cut off
    by the stop)."""
    stored = record.service.stored_counts or {}
    seen = per_monitor_counts(
        target["indices"],
        target["times"],
        record.phases,
        record.params.interval_seconds,
        record.creation.started_at,
        record.service.stopped_at,
    )
    observable = observable_mask(record)
    compared = [
        p.index
        for p in record.plans
        if observable[p.index] and p.behaviour in ("ok", "failing", "flapping")
    ]
    mismatched = [i for i in compared if seen.get(i, 0) != stored.get(i, 0)]
    return {
        "monitors_compared": len(compared),
        "target_total": sum(seen.get(i, 0) for i in compared),
        "stored_total": sum(stored.get(i, 0) for i in compared),
        "mismatched_monitors": len(mismatched),
        "mismatched_examples": [
            {"index": i, "target": seen.get(i, 0), "stored": stored.get(i, 0)}
            for i in mismatched[:5]
        ],
    }


def baseline_section(record: RunRecord) -> dict[str, Any] | None:
    """The ``baseline`` section (the bare trio loop's window and its own records), or
    ``None`` for a run without ``--baseline``."""
    phase = record.baseline
    if phase is None:
        return None
    params = record.params
    target = _target_side(record, phase, phase.started_at)
    out = _phase_common(record, phase, target)
    rows = phase.baseline_records or {}
    deadline = np.asarray(rows.get("deadline", []), dtype=np.float64)
    started = np.asarray(rows.get("started", []), dtype=np.float64)
    response = np.asarray(rows.get("response_ms", []), dtype=np.float64)
    inside = (deadline >= phase.window_start) & (deadline < phase.window_end)
    own_checks = int(inside.sum())
    out["checks"]["own_count"] = own_checks
    out["lateness_ms"]["own"] = _dist(distribution((started[inside] - deadline[inside]) * 1000.0))
    out["probe_latency_ms"] = {"own": _dist(distribution(response[inside]))}
    cpu_s = _cpu_seconds(phase, "baseline")
    out["cpu"] = {
        "checks_counted": own_checks,
        "ms_per_check": _ms_per_check(cpu_s, own_checks),
        "cores": None if cpu_s is None else cpu_s / params.window_seconds,
        "targets_cores": (lambda s: None if s is None else s / params.window_seconds)(
            _cpu_seconds(phase, "target")
        ),
    }
    out["memory"] = {"baseline": _memory(phase, "baseline", params.monitors)}
    return _with_timeline(out, phase, target)
