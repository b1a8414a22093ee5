"""The service's own figures, from its Prometheus endpoint ``GET /metrics``.

A `MetricsSnapshot` is one scrape: every sample by (name, labels). Counters and
histograms only grow, so the bench scrapes at both ends of the measured window and
reads differences: `counter_delta` for counters, `histogram_delta` for the bucket
counts of a histogram, and `histogram_quantile` estimates a quantile from those buckets
the way Prometheus's ``histogram_quantile`` does (linear within the bucket; the answer is
only as fine as the bucket bounds). When the service has no ``/metrics`` the snapshot is
``missing`` and every figure read from it is ``None`` (reported as missing).

Names (the service's contract): ``uptrio_checks_total{type,result}``,
``uptrio_probe_duration_seconds{type}``, ``uptrio_schedule_lateness_seconds``,
``uptrio_checks_missed_total``, ``uptrio_monitors{status}``, ``uptrio_store_batch_size``,
``uptrio_store_flush_seconds``, ``uptrio_store_commit_delay_seconds``,
``uptrio_store_queue_depth``, ``uptrio_store_rows_written_total``,
``uptrio_store_rows_dropped_total``, ``uptrio_supervisor_restarts_total{supervisor}``,
``uptrio_http_requests_total{route,status}``,
``uptrio_http_request_duration_seconds{route}``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import httpx
from prometheus_client.parser import text_string_to_metric_families

__all__ = [
    "MetricsSnapshot",
    "counter_delta",
    "gauge_value",
    "histogram_delta",
    "histogram_quantile",
    "histogram_summary",
    "scrape",
]

Labels = frozenset[tuple[str, str]]


@dataclass(frozen=True, slots=True)
class MetricsSnapshot:
    """One scrape: ``samples[(sample name, labels)] = value``; ``missing`` when the
    service has no ``/metrics`` (or it failed: ``error`` says why)."""

    at: float
    samples: dict[tuple[str, Labels], float] = field(default_factory=dict)
    missing: bool = False
    error: str | None = None

    def select(self, name: str, **labels: str) -> list[tuple[Labels, float]]:
        """Samples named ``name`` whose labels include ``labels``."""
        wanted = set(labels.items())
        return [
            (key_labels, value)
            for (key_name, key_labels), value in self.samples.items()
            if key_name == name and wanted <= key_labels
        ]


async def scrape(client: httpx.AsyncClient, at: float) -> MetricsSnapshot:
    """GET ``/metrics`` with ``client`` (its base URL is the service); ``at`` stamps it
    (epoch seconds)."""
    try:
        response = await client.get("/metrics", timeout=30.0)
    except httpx.HTTPError as exc:
        return MetricsSnapshot(at=at, missing=True, error=f"GET /metrics failed: {exc!r}")
    if response.status_code != 200:
        return MetricsSnapshot(
            at=at, missing=True, error=f"GET /metrics answered {response.status_code}"
        )
    samples: dict[tuple[str, Labels], float] = {}
    try:
        for family in text_string_to_metric_families(response.text):
            for sample in family.samples:
                samples[(sample.name, frozenset(sample.labels.items()))] = float(sample.value)
    except ValueError as exc:
        return MetricsSnapshot(at=at, missing=True, error=f"unreadable /metrics: {exc}")
    return MetricsSnapshot(at=at, samples=samples)


def counter_delta(
    before: MetricsSnapshot, after: MetricsSnapshot, name: str, **labels: str
) -> float | None:
    """Growth of counter ``name`` (summed over label sets matching ``labels``) between
    two scrapes; None when missing. ``name`` may omit the ``_total`` suffix."""
    if before.missing or after.missing:
        return None
    names = (name, name + "_total") if not name.endswith("_total") else (name,)
    start = {k: v for n in names for k, v in before.select(n, **labels)}
    end = {k: v for n in names for k, v in after.select(n, **labels)}
    if not end:
        return None
    return sum(end.values()) - sum(start.get(k, 0.0) for k in end)


def gauge_value(snapshot: MetricsSnapshot, name: str, **labels: str) -> float | None:
    """Sum of gauge ``name`` over matching label sets, None when missing."""
    if snapshot.missing:
        return None
    found = snapshot.select(name, **labels)
    return sum(v for _, v in found) if found else None


def histogram_delta(
    before: MetricsSnapshot, after: MetricsSnapshot, name: str, **labels: str
) -> list[tuple[float, float]] | None:
    """Cumulative bucket counts ``[(upper bound, count), ...]`` (sorted, ``+Inf`` last)
    observed between two scrapes, summed over matching label sets; None when missing."""
    if before.missing or after.missing:
        return None

    def buckets(snapshot: MetricsSnapshot) -> dict[float, float]:
        found: dict[float, float] = {}
        for key_labels, value in snapshot.select(name + "_bucket", **labels):
            bound = float(dict(key_labels)["le"])
            found[bound] = found.get(bound, 0.0) + value
        return found

    end = buckets(after)
    if not end:
        return None
    start = buckets(before)
    return sorted((bound, count - start.get(bound, 0.0)) for bound, count in end.items())


def histogram_quantile(buckets: list[tuple[float, float]], q: float) -> float | None:
    """The ``q`` quantile (0 to 1) of cumulative ``buckets``, interpolated linearly in
    its bucket (from 0 for the first); the highest finite bound when it falls in
    ``+Inf``; None when empty."""
    if not buckets or buckets[-1][1] <= 0:
        return None
    total = buckets[-1][1]
    rank = q * total
    lower_bound, lower_count = 0.0, 0.0
    for bound, count in buckets:
        if count >= rank:
            if math.isinf(bound):
                return lower_bound
            if count == lower_count:
                return bound
            return lower_bound + (bound - lower_bound) * (rank - lower_count) / (
                count - lower_count
            )
        lower_bound, lower_count = bound, count
    return lower_bound


def histogram_summary(
    buckets: list[tuple[float, float]] | None, scale: float = 1.0
) -> dict[str, float | None]:
    """``{"count", "p50", "p99", "max_bound"}`` of a bucket delta, quantiles times
    ``scale`` (1000: seconds to ms); ``max_bound`` is the upper bound of the highest
    non-empty bucket (the max lies at or below it). Values are None when missing."""
    if buckets is None:
        return {"count": None, "p50": None, "p99": None, "max_bound": None}
    count = buckets[-1][1] if buckets else 0.0
    p50 = histogram_quantile(buckets, 0.5)
    p99 = histogram_quantile(buckets, 0.99)
    highest: float | None = None
    previous = 0.0
    for bound, cumulative in buckets:
        if cumulative > previous:
            highest = bound
        previous = cumulative
    return {
        "count": count,
        "p50": None if p50 is None else p50 * scale,
        "p99": None if p99 is None else p99 * scale,
        "max_bound": None if highest is None else highest * scale,
    }
