"""Running a parsed ``uptrio bench`` command: `main` dispatches on its action (one run,
``sweep``, ``history``, ``status-pages``, ``webhooks``, ``alerts``, ``windows``, ``heartbeats``,
``limits``, ``oncall``, ``api``;
docs/benchmarks.md, "`uptrio bench`" and "The other benchmarks") and turns the
arguments into each benchmark's parameters (`params_from_args` for the runs of
``uptrio bench`` itself, the options of the others).

`bench.cli` builds the parser and points it here. Like it, this module imports the
standard library only at import time (the ``uptrio`` command loads it on every start);
the harness itself, and its extras, are imported when a command runs.
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from pathlib import Path
from typing import Any

__all__ = ["EXTRAS", "main", "params_from_args"]


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
        regions=args.regions,
        probe_source_addresses=args.probe_source_addresses,
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


def _oncall(args: argparse.Namespace, stamp: str) -> int:
    """``uptrio bench oncall`` (bench.oncall)."""
    import trio

    from .oncall import OnCallBenchOptions, print_oncall, run_oncall_bench

    base = args.output or Path("bench-results") / f"{stamp}-oncall"
    options = OnCallBenchOptions(
        requests=2_000 if args.requests is None else args.requests,
        week_requests=args.week_requests,
        quarter_requests=args.quarter_requests,
        warmup_requests=args.warmup_requests,
        members=args.schedule_members,
        overrides=args.overrides,
        seed=args.seed,
        keep_data=args.keep_data,
    )
    counts = (options.week_requests, options.quarter_requests, options.warmup_requests)
    if options.requests < 1 or min(*counts, options.overrides) < 0:
        print(
            "uptrio bench: --requests at least 1; --week-requests, --quarter-requests, "
            "--warmup-requests and --overrides at least 0",
            file=sys.stderr,
        )
        return 2
    if not 1 <= options.members <= 50:  # a layer holds at most 50 (docs/on-call.md)
        print(
            "uptrio bench: --schedule-members 1 to 50",
            file=sys.stderr,
        )
        return 2
    print_oncall(trio.run(run_oncall_bench, options, base))
    print(f"report: {base / 'oncall.json'}")
    return 0


def _api(args: argparse.Namespace, stamp: str) -> int:
    """``uptrio bench api`` (bench.api_reads)."""
    import trio

    from .api_reads import print_api_reads, run_api_reads_bench
    from .status_pages import WrkOptions

    base = args.output or Path("bench-results") / f"{stamp}-api"
    if args.monitors < 1 or args.wrk_rounds < 1 or args.wrk_seconds < 1:
        print(
            "uptrio bench: --monitors, --wrk-rounds and --wrk-seconds (wrk's) at least 1",
            file=sys.stderr,
        )
        return 2
    params = _params(args, [(args.monitors, base)])
    if params is None:
        return 2
    wrk = WrkOptions(args.wrk_seconds, args.wrk_rounds, args.wrk_connections, args.wrk_threads)
    print_api_reads(trio.run(run_api_reads_bench, params[0], wrk, base, args.profile))
    print(f"report: {base / 'report.json'}")
    return 0


def _pair(args: argparse.Namespace, argv: list[str], stamp: str) -> int:
    """``uptrio bench webhooks`` (bench.webhooks) or ``uptrio bench alerts``
    (bench.alerts): two runs side by side."""
    import trio

    if args.action == "alerts":
        from .alerts import print_alerts as show
        from .alerts import run_alerts_bench as run

        name = "report.json"
    else:
        from .webhooks import print_comparison as show
        from .webhooks import run_webhooks_bench as run

        name = "webhooks.json"
    base = args.output or Path("bench-results") / f"{stamp}-{args.action}-{args.monitors}"
    plans = _params(args, [(args.monitors, base)])
    if plans is None:
        return 2
    result = trio.run(
        functools.partial(
            run, plans[0], argv, base, drain_seconds=args.drain, chart=not args.no_chart
        )
    )
    show(result)
    print(f"report: {base / name}")
    return 0


def _windows(args: argparse.Namespace, argv: list[str], stamp: str) -> int:
    """``uptrio bench windows`` (bench.windows): one run, phases with and without
    maintenance windows open."""
    import trio

    from .windows import print_windows, run_windows_bench

    base = args.output or Path("bench-results") / f"{stamp}-windows-{args.monitors}"
    plans = _params(args, [(args.monitors, base)])
    if plans is None:
        return 2
    result = trio.run(
        functools.partial(
            run_windows_bench,
            plans[0],
            argv,
            base,
            windows=args.windows,
            phases=args.phases,
            settle_seconds=args.settle,
        )
    )
    print_windows(result)
    print(f"report: {base / 'report.json'}")
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
            200 if args.requests is None else args.requests,
            base,
            args.seed,
            args.maintenance,
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
    if args.action == "oncall":
        return _oncall(args, stamp)
    if args.action == "api":
        return _api(args, stamp)
    if args.action in ("webhooks", "alerts"):
        return _pair(args, argv, stamp)
    if args.action == "windows":
        return _windows(args, argv, stamp)
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
    if single[0].nodes > 1:  # --regions needs several nodes too (BenchParams)
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
    if "regions" in report:
        from .regions import print_regions

        print_regions(report)
    print(f"report: {output / 'report.json'}")
    return 0
