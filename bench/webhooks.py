"""``uptrio bench webhooks``: how late signed webhooks reach a receiver when monitors
flap, and what events and deliveries cost (bench/RESULTS.md, Events and webhooks).

Two runs of `bench.run.run_bench` on the same parameters, one after the other
(`bench.pair.run_pair`, which ``uptrio bench alerts`` uses too):

1. *reference*: ``--monitors`` http monitors every ``--interval``, no flapping target,
   no webhook endpoint;
2. *webhooks*: the same, with a ``--flapping`` share of the targets answering 200 and
   500 in turn (one flip per interval, `bench.plan`) and one endpoint for ``["*"]``
   on a receiver on 127.0.0.1 (`bench.receiver`, a child process).

Both runs create their monitors with ``failure_threshold`` 1, so every flip of a
flapping target is a status change (a ``monitor.down`` or ``monitor.up`` event, and the
incident the monitor opens or resolves: ``incident.created`` or ``incident.resolved``),
and both give the embedded Postgres ``track_commit_timestamp = on`` (a start-time
setting: the bench restarts the server before the service starts), so the commit time
of every event is ``pg_xact_commit_timestamp(xmin)`` of its row.

`WebhookRun` is the second run's `bench.run.RunExtension`: once the monitors exist it
gives the targets each flapping monitor's flip times (half an interval after its grid
points, `bench.analysis.phases_by_index`), creates the endpoint (``POST
/webhook-endpoints``) and tells the receiver its secret; after the window it waits up
to ``drain_seconds`` for the deliveries of the window's events to settle; once the
service stopped it reads the events, their commit times and the deliveries with SQL,
and the receiver's log. Latency of an event = the time the receiver had the whole
delivery minus the commit time of the event (the same machine's clock).

Figures (`WebhookRun.figures`), for the events committed in the window: events written
(by type), deliveries to the endpoint by status, deliveries received, *lost* (a
delivery row, and the receiver never had the event, after the drain), latency p50, p95,
p99, max (milliseconds), all events and status changes alone, and per interval of the
window; over the whole run, deliveries by status when the service stopped (pending ones
are not lost: they are sent after a restart), duplicates, and deliveries marked
succeeded that the receiver never had (must be 0); signatures checked on a sample.
`compare` puts the two runs side by side: CPU milliseconds per check, service and
Postgres, and their ratio (goal: at most 1.05).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import trio

from .analysis import phases_by_index
from .pair import (
    COMMIT_TIMESTAMPS,
    CPU_RATIO_GOAL,
    cpu_of,
    cpu_ratio,
    finish,
    latency_figures,
    print_cpu,
    run_pair,
)
from .plan import BenchParams
from .service import BenchDatabase
from .targets import TargetProcess, TargetSet

__all__ = [
    "COMMIT_TIMESTAMPS",
    "CPU_RATIO_GOAL",
    "LATENCY_GOAL_MS",
    "WebhookRun",
    "compare",
    "latency_figures",
    "open_webhook_run",
    "print_comparison",
    "print_webhook_figures",
    "run_webhooks_bench",
    "start_flapping",
]

LATENCY_GOAL_MS = 1000.0
"""Goal: p99 from the status change's commit to the receiver, milliseconds."""
STATUS_CHANGES = ("monitor.down", "monitor.up")


async def start_flapping(
    targets: TargetSet, ids: dict[int, str], interval_seconds: float, out_dir: Path
) -> None:
    """Give the targets the flip times of the flapping monitors (plan index to monitor
    id ``ids``): each flips half an interval after its monitor's grid phase, so every
    check of it sees the other answer than the one before (``bench.plan``)."""
    phases = phases_by_index(ids, interval_seconds, max(ids) + 1 if ids else 0)
    flips = {i: float((phases[i] + interval_seconds / 2) % interval_seconds) for i in ids}
    await targets.set_flips(interval_seconds, flips, out_dir)


class WebhookRun:
    """The webhooks run's extension (module docstring); `figures` once it is over.

    Attributes:
        receiver: the receiver's process (control channel).
        receiver_url: where the endpoint points (``http://127.0.0.1:PORT/hook``).
        interval_seconds: the monitors' interval, seconds.
        drain_seconds: the longest wait after the window for pending deliveries, s.
        out_dir: where the flip times and the receiver's log go.
        endpoint_id: the ``we_`` id once created.
        endpoint_created_at: epoch seconds of the endpoint's creation.
        figures: the measured figures (module docstring), after `service_stopped`.
        seen: the receiver's dump (`bench.receiver`), after `service_stopped`.
    """

    def __init__(
        self,
        receiver: TargetProcess,
        interval_seconds: float,
        drain_seconds: float,
        out_dir: Path,
    ) -> None:
        self.receiver = receiver
        self.receiver_url = f"http://127.0.0.1:{receiver.port}/hook"
        self.interval_seconds = interval_seconds
        self.drain_seconds = drain_seconds
        self.out_dir = out_dir
        self.endpoint_id: str | None = None
        self.endpoint_created_at = 0.0
        self.drained_seconds: float | None = None
        self.figures: dict[str, Any] = {}
        self.seen: dict[str, Any] = {}

    async def monitors_created(
        self, base_url: str, token: str, ids: dict[int, str], targets: TargetSet
    ) -> None:
        """Give the targets the flip times of the flapping monitors, create the endpoint
        for ``["*"]`` and tell the receiver its secret.

        Raises:
            RuntimeError: the API refused the endpoint (its answer says why).
        """
        await start_flapping(targets, ids, self.interval_seconds, self.out_dir)
        headers = {"Authorization": f"Bearer {token}"}
        async with httpx.AsyncClient(base_url=base_url, headers=headers, timeout=30) as client:
            response = await client.post(
                "/webhook-endpoints",
                json={"url": self.receiver_url, "enabled_events": ["*"]},
            )
        if response.status_code != 201:
            raise RuntimeError(
                f"POST /webhook-endpoints answered {response.status_code}: {response.text[:500]}"
            )
        endpoint = response.json()
        self.endpoint_id = str(endpoint["id"])
        self.endpoint_created_at = time.time()
        await self.receiver.command(f"secret {endpoint['secret']}")

    async def window_closed(self, bench_db: BenchDatabase, window_end: float) -> None:
        """Wait (at most ``drain_seconds``) until no delivery of an event written before
        ``window_end`` (epoch seconds) is pending."""
        began = time.monotonic()

        async def pending(connection: Any) -> int:
            return int(
                await connection.fetchval(
                    "SELECT count(*) FROM webhook_deliveries d JOIN events e "
                    "ON e.id = d.event_id WHERE d.endpoint_id = $1 "
                    "AND d.status = 'pending' AND e.created <= $2",
                    self.endpoint_id,
                    int(window_end),
                )
            )

        while time.monotonic() - began < self.drain_seconds:
            if await bench_db.run(pending) == 0:
                self.drained_seconds = round(time.monotonic() - began, 2)
                return
            await trio.sleep(0.5)

    async def service_stopped(
        self, bench_db: BenchDatabase, window_start: float, window_end: float
    ) -> None:
        """Read events, commit times and deliveries, and the receiver's log; compute
        `figures` for the events committed in ``[window_start, window_end)``."""
        path = self.out_dir / "receiver.json"
        await self.receiver.command(f"dump {path}")
        seen = self.seen = json.loads(await trio.Path(path).read_text())

        async def query(connection: Any) -> tuple[list[Any], list[Any], str]:
            events = await connection.fetch(
                "SELECT id, type, created, "
                "extract(epoch FROM pg_xact_commit_timestamp(xmin))::float8 AS committed "
                "FROM events"
            )
            deliveries = await connection.fetch(
                "SELECT event_id, status, attempts FROM webhook_deliveries WHERE endpoint_id = $1",
                self.endpoint_id,
            )
            setting = str(await connection.fetchval("SHOW track_commit_timestamp"))
            return events, deliveries, setting

        events, deliveries, setting = await bench_db.run(query)
        self.figures = _figures(
            events,
            deliveries,
            seen,
            window_start=window_start,
            window_end=window_end,
            interval=self.interval_seconds,
        )
        self.figures.update(
            endpoint=self.endpoint_id,
            receiver_url=self.receiver_url,
            track_commit_timestamp=setting,
            drained_seconds=self.drained_seconds,
            drain_limit_seconds=self.drain_seconds,
        )


def _figures(
    events: list[Any],
    deliveries: list[Any],
    seen: dict[str, Any],
    *,
    window_start: float,
    window_end: float,
    interval: float,
) -> dict[str, Any]:
    """The figures of `WebhookRun` from the rows of ``events`` (id, type, created,
    committed), ``deliveries`` (event_id, status, attempts) and the receiver's dump."""
    first_seen: dict[str, float] = {}
    received_total = 0
    for event_id, at, _kind in seen["received"]:
        received_total += 1
        if event_id not in first_seen or at < first_seen[event_id]:
            first_seen[event_id] = at
    delivery = {row["event_id"]: row for row in deliveries}

    def when(row: Any) -> float:
        committed = row["committed"]
        return float(committed) if committed is not None else float(row["created"])

    window = [row for row in events if window_start <= when(row) < window_end]
    by_type: dict[str, int] = {}
    statuses = {"succeeded": 0, "pending": 0, "failed": 0}
    retried = lost = 0
    latencies: list[float] = []
    status_changes: list[float] = []
    buckets: dict[int, list[float]] = {}
    for row in window:
        by_type[row["type"]] = by_type.get(row["type"], 0) + 1
        sent = delivery.get(row["id"])
        if sent is None:
            continue
        statuses[sent["status"]] = statuses.get(sent["status"], 0) + 1
        retried += int(sent["attempts"]) > 1
        at = first_seen.get(row["id"])
        if at is None:
            lost += 1
            continue
        if row["committed"] is None:
            continue
        ms = (at - float(row["committed"])) * 1000.0
        latencies.append(ms)
        if row["type"] in STATUS_CHANGES:
            status_changes.append(ms)
        buckets.setdefault(int((when(row) - window_start) // interval), []).append(ms)
    settled = {"succeeded": 0, "pending": 0, "failed": 0}
    for row in deliveries:
        settled[row["status"]] = settled.get(row["status"], 0) + 1
    return {
        "window_seconds": window_end - window_start,
        "events_written": len(window),
        "events_by_type": dict(sorted(by_type.items())),
        "events_per_second": len(window) / max(1e-9, window_end - window_start),
        "deliveries": statuses,
        "deliveries_retried": retried,
        "received": sum(1 for row in window if row["id"] in first_seen),
        "lost": lost,
        "latency_ms": latency_figures(latencies),
        "status_change_latency_ms": latency_figures(status_changes),
        "latency_p50_ms_by_interval": [latency_figures(buckets[k])["p50"] for k in sorted(buckets)],
        "whole_run": {
            "deliveries": settled,
            "received_posts": received_total,
            "duplicates": received_total - len(first_seen),
            "succeeded_not_received": sum(
                1
                for row in deliveries
                if row["status"] == "succeeded" and row["event_id"] not in first_seen
            ),
        },
        "signatures": seen["signatures"],
    }


@asynccontextmanager
async def open_webhook_run(
    interval_seconds: float, drain_seconds: float, out_dir: Path, *, max_seconds: float
) -> AsyncIterator[WebhookRun]:
    """Start the receiver (``python -m bench.receiver``, at most ``max_seconds``); yield
    the `WebhookRun` extension; stop the receiver on exit.

    Raises:
        RuntimeError: the receiver did not start within 30 s.
    """
    with (out_dir / "receiver.log").open("ab") as stderr:
        process = await trio.lowlevel.open_process(
            [sys.executable, "-m", "bench.receiver", "--max-seconds", str(max_seconds)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
        )
    receiver = TargetProcess("receiver", process)
    try:
        with trio.fail_after(30):
            ready = await receiver.read_answer()
        receiver.port = int(ready["port"])
        yield WebhookRun(receiver, interval_seconds, drain_seconds, out_dir)
    finally:
        await receiver.close()


def compare(
    reference: dict[str, Any], webhooks: dict[str, Any], figures: dict[str, Any]
) -> dict[str, Any]:
    """The side-by-side report: both runs' CPU per check (service, Postgres, together,
    milliseconds), the ratio, the webhook figures, and the goals."""
    before, after = cpu_of(reference), cpu_of(webhooks)
    ratio = cpu_ratio(before, after)
    p99 = figures.get("status_change_latency_ms", {}).get("p99")
    return {
        "uptrio_bench_webhooks": 1,
        "reference": before,
        "webhooks": after,
        "cpu_ratio": ratio,
        "webhook_figures": figures,
        "goals": {
            "status_change_p99_ms_at_most_1000": None if p99 is None else p99 <= LATENCY_GOAL_MS,
            "events_written_equal_deliveries_succeeded": figures.get("events_written")
            == figures.get("deliveries", {}).get("succeeded"),
            "none_lost": figures.get("lost") == 0
            and figures["whole_run"]["succeeded_not_received"] == 0,
            "cpu_at_most_5_percent_more": None if ratio is None else ratio <= CPU_RATIO_GOAL,
        },
    }


def print_webhook_figures(fig: dict[str, Any]) -> None:
    """The webhook figures of `WebhookRun` (events, deliveries, latency, signatures),
    plain text on stdout."""
    print(
        f"events written in the window: {fig['events_written']:,} "
        f"({fig['events_per_second']:.1f}/s) {fig['events_by_type']}"
    )
    print(
        f"deliveries: {fig['deliveries']}, received {fig['received']:,}, lost {fig['lost']} "
        f"(whole run: {fig['whole_run']['deliveries']} at the stop, succeeded but not "
        f"received {fig['whole_run']['succeeded_not_received']}, duplicates "
        f"{fig['whole_run']['duplicates']})"
    )
    for label, key in (("status changes", "status_change_latency_ms"), ("all", "latency_ms")):
        d = fig[key]
        print(
            f"commit to receiver, {label}, ms: p50 {d['p50']} p95 {d['p95']} p99 {d['p99']} "
            f"max {d['max']} (n={d['count']:,})"
        )
    print(f"p50 by interval, ms: {fig['latency_p50_ms_by_interval']}")
    print(f"signatures: {fig['signatures']}")


def print_comparison(result: dict[str, Any]) -> None:
    """The side-by-side table and the webhook figures, plain text on stdout."""
    labels = ("reference (no endpoint, no flapping)", "webhooks and flapping")
    print_cpu(result["reference"], result["webhooks"], result["cpu_ratio"], labels)
    print_webhook_figures(result["webhook_figures"])
    print(f"goals: {result['goals']}")


async def run_webhooks_bench(
    params: BenchParams, argv: list[str], output: Path, *, drain_seconds: float, chart: bool
) -> dict[str, Any]:
    """Both runs (module docstring) with ``params`` (its ``flapping_share`` for the
    second only; ``failure_threshold`` 1 and commit timestamps for both); each run's
    report goes to ``output/reference`` and ``output/webhooks``, the side-by-side one
    (`compare`) to ``output/webhooks.json`` and is returned."""

    def extension(out_dir: Path, budget: float) -> Any:
        interval = float(params.interval_seconds)
        return open_webhook_run(interval, drain_seconds, out_dir, max_seconds=budget)

    reports, run = await run_pair(
        params, argv, output, name="webhooks", open_extension=extension, chart=chart
    )
    result = compare(reports["reference"], reports["webhooks"], run.figures)
    return finish(result, reports["webhooks"], output / "webhooks.json")
