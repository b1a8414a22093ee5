"""``uptrio bench`` and ``uptrio bench sweep``: the command line of the harness.

`add_commands` adds the ``bench`` sub-command to the ``uptrio`` parser: it is the entry
point ``bench`` of the group ``uptrio.commands`` (``pyproject.toml``), which the ``uptrio``
command line loads on every start, so this module imports argparse only. `main`
(`bench.dispatch`) runs it, and says in one line how to install the harness's extras
when they are missing::

    uptrio bench [--monitors 1000] [--type http|tcp|dns|ping|mix|http=7,dns=3]
                 [--interval 10] [--timeout 5] [--duration 30] [--warmup S]
                 [--failing 0.0] [--slow 0.0] [--refusing 0.0] [--baseline]
                 [--nodes 1] [--kill-node [K]] [--lease-seconds S]
                 [--regions R] [--probe-source-addresses] ...
    uptrio bench sweep [--counts 1000,5000,10000,20000] [same options]
    uptrio bench history [--monitors N] [--days 90] [--maintenance] ...
    uptrio bench status-pages [--monitors 10000] [--components 100] [--pages 20]
                 [--wrk-seconds 10] [--wrk-rounds 3] [--wrk-connections 32] ...
    uptrio bench webhooks [--monitors 10000] [--flapping 0.01] [--window 120]
                          [--drain 60] [same options]
    uptrio bench alerts [--monitors 10000] [--flapping 0.01] [--window 120]
    uptrio bench windows [--monitors 10000] [--windows 1000] [--flapping 0.01] [--window 240]
                        [--drain 60] [same options]
    uptrio bench heartbeats [--heartbeats 10000] [--period 60] [--grace 5] [--rounds 2]
                 [--wrk-seconds 10] [--wrk-rounds 3] [--wrk-connections 32] ...
    uptrio bench limits [--node-counts 1,2,4] [--limit 1000] [--over 0.1] [--senders 8]
                 [--wrk-seconds 10] [--wrk-connections 8] ...
    uptrio bench api [--monitors 1000] [--wrk-seconds 10] [--wrk-rounds 3]
                 [--wrk-connections 32] [--wrk-threads 1]
    uptrio bench oncall [--requests 2000] [--week-requests 300] [--quarter-requests 50]
                 [--warmup-requests 200] [--schedule-members 50] [--overrides 100]

Each run writes ``report.json``, ``chart.png`` and the service's log to ``--output``
(default ``bench-results/<time>-<monitors>-<type>``) and prints the table on stdout;
the live display goes to stderr.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from .dispatch import main

__all__ = ["add_commands", "main"]


def _share(text: str) -> float:
    value = float(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError("a share is 0 to 1")
    return value


def _counts(text: str) -> list[int]:
    try:
        counts = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError("comma-separated monitor counts") from None
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError("monitor counts must be positive")
    return counts


def add_commands(commands: Any) -> argparse.ArgumentParser:
    """Add ``bench`` to ``commands`` (the ``uptrio`` sub-parsers); returns its parser."""
    bench = commands.add_parser(
        "bench",
        help="benchmark the service against local targets",
        description="Start the real service and local targets, create monitors through "
        "the API, measure a window after a warm-up, and report (table, JSON, chart).",
    )
    bench.add_argument(
        "action",
        nargs="?",
        choices=(
            "run",
            "sweep",
            "history",
            "status-pages",
            "webhooks",
            "alerts",
            "heartbeats",
            "limits",
            "windows",
            "oncall",
            "api",
        ),
        default="run",
        help="run (default): one run; sweep: one run per --counts value; history: "
        "availability latency and bytes on disk over a synthetic history; status-pages: "
        "a status page's cold render and its cached throughput under the load; webhooks: "
        "a run without and one with a webhook endpoint and flapping targets, side by side; "
        "alerts: the same with an escalation policy and a notification channel too; "
        "heartbeats: the ping endpoint's throughput against /healthz, and the memory of "
        "--heartbeats heartbeats held; limits: the rate limits' overshoot and cost per "
        "request with --node-counts nodes; windows: CPU per check with --windows "
        "maintenance windows open and with none, in alternating phases of one run; oncall: "
        "who is on call and the shifts of a 5-layer schedule through the API, against /healthz; "
        "api: GET /monitors/:id and GET /monitors?limit=100 against /healthz (wrk) with "
        "--monitors monitors",
    )
    load = bench.add_argument_group("load")
    load.add_argument("--monitors", type=int, default=1000, help="monitors (default 1000)")
    load.add_argument(
        "--type",
        default="http",
        help="http, tcp, dns, ping, mix (equal shares) or weights like http=7,dns=3 (default http)",
    )
    load.add_argument("--interval", type=int, default=10, help="check interval, s (default 10)")
    load.add_argument("--timeout", type=int, default=5, help="check timeout, s (default 5)")
    load.add_argument(
        "--duration",
        "--window",
        dest="duration",
        type=float,
        default=30.0,
        help="measured window, s, rounded to whole intervals (default 30)",
    )
    load.add_argument(
        "--warmup",
        type=float,
        default=None,
        help="s between the last monitor created and the window (default interval + 2)",
    )
    behaviour = bench.add_argument_group("target behaviour (shares of the monitors, 0 to 1)")
    behaviour.add_argument("--failing", type=_share, default=0.0, help="500 / NXDOMAIN / refused")
    behaviour.add_argument("--slow", type=_share, default=0.0, help="answer after --slow-seconds")
    behaviour.add_argument("--refusing", type=_share, default=0.0, help="connection refused")
    behaviour.add_argument(
        "--flapping",
        type=_share,
        default=0.0,
        help="http: 200 and 500 in turn, one flip an interval",
    )
    behaviour.add_argument("--slow-seconds", type=float, default=2.0, help="(default 2)")
    behaviour.add_argument(
        "--failure-threshold",
        type=int,
        default=None,
        help="the monitors' failure_threshold (default the API's; webhooks, alerts: 1)",
    )
    parts = bench.add_argument_group("parts")
    parts.add_argument(
        "--http-target",
        choices=("auto", "builtin", "nginx"),
        default="auto",
        help="http target: nginx when installed (auto), or built-in Python workers",
    )
    parts.add_argument("--http-workers", type=int, default=2, help="http target processes")
    parts.add_argument("--baseline", action="store_true", help="also run the bare-trio baseline")
    parts.add_argument("--api-rps", type=float, default=4.0, help="API reads/s in the window")
    parts.add_argument(
        "--create-concurrency", type=int, default=8, help="concurrent POST /monitors (default 8)"
    )
    parts.add_argument("--database-url", default=None, help="external Postgres (default embedded)")
    parts.add_argument("--max-probes-in-flight", type=int, default=None)
    parts.add_argument("--batch-size", type=int, default=None)
    parts.add_argument("--batch-age-ms", type=float, default=None)
    parts.add_argument(
        "--serve-arg",
        action="append",
        default=[],
        metavar="FLAG",
        help="extra flag for uptrio serve, repeatable (e.g. --serve-arg=--shards=16)",
    )
    parts.add_argument("--service-log-level", default="info")
    nodes = bench.add_argument_group("several nodes (docs/several-nodes.md)")
    nodes.add_argument(
        "--nodes",
        type=int,
        default=1,
        help="uptrio serve processes on one Postgres, the monitors created through each in "
        "turn; figures per node and in total (default 1)",
    )
    nodes.add_argument(
        "--kill-node",
        type=int,
        nargs="?",
        const=2,
        default=None,
        metavar="K",
        help="SIGKILL node K (default 2) in the middle of the window and report the longest "
        "gap per monitor between two probes (needs --nodes 2 or more)",
    )
    nodes.add_argument(
        "--lease-seconds",
        type=float,
        default=None,
        help="the nodes' --lease-seconds (default the service's, 10)",
    )
    nodes.add_argument(
        "--regions",
        type=int,
        default=0,
        metavar="R",
        help="spread the nodes over regions r1..rR in turn (uptrio serve --region) and give "
        "every monitor all R (docs/regions.md): R probes a monitor an interval; figures per "
        "region (needs --nodes 2 or more; default 0, no regions)",
    )
    nodes.add_argument(
        "--probe-source-addresses",
        action="store_true",
        help="node k probes from 127.0.0.(k+1) (uptrio serve --probe-source-address)",
    )
    output = bench.add_argument_group("output")
    output.add_argument("--output", type=Path, default=None, help="directory for the files")
    output.add_argument("--no-progress", action="store_true", help="no live display")
    output.add_argument("--no-chart", action="store_true", help="no PNG chart")
    output.add_argument("--keep-data", action="store_true", help="keep the database directory")
    output.add_argument(
        "--profile",
        action="store_true",
        help="sample the service (and baseline) with py-spy during the window; api: "
        "during one more wrk run per route",
    )
    output.add_argument("--seed", type=int, default=1)
    past = bench.add_argument_group("history")
    past.add_argument("--days", type=int, default=90, help="days of hourly rollups (default 90)")
    past.add_argument("--raw-days", type=int, default=2, help="days of raw checks (default 2)")
    past.add_argument(
        "--raw-interval", type=int, default=60, help="raw checks' interval, s (default 60)"
    )
    past.add_argument(
        "--requests",
        type=int,
        default=None,
        help="history: availability requests per case (default 200); oncall: on-call "
        "requests, and as many of /healthz and of the schedule (default 2,000)",
    )
    past.add_argument(
        "--maintenance",
        action="store_true",
        help="cover every monitor with a daily 1-hour maintenance window that excludes "
        "its time from availability",
    )
    pages = bench.add_argument_group("status-pages (with --days of history), heartbeats, api")
    pages.add_argument(
        "--components", type=int, default=100, help="components of a page (default 100)"
    )
    pages.add_argument(
        "--pages", type=int, default=20, help="pages rendered cold, one each (default 20)"
    )
    pages.add_argument("--wrk-seconds", type=float, default=10.0, help="per wrk run (default 10)")
    pages.add_argument("--wrk-rounds", type=int, default=3, help="wrk runs per route (default 3)")
    pages.add_argument("--wrk-connections", type=int, default=32, help="(default 32)")
    pages.add_argument("--wrk-threads", type=int, default=1, help="(default 1)")
    hooks = bench.add_argument_group("webhooks and alerts")
    hooks.add_argument(
        "--drain",
        type=float,
        default=60.0,
        help="longest wait after the window for pending deliveries (and notifications), "
        "s (default 60)",
    )
    quiet = bench.add_argument_group("windows")
    quiet.add_argument(
        "--windows", type=int, default=1000, help="maintenance windows (default 1000)"
    )
    quiet.add_argument(
        "--phases", type=int, default=8, help="phases of the window, ABBA (default 8)"
    )
    quiet.add_argument(
        "--settle", type=float, default=5.0, help="seconds after each switch (default 5)"
    )
    rota = bench.add_argument_group("oncall (with --requests, --seed, --keep-data)")
    rota.add_argument(
        "--week-requests", type=int, default=300, help="shifts over 7 days (default 300)"
    )
    rota.add_argument(
        "--quarter-requests", type=int, default=50, help="shifts over 90 days (default 50)"
    )
    rota.add_argument(
        "--warmup-requests", type=int, default=200, help="untimed, per case first (default 200)"
    )
    rota.add_argument(
        "--schedule-members", type=int, default=50, help="members, 1 to 50 (default 50)"
    )
    rota.add_argument("--overrides", type=int, default=100, help="overrides (default 100)")
    beats = bench.add_argument_group("heartbeats (with the wrk options above)")
    beats.add_argument(
        "--heartbeats", type=int, default=10_000, help="heartbeats held (default 10,000)"
    )
    beats.add_argument("--period", type=int, default=60, help="their period, s (default 60)")
    beats.add_argument("--grace", type=int, default=5, help="their grace, s (default 5)")
    beats.add_argument(
        "--rounds", type=int, default=2, help="periods of pings while held (default 2; 0: none)"
    )
    limits = bench.add_argument_group("limits (with --wrk-seconds, --wrk-connections per node)")
    limits.add_argument("--node-counts", type=_counts, default=[1, 2, 4], help="(default 1,2,4)")
    limits.add_argument("--limit", type=int, default=1000, help="per token a minute (1000)")
    limits.add_argument("--over", type=float, default=0.1, help="share sent past it (0.1)")
    limits.add_argument("--senders", type=int, default=8, help="requests at once (8)")
    sweep = bench.add_argument_group("sweep")
    sweep.add_argument(
        "--counts",
        type=_counts,
        default=[1000, 5000, 10000, 20000],
        help="monitor counts of a sweep (default 1000,5000,10000,20000)",
    )
    bench.set_defaults(run=main)
    return bench  # type: ignore[no-any-return]
