"""``uptrio bench`` and ``uptrio bench sweep``: the command line of the harness.

`add_commands` adds the ``bench`` sub-command to the ``uptrio`` parser: it is the entry
point ``bench`` of the group ``uptrio.commands`` (``pyproject.toml``), which the ``uptrio``
command line loads on every start, so this module imports argparse only. `main` runs it,
and says in one line how to install the harness's extras when they are missing::

    uptrio bench [--monitors 1000] [--type http|tcp|dns|ping|mix|http=7,dns=3]
                 [--interval 10] [--timeout 5] [--duration 30] [--warmup S]
                 [--failing 0.0] [--slow 0.0] [--refusing 0.0] [--baseline]
                 [--nodes 1] [--kill-node [K]] [--lease-seconds S] ...
    uptrio bench sweep [--counts 1000,5000,10000,20000] [same options]
    uptrio bench history [--monitors N] [--days 90] ...
    uptrio bench status-pages [--monitors 10000] [--components 100] [--pages 20]
                 [--wrk-seconds 10] [--wrk-rounds 3] [--wrk-connections 32] ...
    uptrio bench webhooks [--monitors 10000] [--flapping 0.01] [--window 120]
                          [--drain 60] [same options]
    uptrio bench heartbeats [--heartbeats 10000] [--period 60] [--grace 5] [--rounds 2]
                 [--wrk-seconds 10] [--wrk-rounds 3] [--wrk-connections 32] ...
    uptrio bench limits [--node-counts 1,2,4] [--limit 1000] [--over 0.1] [--senders 8]
                 [--wrk-seconds 10] [--wrk-connections 8] ...

Each run writes ``report.json``, ``chart.png`` and the service's log to ``--output``
(default ``bench-results/<time>-<monitors>-<type>``) and prints the table on stdout;
the live display goes to stderr.
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from pathlib import Path
from typing import Any

__all__ = ["add_commands", "main", "params_from_args"]


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
        choices=("run", "sweep", "history", "status-pages", "webhooks", "heartbeats", "limits"),
        default="run",
        help="run (default): one run; sweep: one run per --counts value; history: "
        "availability latency and bytes on disk over a synthetic history; status-pages: "
        "a status page's cold render and its cached throughput under the load; webhooks: "
        "a run without and one with a webhook endpoint and flapping targets, side by side; "
        "heartbeats: the ping endpoint's throughput against /healthz, and the memory of "
        "--heartbeats heartbeats held; limits: the rate limits' overshoot and cost per "
        "request with --node-counts nodes",
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
        help="the monitors' failure_threshold (default the API's; webhooks: 1)",
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
    output = bench.add_argument_group("output")
    output.add_argument("--output", type=Path, default=None, help="directory for the files")
    output.add_argument("--no-progress", action="store_true", help="no live display")
    output.add_argument("--no-chart", action="store_true", help="no PNG chart")
    output.add_argument("--keep-data", action="store_true", help="keep the database directory")
    output.add_argument(
        "--profile",
        action="store_true",
        help="sample the service (and baseline) with py-spy during the window",
    )
    output.add_argument("--seed", type=int, default=1)
    past = bench.add_argument_group("history")
    past.add_argument("--days", type=int, default=90, help="days of hourly rollups (default 90)")
    past.add_argument("--raw-days", type=int, default=2, help="days of raw checks (default 2)")
    past.add_argument(
        "--raw-interval", type=int, default=60, help="raw checks' interval, s (default 60)"
    )
    past.add_argument(
        "--requests", type=int, default=200, help="availability requests per case (default 200)"
    )
    pages = bench.add_argument_group("status-pages (with --days of history)")
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
    hooks = bench.add_argument_group("webhooks")
    hooks.add_argument(
        "--drain",
        type=float,
        default=60.0,
        help="longest wait after the window for pending deliveries, s (default 60)",
    )
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


def params_from_args(args: argparse.Namespace, monitors: int, output: Path) -> Any:
    """The `bench.plan.BenchParams` of parsed ``args`` for ``monitors`` monitors."""
    from .plan import BenchParams, parse_type_mix

    return BenchParams(
        monitors=monitors,
        type_mix=parse_type_mix(args.type),
        interval_seconds=args.interval,
        timeout_seconds=args.timeout,
        duration_seconds=args.duration,
        warmup_seconds=args.warmup,
        failing_share=args.failing,
        slow_share=args.slow,
        refusing_share=args.refusing,
        flapping_share=args.flapping,
        slow_seconds=args.slow_seconds,
        failure_threshold=args.failure_threshold,
        http_target=args.http_target,
        http_workers=args.http_workers,
        create_concurrency=args.create_concurrency,
        api_rps=args.api_rps,
        max_probes_in_flight=args.max_probes_in_flight,
        batch_size=args.batch_size,
        batch_age_ms=args.batch_age_ms,
        serve_args=tuple(args.serve_arg),
        service_log_level=args.service_log_level,
        database_url=args.database_url,
        baseline=args.baseline,
        seed=args.seed,
        output_dir=output,
        progress=not args.no_progress,
        keep_data=args.keep_data,
        profile=args.profile,
        nodes=args.nodes,
        kill_node=args.kill_node,
        lease_seconds=args.lease_seconds,
    )


def _params(args: argparse.Namespace, runs: list[tuple[int, Path]]) -> list[Any] | None:
    """`params_from_args` for each ``(monitors, output)`` of ``runs``; None, with the
    reason on stderr, when the parameters are invalid."""
    try:
        return [params_from_args(args, monitors, output) for monitors, output in runs]
    except ValueError as exc:
        print(f"uptrio bench: {exc}", file=sys.stderr)
        return None


EXTRAS = frozenset({"rich", "psutil", "matplotlib", "numpy"})
"""What ``pip install -e '.[bench]'`` brings beyond the service's own dependencies."""


def _status_pages(args: argparse.Namespace, stamp: str) -> int:
    """``uptrio bench status-pages`` (bench.status_pages)."""
    import trio

    from .status_pages import PageBenchOptions, print_status_pages, run_status_pages_bench

    base = args.output or Path("bench-results") / f"{stamp}-status-pages"
    if not 1 <= args.components <= 100 or args.pages < 1 or args.monitors < args.components:
        print(
            "uptrio bench: --components 1 to 100, at most --monitors; --pages at least 1",
            file=sys.stderr,
        )
        return 2
    options = PageBenchOptions(
        components=args.components,
        days=args.days,
        pages=args.pages,
        seconds=args.wrk_seconds,
        rounds=args.wrk_rounds,
        connections=args.wrk_connections,
        threads=args.wrk_threads,
    )
    params = params_from_args(args, args.monitors, base)
    report = trio.run(run_status_pages_bench, params, options, base)
    print_status_pages(report)
    print(f"report: {base / 'status-pages.json'}")
    return 0


def _heartbeats(args: argparse.Namespace, stamp: str) -> int:
    """``uptrio bench heartbeats`` (bench.heartbeats)."""
    import trio

    from .heartbeats import HeartbeatBenchOptions, print_heartbeats, run_heartbeats_bench

    base = args.output or Path("bench-results") / f"{stamp}-heartbeats"
    if args.heartbeats < 1 or not 30 <= args.period <= 2_592_000 or args.rounds < 0:
        print(
            "uptrio bench: --heartbeats at least 1, --rounds at least 0, --period 30 to 2,592,000",
            file=sys.stderr,
        )
        return 2
    options = HeartbeatBenchOptions(
        heartbeats=args.heartbeats,
        period=args.period,
        grace=args.grace,
        rounds=args.rounds,
        seconds=args.wrk_seconds,
        wrk_rounds=args.wrk_rounds,
        connections=args.wrk_connections,
        threads=args.wrk_threads,
        keep_data=args.keep_data,
    )
    report = trio.run(run_heartbeats_bench, options, base)
    print_heartbeats(report)
    print(f"report: {base / 'heartbeats.json'}")
    return 0


def _limits(args: argparse.Namespace, stamp: str) -> int:
    """``uptrio bench limits`` (bench.limits)."""
    import trio

    from .limits import LimitsBenchOptions, print_limits, run_limits_bench

    base = args.output or Path("bench-results") / f"{stamp}-limits"
    if args.limit < 1 or args.over < 0 or args.senders < 1:
        print("uptrio bench: --limit and --senders at least 1, --over at least 0", file=sys.stderr)
        return 2
    options = LimitsBenchOptions(
        node_counts=tuple(args.node_counts),
        limit=args.limit,
        over=args.over,
        senders=args.senders,
        seconds=args.wrk_seconds,
        connections=args.wrk_connections,
        threads=args.wrk_threads,
    )
    print_limits(trio.run(run_limits_bench, options, base))
    print(f"report: {base / 'limits.json'}")
    return 0


def main(args: argparse.Namespace, argv: list[str] | None = None) -> int:
    """Run ``uptrio bench`` (or ``sweep``) from parsed ``args``; returns the exit status
    (0 when the run completed, whatever it measured; 2 for bad parameters or when the
    harness's extras are not installed)."""
    import trio

    try:
        from .output import print_table, write_chart, write_json
        from .report import build_report
        from .run import run_bench
    except ModuleNotFoundError as exc:
        if exc.name not in EXTRAS:
            raise
        print(
            f"uptrio bench: the harness needs {exc.name}; install its extras with "
            "pip install -e '.[bench]'",
            file=sys.stderr,
        )
        return 2

    argv = list(sys.argv if argv is None else argv)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    if args.action == "history":
        from .history import print_history, run_history_bench

        base = args.output or Path("bench-results") / f"{stamp}-history"
        report = trio.run(
            run_history_bench,
            args.monitors,
            args.days,
            args.raw_days,
            args.raw_interval,
            args.requests,
            base,
            args.seed,
        )
        print_history(report)
        print(f"report: {base / 'history.json'}")
        return 0
    if args.action == "status-pages":
        return _status_pages(args, stamp)
    if args.action == "heartbeats":
        return _heartbeats(args, stamp)
    if args.action == "limits":
        return _limits(args, stamp)
    if args.action == "webhooks":
        from .webhooks import print_comparison, run_webhooks_bench

        base = args.output or Path("bench-results") / f"{stamp}-webhooks-{args.monitors}"
        webhook_plans = _params(args, [(args.monitors, base)])
        if webhook_plans is None:
            return 2
        result = trio.run(
            functools.partial(
                run_webhooks_bench,
                webhook_plans[0],
                argv,
                base,
                drain_seconds=args.drain,
                chart=not args.no_chart,
            )
        )
        print_comparison(result)
        print(f"report: {base / 'webhooks.json'}")
        return 0
    if args.action == "sweep":
        from .sweep import run_sweep

        base = args.output or Path("bench-results") / f"{stamp}-sweep"
        plans = _params(args, [(n, base / f"{n}") for n in args.counts])
        if plans is None:
            return 2
        run_sweep(plans, base, argv, chart=not args.no_chart)
        return 0
    output = args.output or Path("bench-results") / f"{stamp}-{args.monitors}-{args.type}"
    single = _params(args, [(args.monitors, output)])
    if single is None:
        return 2
    if single[0].nodes > 1:
        from .cluster import cluster_phase

        record = trio.run(
            functools.partial(run_bench, service_phase=cluster_phase), single[0], argv
        )
    else:
        record = trio.run(run_bench, single[0], argv)
    report = build_report(record)
    report["files"] = {"json": str(output / "report.json")}
    if not args.no_chart:
        write_chart(report, output / "chart.png")
        report["files"]["chart"] = str(output / "chart.png")
    report["files"]["service_log"] = str(output / "service.log")
    write_json(report, output / "report.json")
    print_table(report)
    if "nodes" in report:
        from .cluster_report import print_nodes

        print_nodes(report)
    print(f"report: {output / 'report.json'}")
    return 0
