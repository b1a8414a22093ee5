"""``uptrio bench alerts``: how late the first notification of an alert reaches a
provider stand-in when monitors flap, and what the whole alerting path costs
(docs/benchmarks.md, "uptrio bench alerts"; docs/alerts.md).

Two runs of `bench.run.run_bench` on the same parameters, one after the other
(`bench.pair.run_pair`), both with ``failure_threshold`` 1 and ``track_commit_timestamp =
on``:

1. *reference*: ``--monitors`` http monitors every ``--interval``, no flapping target,
   no webhook endpoint, no escalation policy: alerting off;
2. *alerting*: the same with a ``--flapping`` share of the targets answering 200 and 500
   in turn (one flip per interval), one webhook endpoint for ``["*"]`` on the bench's
   receiver (`bench.receiver`, as ``uptrio bench webhooks`` makes it,
   `bench.webhooks.WebhookRun`), and the account's default escalation policy: one step,
   delay 0, whose target is one notification channel of type ``webhook`` posting to the
   same receiver (``/notify``) with ``send_resolved`` true.

Every flip of a flapping target is then a status change: a move into ``down`` writes
``monitor.down``, ``incident.created`` and ``alert.triggered`` and, in the same
transaction (the policy's step 0 waits 0 s), the alert's ``trigger`` notification; the
move into ``up`` writes ``monitor.up``, ``incident.resolved``, ``alert.resolved`` and the
``resolved`` notice. The notifier sends the notifications, the webhook sender the
events' deliveries.

Why a ``webhook`` channel and not ``slack``: the body of a webhook channel names the
alert and the kind of the notification (docs/alerts.md, What each provider receives),
so the receiver can tell one notification from another and count duplicates exactly; a
Slack message carries neither the alert id nor a machine-readable kind. Both are one
rendered JSON POST through the same HTTP client and target policy; the webhook channel
also signs its body.

`AlertRun` is the second run's extension: after the window it waits up to
``drain_seconds`` for the window's deliveries, then for the notifications of the
window's alerts, to settle; once the service stopped it reads alerts, notifications and
the commit times of the ``alert.*`` events with SQL, and the receiver's log.

Figures (`AlertRun.figures`), for the alerts whose ``alert.triggered`` event committed
in the window: alerts raised; notifications by kind and status; received; *lost* (a
notification row ``succeeded`` or ``pending`` whose alert and kind the receiver never
had after the drain); latency of each alert's first notification = the time the
receiver had the whole ``trigger`` POST minus the commit time of the alert's
``alert.triggered`` event row (``pg_xact_commit_timestamp(xmin)``, the same machine's
clock), p50, p95, p99, max (milliseconds), and its p50 per interval of the window; over
the whole run, notifications by status at the stop, *duplicates* (the receiver had the
same alert and kind more often than there are such rows) and notifications marked
succeeded that the receiver never had. The webhook figures are
`bench.webhooks.WebhookRun`'s. `compare` adds both runs' CPU per check and the ratio.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import trio

from .pair import CPU_RATIO_GOAL, cpu_of, cpu_ratio, finish, latency_figures, print_cpu, run_pair
from .plan import BenchParams
from .service import BenchDatabase
from .targets import TargetSet
from .webhooks import LATENCY_GOAL_MS, WebhookRun, open_webhook_run, print_webhook_figures

__all__ = ["AlertRun", "alert_figures", "compare", "print_alerts", "run_alerts_bench"]

SETTLED = ("succeeded", "pending", "failed", "cancelled")
"""The statuses of a notification (docs/alerts.md, The outbox and retries)."""


async def _create(client: httpx.AsyncClient, path: str, body: dict[str, Any]) -> str:
    """POST ``body`` to ``path``; the created resource's id.

    Raises:
        RuntimeError: the API did not answer 201 (its answer says why).
    """
    response = await client.post(path, json=body)
    if response.status_code != 201:
        raise RuntimeError(f"POST {path} answered {response.status_code}: {response.text[:500]}")
    return str(response.json()["id"])


class AlertRun:
    """The alerting run's extension (module docstring); `figures` once it is over.

    Attributes:
        webhooks: the webhook endpoint's part (flips, endpoint, receiver, its figures).
        channel_url: where the notification channel posts (the receiver's ``/notify``).
        drain_seconds: the longest wait after the window for deliveries and
            notifications together, seconds.
        channel_id, policy_id: the ``nch_`` and ``esc_`` ids once created.
        drained_at: epoch seconds when no notification of the window's alerts was
            pending any more (None: the drain ran out).
        figures: the measured figures (module docstring), after `service_stopped`.
    """

    def __init__(self, webhooks: WebhookRun, drain_seconds: float) -> None:
        self.webhooks = webhooks
        self.channel_url = f"http://127.0.0.1:{webhooks.receiver.port}/notify"
        self.drain_seconds = drain_seconds
        self.channel_id: str | None = None
        self.policy_id: str | None = None
        self.drained_at: float | None = None
        self.figures: dict[str, Any] = {}

    async def monitors_created(
        self, base_url: str, token: str, ids: dict[int, str], targets: TargetSet
    ) -> None:
        """The webhook part's (flips, endpoint), then the channel and the account's
        default policy (module docstring).

        Raises:
            RuntimeError: the API refused the endpoint, the channel or the policy.
        """
        await self.webhooks.monitors_created(base_url, token, ids, targets)
        headers = {"Authorization": f"Bearer {token}"}
        async with httpx.AsyncClient(base_url=base_url, headers=headers, timeout=30) as client:
            self.channel_id = await _create(
                client,
                "/notification-channels",
                {
                    "name": "bench receiver",
                    "type": "webhook",
                    "config": {"url": self.channel_url},
                    "send_resolved": True,
                },
            )
            target = {"type": "channel", "id": self.channel_id}
            self.policy_id = await _create(
                client,
                "/escalation-policies",
                {
                    "name": "bench",
                    "steps": [{"delay_seconds": 0, "targets": [target]}],
                    "repeat": 0,
                    "default": True,
                },
            )

    async def window_closed(self, bench_db: BenchDatabase, window_end: float) -> None:
        """The webhook part's drain, then wait (within ``drain_seconds`` in all) until no
        notification of an alert triggered before ``window_end`` (epoch seconds) is
        pending; `drained_at` says when."""
        began = time.monotonic()
        await self.webhooks.window_closed(bench_db, window_end)

        async def pending(connection: Any) -> int:
            return int(
                await connection.fetchval(
                    "SELECT count(*) FROM notifications n JOIN alerts a ON a.id = n.alert_id "
                    "WHERE n.status = 'pending' AND a.triggered_at <= $1",
                    int(window_end),
                )
            )

        while True:
            if await bench_db.run(pending) == 0:
                self.drained_at = time.time()
                return
            if time.monotonic() - began >= self.drain_seconds:
                return
            await trio.sleep(0.5)

    async def service_stopped(
        self, bench_db: BenchDatabase, window_start: float, window_end: float
    ) -> None:
        """The webhook part's figures (and the receiver's dump), then the alerts'
        (`alert_figures`) for the window ``[window_start, window_end)``."""
        await self.webhooks.service_stopped(bench_db, window_start, window_end)

        async def query(connection: Any) -> tuple[list[Any], list[Any]]:
            triggered = await connection.fetch(
                "SELECT resource_id AS alert_id, "
                "extract(epoch FROM pg_xact_commit_timestamp(xmin))::float8 AS committed "
                "FROM events WHERE type = 'alert.triggered'"
            )
            rows = await connection.fetch(
                "SELECT alert_id, kind, status, attempts, created FROM notifications "
                "WHERE channel_id = $1",
                self.channel_id,
            )
            return triggered, rows

        triggered, rows = await bench_db.run(query)
        self.figures = alert_figures(
            triggered,
            rows,
            self.webhooks.seen.get("notifications", []),
            window=(window_start, window_end),
            interval=self.webhooks.interval_seconds,
            drained_at=self.drained_at,
        )
        self.figures.update(
            channel=self.channel_id,
            channel_type="webhook",
            channel_url=self.channel_url,
            policy=self.policy_id,
            drain_limit_seconds=self.drain_seconds,
        )


def alert_figures(
    triggered: list[Any],
    rows: list[Any],
    received: list[list[Any]],
    *,
    window: tuple[float, float],
    interval: float,
    drained_at: float | None,
) -> dict[str, Any]:
    """The figures of `AlertRun` (module docstring) from ``triggered`` (``alert_id``,
    ``committed``: the ``alert.triggered`` events), ``rows`` (the channel's
    notifications: ``alert_id``, ``kind``, ``status``, ``attempts``, ``created``) and
    the receiver's ``received`` notifications (``[alert_id, kind, at]``). A notification
    written after the drain ended (``created`` at or after ``drained_at``, or any when
    the drain ran out) is counted apart (``written_after_drain``), not as lost."""
    window_start, window_end = window
    first: dict[tuple[str, str], float] = {}
    times: Counter[tuple[str, str]] = Counter()
    for alert_id, kind, at in received:
        key = (str(alert_id), str(kind))
        times[key] += 1
        first[key] = min(float(at), first.get(key, float("inf")))
    committed = {
        str(row["alert_id"]): float(row["committed"])
        for row in triggered
        if row["committed"] is not None
    }
    in_window = {a for a, at in committed.items() if window_start <= at < window_end}
    cutoff = int(drained_at) if drained_at is not None else int(window_end)
    by_kind: dict[str, dict[str, int]] = {}
    lost = late = got = 0
    rows_per_key: Counter[tuple[str, str]] = Counter()
    whole = dict.fromkeys(SETTLED, 0)
    succeeded_not_received = 0
    for row in rows:
        key = (str(row["alert_id"]), str(row["kind"]))
        rows_per_key[key] += 1
        whole[row["status"]] = whole.get(row["status"], 0) + 1
        succeeded_not_received += row["status"] == "succeeded" and key not in first
        if key[0] not in in_window:
            continue
        if row["created"] >= cutoff:
            late += 1
            continue
        counts = by_kind.setdefault(key[1], dict.fromkeys(SETTLED, 0))
        counts[row["status"]] = counts.get(row["status"], 0) + 1
        got += key in first
        lost += row["status"] in ("succeeded", "pending") and key not in first
    latencies: list[float] = []
    buckets: dict[int, list[float]] = {}
    for alert_id in in_window:
        at = first.get((alert_id, "trigger"))
        if at is None:
            continue
        ms = (at - committed[alert_id]) * 1000.0
        latencies.append(ms)
        buckets.setdefault(int((committed[alert_id] - window_start) // interval), []).append(ms)
    return {
        "window_seconds": window_end - window_start,
        "alerts_raised": len(in_window),
        "alerts_per_second": len(in_window) / max(1e-9, window_end - window_start),
        "notifications": dict(sorted(by_kind.items())),
        "received": got,
        "lost": lost,
        "written_after_drain": late,
        "alerts_without_first_notification": len(in_window) - len(latencies),
        "first_notification_latency_ms": latency_figures(latencies),
        "latency_p50_ms_by_interval": [latency_figures(buckets[k])["p50"] for k in sorted(buckets)],
        "drained_at": drained_at,
        "whole_run": {
            "notifications": whole,
            "received_posts": sum(times.values()),
            "duplicates": sum(max(0, n - max(1, rows_per_key[key])) for key, n in times.items()),
            "succeeded_not_received": int(succeeded_not_received),
        },
    }


@asynccontextmanager
async def open_alert_run(
    interval_seconds: float, drain_seconds: float, out_dir: Path, *, max_seconds: float
) -> AsyncIterator[AlertRun]:
    """The receiver and the webhook part (`bench.webhooks.open_webhook_run`); yield the
    `AlertRun`; stop the receiver on exit.

    Raises:
        RuntimeError: the receiver did not start within 30 s.
    """
    async with open_webhook_run(
        interval_seconds, drain_seconds, out_dir, max_seconds=max_seconds
    ) as webhooks:
        yield AlertRun(webhooks, drain_seconds)


def compare(reference: dict[str, Any], alerting: dict[str, Any], run: AlertRun) -> dict[str, Any]:
    """The side-by-side report: both runs' CPU per check (service, Postgres, together,
    milliseconds), the ratio, the alert and webhook figures, and the goals."""
    before, after = cpu_of(reference), cpu_of(alerting)
    ratio = cpu_ratio(before, after)
    figures = run.figures
    p99 = figures["first_notification_latency_ms"]["p99"]
    whole = figures["whole_run"]
    return {
        "uptrio_bench_alerts": 1,
        "reference": before,
        "alerting": after,
        "cpu_ratio": ratio,
        "alert_figures": figures,
        "webhook_figures": run.webhooks.figures,
        "goals": {
            "first_notification_p99_ms_at_most_1000": None
            if p99 is None
            else p99 <= LATENCY_GOAL_MS,
            "every_alert_notified": figures["alerts_without_first_notification"] == 0,
            "none_lost_or_twice": figures["lost"] == 0
            and whole["duplicates"] == 0
            and whole["succeeded_not_received"] == 0,
            "cpu_at_most_5_percent_more": None if ratio is None else ratio <= CPU_RATIO_GOAL,
        },
    }


def print_alerts(result: dict[str, Any]) -> None:
    """The side-by-side table, the alert figures and the webhook figures, plain text on
    stdout."""
    labels = ("reference (alerting off, no flapping)", "alerting and flapping")
    print_cpu(result["reference"], result["alerting"], result["cpu_ratio"], labels)
    fig = result["alert_figures"]
    whole = fig["whole_run"]
    print(
        f"alerts raised in the window: {fig['alerts_raised']:,} "
        f"({fig['alerts_per_second']:.1f}/s); notifications {fig['notifications']}"
    )
    print(
        f"notifications received {fig['received']:,}, lost {fig['lost']}, written after "
        f"the drain {fig['written_after_drain']} (whole run: {whole['notifications']} at "
        f"the stop, succeeded but not received {whole['succeeded_not_received']}, "
        f"duplicates {whole['duplicates']})"
    )
    d = fig["first_notification_latency_ms"]
    print(
        f"alert.triggered commit to first notification, ms: p50 {d['p50']} p95 {d['p95']} "
        f"p99 {d['p99']} max {d['max']} (n={d['count']:,}; without one "
        f"{fig['alerts_without_first_notification']})"
    )
    print(f"p50 by interval, ms: {fig['latency_p50_ms_by_interval']}")
    print_webhook_figures(result["webhook_figures"])
    print(f"goals: {result['goals']}")


async def run_alerts_bench(
    params: BenchParams, argv: list[str], output: Path, *, drain_seconds: float, chart: bool
) -> dict[str, Any]:
    """Both runs (module docstring) with ``params`` (its ``flapping_share`` for the
    second only); each run's report goes to ``output/reference`` and
    ``output/alerting``, the side-by-side one (`compare`) to ``output/report.json`` and
    is returned."""

    def extension(out_dir: Path, budget: float) -> Any:
        interval = float(params.interval_seconds)
        return open_alert_run(interval, drain_seconds, out_dir, max_seconds=budget)

    reports, run = await run_pair(
        params, argv, output, name="alerting", open_extension=extension, chart=chart
    )
    result = compare(reports["reference"], reports["alerting"], run)
    return finish(result, reports["alerting"], output / "report.json")
