"""The service's Prometheus metrics, served at ``GET /metrics`` (docs/operations.md, Metrics
and health; docs/several-nodes.md, Operations).

One :class:`Metrics` per service, with its own ``CollectorRegistry`` passed explicitly
(prometheus-client's default global registry is never used, so two services in one
process, as in tests, never mix their figures). Names are a contract (the benchmark, in
``bench/``, reads them); labels are bounded (no monitor id, URL or path)::

    uptrio_checks_total{type,result}              counter    result: ok | failed
    uptrio_probe_duration_seconds{type}           histogram  a check's response time
    uptrio_schedule_lateness_seconds              histogram  probe start minus deadline
    uptrio_checks_missed_total                    counter    grid points skipped (overrun)
    uptrio_monitors{status}                       gauge      running actors by in-memory
                                                             status: pending | up | down
    uptrio_store_batch_size                       histogram  results per committed batch
    uptrio_store_flush_seconds                    histogram  one batch's transaction
    uptrio_store_commit_delay_seconds             histogram  probe end to its batch commit
    uptrio_store_queue_depth                      gauge      results not yet committed
    uptrio_store_rows_written_total               counter    rows inserted (checks, pings)
    uptrio_store_rows_dropped_total               counter    results dropped (buffer bound
                                                             in an outage, poison batches,
                                                             refused by the fence)
    uptrio_store_database_available               gauge      1, or 0 while writes fail
    uptrio_supervisor_restarts_total{supervisor}  counter    automatic restarts made by
                                                             root, engine, shard-N
    uptrio_fenced_writes_refused_total            counter    rows refused: bucket taken
    uptrio_checks_withheld_total                  counter    grid points not probed: the
                                                             lease not known held (paused)
    uptrio_node_buckets_held                      gauge      buckets leased (of 256)
    uptrio_node_region_buckets_held               gauge      its region's buckets leased
    uptrio_node_lease_renew_lag_seconds           gauge      since the last renewal
    uptrio_reconciled_buckets_total               counter    buckets read again by the
                                                             reconciliation (digests differed)
    uptrio_rate_limit_exchanges_total             counter    rate-limit lease statements
    uptrio_rate_limit_exchange_failures_total     counter    ... failed or past deadline
    uptrio_rate_limit_admitted_alone_total        counter    requests a node admitted
                                                             deciding alone (no database)
    uptrio_http_requests_total{route,status}      counter    route: the URL rule
    uptrio_http_request_duration_seconds{route}   histogram

Hot path: the engine and the store actor call :meth:`Metrics.probe_started`,
:meth:`Metrics.check_finished` and :meth:`Metrics.batch_written` directly (one or two
sub-microsecond observations per check; label children are bound once and cached).
Gauges and the counters the actors already keep (missed checks, statuses, rows, restarts)
are read at scrape time by a custom collector from ``EngineStatistics`` and
``WriterStatistics``: nothing is done for them per check.
"""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Iterator, Sequence

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import Collector

from engine import EngineStatistics, Holding
from store import StoreWriter, leases

from ..http.limits.quota import QuotaLimiter

__all__ = ["CONTENT_TYPE", "LATENESS_BUCKETS", "Metrics"]

CONTENT_TYPE = CONTENT_TYPE_LATEST
"""The ``Content-Type`` of :meth:`Metrics.render` (Prometheus text format 0.0.4)."""

LATENESS_BUCKETS = (
    0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.05,
    0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1.0, 2.0, 5.0, 10.0,
)  # fmt: skip
"""Schedule lateness, seconds: fine-grained from 0.5 ms to 10 s (the benchmark reads p99
from them)."""

_DURATION_BUCKETS = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
    10.0, 30.0, 60.0,
)  # fmt: skip
_BATCH_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10_000)
_COMMIT_DELAY_BUCKETS = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 2.0, 5.0, 10.0, 30.0,
    60.0, 120.0, 300.0,
)  # fmt: skip
_STATUSES = ("pending", "up", "down")


class Metrics:
    """Every metric of one service, in :attr:`registry` (see the module docstring).

    Implements ``engine.CheckObserver`` and ``store.actor.WriterObserver``; the
    composition root (:mod:`web.process.service`) passes it to both, and :meth:`attach` gives it
    the statistics it reads when scraped.

    Attributes:
        registry: this service's own registry.
    """

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        registry = self.registry
        self._checks = Counter(
            "uptrio_checks", "Checks done, by probe type and result.", ["type", "result"],
            registry=registry,
        )  # fmt: skip
        self._probe_duration = Histogram(
            "uptrio_probe_duration_seconds", "Response time of each check, seconds.",
            ["type"], buckets=_DURATION_BUCKETS, registry=registry,
        )  # fmt: skip
        self._lateness = Histogram(
            "uptrio_schedule_lateness_seconds",
            "Probe start minus its deadline on the schedule grid, seconds.",
            buckets=LATENESS_BUCKETS, registry=registry,
        )  # fmt: skip
        self._batch_size = Histogram(
            "uptrio_store_batch_size", "Check results per committed store batch.",
            buckets=_BATCH_BUCKETS, registry=registry,
        )  # fmt: skip
        self._flush_seconds = Histogram(
            "uptrio_store_flush_seconds", "Duration of one batch's transaction, seconds.",
            buckets=_DURATION_BUCKETS, registry=registry,
        )  # fmt: skip
        self._commit_delay = Histogram(
            "uptrio_store_commit_delay_seconds",
            "From a probe's end to the commit of the batch holding its check, seconds.",
            buckets=_COMMIT_DELAY_BUCKETS, registry=registry,
        )  # fmt: skip
        self._http_requests = Counter(
            "uptrio_http_requests", "HTTP requests answered, by route and status.",
            ["route", "status"], registry=registry,
        )  # fmt: skip
        self._http_duration = Histogram(
            "uptrio_http_request_duration_seconds", "Time to answer a request, seconds.",
            ["route"], buckets=_DURATION_BUCKETS, registry=registry,
        )  # fmt: skip
        self._check_children: dict[tuple[str, bool], tuple[Counter, Histogram]] = {}
        self.engine_statistics: EngineStatistics | None = None
        self.writer: StoreWriter | None = None
        self.holding: Holding | None = None
        self.limits: QuotaLimiter | None = None
        self.restarts: dict[str, int] = {}
        """Automatic restarts made by supervisors outside the engine (``root``)."""
        registry.register(_ScrapeCollector(self))

    def attach(
        self,
        *,
        engine: EngineStatistics | None = None,
        writer: StoreWriter | None = None,
        holding: Holding | None = None,
    ) -> None:
        """Read ``engine`` (missed checks, statuses, engine restarts), ``writer``
        (queue depth, rows written and dropped) and ``holding`` (this node's buckets and
        lease renewal, docs/several-nodes.md, Operations) when scraped."""
        self.engine_statistics = engine
        self.writer = writer
        self.holding = holding

    def attach_limits(self, limits: QuotaLimiter) -> None:
        """Read ``limits``' statistics (its lease exchanges, docs/several-nodes.md, Rate
        limits across nodes) when scraped."""
        self.limits = limits

    def count_restart(self, supervisor: str) -> None:
        """One automatic restart made by ``supervisor`` (``root``)."""
        self.restarts[supervisor] = self.restarts.get(supervisor, 0) + 1

    # ---- engine.CheckObserver --------------------------------------------------------

    def probe_started(self, lateness_seconds: float) -> None:
        """Observe a probe's lateness, seconds."""
        self._lateness.observe(lateness_seconds)

    def check_finished(self, probe_type: str, ok: bool, duration_seconds: float) -> None:
        """Count a check and observe its duration, seconds."""
        children = self._check_children.get((probe_type, ok))
        if children is None:
            children = (
                self._checks.labels(probe_type, "ok" if ok else "failed"),
                self._probe_duration.labels(probe_type),
            )
            self._check_children[(probe_type, ok)] = children
        children[0].inc()
        children[1].observe(duration_seconds)

    # ---- store.actor.WriterObserver --------------------------------------------------

    def batch_written(
        self, size: int, flush_seconds: float, commit_delays_seconds: Sequence[float]
    ) -> None:
        """Observe a committed batch: its size, its transaction and each result's delay."""
        self._batch_size.observe(size)
        self._flush_seconds.observe(flush_seconds)
        observe = self._commit_delay.observe
        for delay in commit_delays_seconds:
            observe(delay)

    # ---- the web layer ---------------------------------------------------------------

    def request_finished(self, route: str, status: int, seconds: float) -> None:
        """Count one answered request on ``route`` (a URL rule, or ``unmatched``)."""
        self._http_requests.labels(route, str(status)).inc()
        self._http_duration.labels(route).observe(seconds)

    def render(self) -> bytes:
        """The registry in Prometheus text format (:data:`CONTENT_TYPE`)."""
        return generate_latest(self.registry)


class _ScrapeCollector(Collector):
    """Figures read at scrape time from the actors' statistics."""

    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics

    def collect(self) -> Iterator[Metric]:
        metrics = self._metrics
        engine, writer = metrics.engine_statistics, metrics.writer
        missed = CounterMetricFamily(
            "uptrio_checks_missed", "Schedule grid points skipped because a probe overran."
        )
        missed.add_metric([], engine.missed if engine is not None else 0)
        yield missed
        monitors = GaugeMetricFamily(
            "uptrio_monitors", "Running monitor actors by in-memory status.", labels=["status"]
        )
        tally = Tally(engine.statuses.values()) if engine is not None else Tally[str]()
        for status in sorted(set(_STATUSES) | set(tally)):
            monitors.add_metric([status], tally.get(status, 0))
        yield monitors
        if writer is not None:
            stats = writer.statistics
            queued, written, dropped = writer.queued(), stats.rows_written, stats.dropped
            available, refused = stats.database_available, stats.fenced_refused
        else:
            queued, written, dropped, available, refused = 0, 0, 0, True, 0
        yield GaugeMetricFamily(
            "uptrio_store_queue_depth",
            "Check results waiting to be committed (inbox and buffer).",
            value=queued,
        )
        yield CounterMetricFamily(
            "uptrio_store_rows_written", "Rows inserted (checks, pings).", value=written
        )
        yield CounterMetricFamily(
            "uptrio_store_rows_dropped",
            "Check results and status moves dropped (buffer bound during an outage, poison "
            "batches, refused by the fence).",
            value=dropped,
        )
        yield GaugeMetricFamily(
            "uptrio_store_database_available",
            "1 while the store actor's writes succeed, 0 from a failed write to the next good one.",
            value=1 if available else 0,
        )
        restarts = CounterMetricFamily(
            "uptrio_supervisor_restarts",
            "Automatic child restarts made by each supervisor.",
            labels=["supervisor"],
        )
        counts = {"root": 0, "engine": 0, **metrics.restarts}
        if engine is not None:
            counts.update(engine.supervisor_restarts)
        for name in sorted(counts):
            restarts.add_metric([name], counts[name])
        yield restarts
        yield CounterMetricFamily(
            "uptrio_fenced_writes_refused",
            "Check rows and status changes refused: this node no longer held their bucket "
            "at their lease epoch.",
            value=refused,
        )
        yield CounterMetricFamily(
            "uptrio_checks_withheld",
            "Grid points not probed: this node could not know it still held the bucket "
            "(its lease lapsed on its own clock, as after a pause).",
            value=engine.withheld if engine is not None else 0,
        )
        yield CounterMetricFamily(
            "uptrio_reconciled_buckets",
            "Buckets whose monitors the reconciliation read again: their settings digests "
            "differed from the running actors' (a change no notification brought, or not yet).",
            value=engine.reconciled_buckets if engine is not None else 0,
        )
        limits = metrics.limits.statistics() if metrics.limits is not None else None
        yield CounterMetricFamily(
            "uptrio_rate_limit_exchanges",
            "Statements that leased rate-limit quota, gave back its unused part or charged "
            "what was admitted without a lease.",
            value=limits.exchanges if limits is not None else 0,
        )
        yield CounterMetricFamily(
            "uptrio_rate_limit_exchange_failures",
            "Rate-limit lease statements that failed or passed their deadline.",
            value=limits.failed_exchanges if limits is not None else 0,
        )
        yield CounterMetricFamily(
            "uptrio_rate_limit_admitted_alone",
            "Requests admitted by this node deciding alone (the database unreachable).",
            value=limits.admitted_alone if limits is not None else 0,
        )
        holding = metrics.holding
        held = holding.held if holding is not None else {}
        regional = sum(slot >= leases.BUCKETS for slot in held)
        yield GaugeMetricFamily(
            "uptrio_node_buckets_held",
            "Buckets (of 256) of the any-region pool this node holds a lease on.",
            value=len(held) - regional,
        )
        yield GaugeMetricFamily(
            "uptrio_node_region_buckets_held",
            "Buckets (of 256) of its region's pool this node holds a lease on.",
            value=regional,
        )
        yield GaugeMetricFamily(
            "uptrio_node_lease_renew_lag_seconds",
            "Seconds since this node last renewed its leases (renewed every third of a lease).",
            value=holding.renew_lag_seconds() if holding is not None else 0.0,
        )
