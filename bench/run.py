"""One bench run, end to end: targets, the real service, monitors through the API, a
warm-up, the measured window, the baseline, the report.

Timeline of `run_bench` (wall clock)::

    targets up ─ service up ─ tokens ─ POST /monitors xN ─ warm-up ─┬─ window ─┬─ SIGTERM
                                                                    quiet      quiet
    (with --baseline)  baseline up ─ warm-up ─┬─ window ─┬─ stop
                                              quiet      quiet

The window opens and closes at *quiet instants*: the middle of the widest gap between
the monitors' grid points (`bench.analysis.quiet_offset`), and lasts whole intervals.
So at both ends almost no probe is in flight, every monitor has the same number of grid
points inside, and the service's own counters (scraped at both ends), the store's rows
and the targets' logs count the same checks. The service is stopped at a quiet instant
too, which is why every check the targets saw must be a stored row (the report's
``run_consistency``).

What a phase measures, and the record it fills, are `bench.measure`'s; this module
orders the phases and starts what they measure.

A `RunExtension` (``uptrio bench webhooks``) is called after the monitors are created
(before the warm-up), after the window (a drain, before the SIGTERM) and once the
service has stopped (its database still up).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import httpx
import numpy as np
import trio
import trio_asyncio

from .analysis import phases_by_index, quiet_offset
from .api import ApiLatencies, CreateOutcome, TokenPool, create_monitors, read_load
from .display import Display
from .measure import (
    PhaseRecord,
    Sampler,
    next_quiet,
    profile_window,
    server_version,
    sleep_until_wall,
    snapshot_cpu,
    stored_checks,
)
from .metrics import scrape
from .plan import BenchParams, MonitorPlan, make_plan
from .procstats import ProcessGroup
from .service import (
    BenchDatabase,
    claim_secret,
    mint_tokens,
    open_bench_database,
    run_service_process,
    service_command,
)
from .targets import ArrivalLog, TargetSet, open_targets, stop_process

__all__ = [
    "RunExtension",
    "RunRecord",
    "ServicePhase",
    "run_bench",
]


class RunExtension(Protocol):
    """More to do in a run's service phase (e.g. `bench.webhooks.WebhookRun`): called
    by `run_bench` at three points of the timeline (module docstring)."""

    async def monitors_created(
        self, base_url: str, token: str, ids: dict[int, str], targets: TargetSet
    ) -> None:
        """After the monitors exist, before the warm-up: ``token`` has every permission
        of the monitors' account; ``ids`` maps plan index to monitor id."""

    async def window_closed(self, bench_db: BenchDatabase, window_end: float) -> None:
        """After the window (``window_end``, epoch seconds), before the service stops."""

    async def service_stopped(
        self, bench_db: BenchDatabase, window_start: float, window_end: float
    ) -> None:
        """After the service stopped, while its database still runs."""


@dataclass(slots=True)
class RunRecord:
    """Everything `run_bench` measured, for `bench.report.build_report`."""

    params: BenchParams
    plans: list[MonitorPlan]
    ids: dict[int, str]
    creation: CreateOutcome
    service: PhaseRecord
    baseline: PhaseRecord | None
    arrivals: ArrivalLog
    phases: Any  # numpy array: grid phase by index
    output_dir: Path
    service_command: list[str]
    http_target: str
    notes: list[str]
    postgres_version: str | None
    argv: list[str]


ServicePhase = Callable[
    [
        BenchParams,
        list[MonitorPlan],
        TargetSet,
        Path,
        Path,
        Display,
        trio.Nursery,
        "RunExtension | None",
    ],
    Awaitable[tuple[PhaseRecord, CreateOutcome, dict[int, str], list[str], str | None]],
]
"""The service phase of a run: ``(params, plans, targets, data_dir, out_dir, display,
nursery, extension) -> (record, creation, ids, service command, Postgres version)``:
`run_bench`'s own for one service, `bench.cluster.cluster_phase` for several nodes."""


async def _service_phase(
    params: BenchParams,
    plans: list[MonitorPlan],
    targets: TargetSet,
    data_dir: Path,
    out_dir: Path,
    display: Display,
    nursery: trio.Nursery,
    extension: RunExtension | None,
) -> tuple[PhaseRecord, CreateOutcome, dict[int, str], list[str], str | None]:
    record = PhaseRecord(name="service", started_at=time.time())
    interval = float(params.interval_seconds)
    display.set_phase("starting the service")
    async with open_bench_database(
        data_dir, params.database_url, params.postgres_settings
    ) as bench_db:
        command = service_command(params, data_dir, targets.ports.dns)
        if params.database_url:
            await claim_secret(data_dir, params.database_url)
        async with run_service_process(command, out_dir / "service.log") as service:
            groups = {"service": ProcessGroup("service", service.pid, include_children=False)}
            postmaster = bench_db.postmaster_pid()
            if postmaster is not None:
                groups["postgres"] = ProcessGroup("postgres", postmaster)
            target_groups = {
                f"target-{k}": ProcessGroup("target", pid) for k, pid in enumerate(targets.pids())
            }
            pool_token, reader = await mint_tokens(data_dir, params.database_url, "bench", 2)
            pools = [TokenPool([pool_token])]
            await trio.sleep(0.5)
            record.memory_idle = {
                name: g.memory(pss=name == "postgres") for name, g in groups.items()
            }
            sampler = Sampler(record, groups, targets, display)
            nursery.start_soon(sampler.run, 24 * 3600.0)
            try:
                display.set_phase("creating monitors", total=len(plans))

                def progress(created: int) -> None:
                    display.done = created

                creation = await create_monitors(service.base_url, pools, plans, params, progress)
                ids = creation.ids
                if extension is not None:
                    display.set_phase("setting up the extension")
                    await extension.monitors_created(service.base_url, pool_token, ids, targets)
                phases = phases_by_index(ids, interval, len(plans))
                offset, gap = quiet_offset(phases, interval)
                record.quiet_gap_seconds = gap
                record.window_start = next_quiet(time.time() + params.warmup, offset, interval)
                record.window_end = record.window_start + params.window_seconds
                display.set_phase("warm-up", ends_at=record.window_start)
                async with httpx.AsyncClient(base_url=service.base_url) as client:
                    await sleep_until_wall(record.window_start)
                    before = await scrape(client, time.time())
                    cpu_start = snapshot_cpu(groups | target_groups)
                    sampler.in_window = True
                    display.set_phase("measuring", ends_at=record.window_end)
                    record.api = ApiLatencies()
                    by_account = [
                        ids[p.index] for p in plans if p.index in ids and p.index % len(pools) == 0
                    ]
                    async with trio.open_nursery() as load:
                        if params.profile:
                            load.start_soon(
                                profile_window, record, service.pid, params.window_seconds, out_dir
                            )
                        load.start_soon(
                            read_load,
                            service.base_url,
                            reader,
                            by_account,
                            params.api_rps,
                            params.window_seconds - 0.5,
                            record.api,
                        )
                        # an extension that acts during the window has a window_opened:
                        # window_opened(bench_db, snapshot, start, end), ``snapshot()``
                        # reading the CPU seconds of the service and of Postgres
                        opened = getattr(extension, "window_opened", None)
                        if opened is not None:
                            load.start_soon(
                                opened,
                                bench_db,
                                lambda: snapshot_cpu(groups),
                                record.window_start,
                                record.window_end,
                            )
                        await sleep_until_wall(record.window_end)
                        after = await scrape(client, time.time())
                        cpu_end = snapshot_cpu(groups | target_groups)
                    sampler.in_window = False
                record.metrics = (before, after)
                record.cpu = {name: (cpu_start[name], cpu_end[name]) for name in cpu_start}
                record.peak_rss_hwm = {"service": groups["service"].peak_rss_bytes()}
                if extension is not None:
                    display.set_phase("draining")
                    await extension.window_closed(bench_db, record.window_end)
                display.set_phase("stopping the service")
                stop_at = record.window_end
                if time.time() > record.window_end + gap / 2 - 0.002:
                    stop_at = next_quiet(time.time(), offset, interval)
                await sleep_until_wall(stop_at)
                service.terminate()
                record.exit_code = await service.wait_stopped()
                record.stopped_at = time.time()
            finally:
                sampler.stop()
        display.set_phase("reading the store")
        if extension is not None:
            await extension.service_stopped(bench_db, record.window_start, record.window_end)
        record.stored_counts, record.stored_latency_ms = await stored_checks(
            bench_db, ids, record.window_start, record.window_end
        )
        record.stored_window_seconds = int(np.floor(record.window_end)) - int(
            np.ceil(record.window_start)
        )
        version = await bench_db.run(server_version)
    return record, creation, ids, command, version


async def _baseline_phase(
    params: BenchParams,
    plans: list[MonitorPlan],
    ids: dict[int, str],
    targets: TargetSet,
    out_dir: Path,
    display: Display,
    nursery: trio.Nursery,
) -> PhaseRecord:
    record = PhaseRecord(name="baseline", started_at=time.time())
    interval = float(params.interval_seconds)
    phases = phases_by_index(ids, interval, len(plans))
    offset, gap = quiet_offset(phases, interval)
    record.quiet_gap_seconds = gap
    record.window_start = next_quiet(time.time() + params.warmup, offset, interval)
    record.window_end = record.window_start + params.window_seconds
    stop_at = record.window_end + min(interval, 1.0)
    plan_path, out_path = out_dir / "baseline-plan.json", out_dir / "baseline-records.json"
    plan_path.write_text(
        json.dumps(
            {
                "interval_seconds": params.interval_seconds,
                "timeout_seconds": params.timeout_seconds,
                "max_in_flight": params.max_probes_in_flight or 1000,
                "dns": ["127.0.0.1", targets.ports.dns],
                "stop_at": stop_at,
                "monitors": [
                    [p.index, ids[p.index], p.type, p.url] for p in plans if p.index in ids
                ],
            }
        )
    )
    display.set_phase("baseline: starting")
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "bench.baseline", "--plan", str(plan_path), "--out", str(out_path)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
    )
    try:
        assert process.stdout is not None
        groups = {"baseline": ProcessGroup("baseline", process.pid, include_children=False)}
        with trio.fail_after(120):
            output = b""
            while b"ready" not in output:
                chunk = await process.stdout.receive_some(1024)
                if not chunk:
                    raise RuntimeError("the baseline process exited before it was ready")
                if b"idle" in chunk and "baseline" not in record.memory_idle:
                    record.memory_idle = {"baseline": groups["baseline"].memory(pss=False)}
                output += chunk
        target_groups = {
            f"target-{k}": ProcessGroup("target", pid) for k, pid in enumerate(targets.pids())
        }
        sampler = Sampler(record, groups, targets, display)
        nursery.start_soon(sampler.run, 24 * 3600.0)
        try:
            display.set_phase("baseline: warm-up", ends_at=record.window_start)
            await sleep_until_wall(record.window_start)
            cpu_start = snapshot_cpu(groups | target_groups)
            sampler.in_window = True
            display.set_phase("baseline: measuring", ends_at=record.window_end)
            async with trio.open_nursery() as profiling:
                if params.profile:
                    profiling.start_soon(
                        profile_window, record, process.pid, params.window_seconds, out_dir
                    )
                await sleep_until_wall(record.window_end)
                cpu_end = snapshot_cpu(groups | target_groups)
            sampler.in_window = False
            record.cpu = {name: (cpu_start[name], cpu_end[name]) for name in cpu_start}
            record.peak_rss_hwm = {"baseline": groups["baseline"].peak_rss_bytes()}
            display.set_phase("baseline: stopping")
            with trio.fail_after(max(30.0, stop_at - time.time() + params.timeout_seconds + 10)):
                await process.wait()
            record.stopped_at = time.time()
        finally:
            sampler.stop()
    finally:
        await stop_process(process, grace_seconds=5.0)
    record.exit_code = process.returncode
    record.baseline_records = json.loads(out_path.read_text())
    out_path.unlink()
    return record


async def run_bench(
    params: BenchParams,
    argv: list[str],
    extension: RunExtension | None = None,
    service_phase: ServicePhase | None = None,
) -> RunRecord:
    """Run one bench (module docstring) and return its raw record; the report is built
    from it by `bench.report.build_report`. ``extension`` adds work to the service
    phase (`RunExtension`); ``service_phase`` replaces the phase of one service
    (`bench.cluster.cluster_phase`: several nodes).

    Raises:
        RuntimeError: a part failed to start or the API refused a monitor (the message
            says which and where its log is).
    """
    out_dir = params.output_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    plans = make_plan(params)
    data_dir = Path(tempfile.mkdtemp(prefix="uptrio-bench-"))
    title = (
        f"{params.monitors:,} {params.type_label} monitors every {params.interval_seconds} s, "
        f"window {params.window_seconds:g} s"
    )
    display = Display(title=title, enabled=params.progress)
    budget = 3600.0 + params.monitors / 10 + 4 * (params.warmup + params.window_seconds)
    try:
        async with trio_asyncio.open_loop(), trio.open_nursery() as nursery:
            nursery.start_soon(display.run)
            try:
                display.set_phase("starting targets")
                async with open_targets(plans, params, out_dir, max_seconds=budget) as targets:
                    plans = [p.with_ports(targets.ports) for p in plans]
                    phase = service_phase or _service_phase
                    service, creation, ids, command, version = await phase(
                        params, plans, targets, data_dir, out_dir, display, nursery, extension
                    )
                    baseline = None
                    if params.baseline:
                        baseline = await _baseline_phase(
                            params, plans, ids, targets, out_dir, display, nursery
                        )
                    display.set_phase("collecting arrivals")
                    arrivals = await targets.collect(out_dir)
                    http_target = "nginx" if targets.nginx is not None else "builtin"
                    notes = list(targets.notes)
            finally:
                display.close()
    finally:
        if not params.keep_data:
            shutil.rmtree(data_dir, ignore_errors=True)
    return RunRecord(
        params=params,
        plans=plans,
        ids=ids,
        creation=creation,
        service=service,
        baseline=baseline,
        arrivals=arrivals,
        phases=phases_by_index(ids, float(params.interval_seconds), len(plans)),
        output_dir=out_dir,
        service_command=command,
        http_target=http_target,
        notes=notes,
        postgres_version=version,
        argv=argv,
    )
