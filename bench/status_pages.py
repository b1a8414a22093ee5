"""``uptrio bench status-pages``: the two goals of the status pages (bench/RESULTS.md,
Status pages; docs/benchmarks.md, The other benchmarks).

**Cold render** (goal: a 100-component page in at most 50 ms). In a new data directory,
``uptrio tokens create`` migrates the database and mints the token; `load_history` writes
``--components`` monitors with ``--days`` days of hourly rollups (the history bench's
synthetic history), SQL gives them a mix of current states (up, a few down and paused)
and the API opens incidents on some of them, each with a timeline of updates. Then
``uptrio serve --no-engine`` runs on it: ``--pages`` status pages are created through the
API over all ``--components`` monitors, and each page's first ``GET /status/<slug>`` is a
cold render (the page was never rendered: its cache is empty); a second GET of each shows
the cached answer. Times are taken by the client, so they include HTTP on loopback.

**Throughput under load** (goal: the cached page at ≥ 70 % of a hello-world route of the
same app). The service is started again on the same database with its engine, with the
load of ``uptrio bench`` (``--monitors`` monitors every ``--interval`` s against the
bench's local targets, created through the API); after a warm-up a status page over
``--components`` of those monitors is created, and ``wrk`` loads ``/healthz`` (the app's
trivial route: a constant JSON body through the same middleware chain) and the page in
turns, ``--rounds`` times each for ``--wrk-seconds``, so drift in the background load
falls on both alike. The page read is ``GET /status/<slug>``, the 100-component history
page too (its cache stays warm under the load: at most one render per 10 s).

``wrk`` is Debian's (``apt-get install wrk``; ``make test-tools`` installs it).
Black-box: the ``uptrio`` command, HTTP and SQL only. The report goes to
``<output>/status-pages.json`` and stdout.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import statistics
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx
import trio
import trio_asyncio

from .api import TokenPool, create_monitors
from .history import load_history
from .plan import BenchParams, make_plan
from .service import (
    BenchDatabase,
    mint_tokens,
    open_bench_database,
    run_service_process,
    serve_command,
    service_command,
)
from .targets import open_targets

__all__ = [
    "GOALS",
    "PageBenchOptions",
    "WrkOptions",
    "parse_wrk",
    "print_status_pages",
    "print_wrk_table",
    "run_status_pages_bench",
    "run_wrk",
    "shares_of_healthz",
    "wrk_in_turns",
    "wrk_totals",
]

GOALS = {"throughput_ratio_min": 0.70, "cold_render_ms_max": 50.0}
"""The goals (bench/RESULTS.md, Status pages): page vs /healthz requests/s, and a cold
render's time."""


@dataclass(frozen=True, slots=True)
class PageBenchOptions:
    """What ``uptrio bench status-pages`` adds to the load's `BenchParams`: the pages
    (``components`` each, over ``days`` of rollups; ``pages`` rendered cold) and wrk's
    runs (``rounds`` of ``seconds`` per route, ``connections``, ``threads``)."""

    components: int = 100
    days: int = 90
    pages: int = 20
    seconds: float = 10.0
    rounds: int = 3
    connections: int = 32
    threads: int = 1


_STATES = "UPDATE monitors SET status = CASE WHEN k % 25 = 7 THEN 'down' WHEN k % 25 = 19 \
THEN 'paused' ELSE 'up' END FROM (SELECT id, row_number() OVER (ORDER BY id) AS k \
FROM monitors WHERE id LIKE 'mon_hist%') AS n WHERE monitors.id = n.id"
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)(us|ms|s)$")


def _ms(text: str) -> float:
    found = _SIZE.match(text)
    if not found:
        raise ValueError(f"not a wrk duration: {text!r}")
    value, unit = float(found.group(1)), found.group(2)
    return value * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]


def parse_wrk(output: str) -> dict[str, Any]:
    """The figures of ``wrk --latency`` output: requests/s, requests, non-2xx/3xx
    answers, socket errors, and latency p50/p90/p99 in ms."""
    rps = re.search(r"Requests/sec:\s+([\d.]+)", output)
    total = re.search(r"(\d+) requests in", output)
    if not rps or not total:
        raise RuntimeError(f"wrk printed no figures:\n{output}")
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", output)
    errors = re.search(
        r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", output
    )
    latency = {
        f"p{p}_ms": round(_ms(m.group(1)), 3)
        for p in (50, 90, 99)
        if (m := re.search(rf"^\s+{p}%\s+(\S+)$", output, re.MULTILINE))
    }
    return {
        "requests_per_second": float(rps.group(1)),
        "requests": int(total.group(1)),
        "non_2xx_3xx": int(bad.group(1)) if bad else 0,
        "socket_errors": sum(int(g) for g in errors.groups()) if errors else 0,
        **latency,
    }


async def run_wrk(
    url: str, seconds: float, connections: int, threads: int, headers: Sequence[str] = ()
) -> dict[str, Any]:
    """``wrk`` against ``url`` (loopback) for ``seconds``, with ``headers`` (``"Name:
    value"``) on every request besides ``Accept-Encoding``; its parsed figures.

    Raises:
        RuntimeError: wrk is not installed, or printed no figures.
    """
    if shutil.which("wrk") is None:
        raise RuntimeError("wrk is not installed: apt-get install wrk (or make test-tools)")
    assert url.startswith("http://127.0.0.1:"), "loopback only"
    # Accept-Encoding as every browser and CDN sends it: the page is served gzipped.
    command = [
        "wrk",
        f"-t{threads}",
        f"-c{connections}",
        f"-d{seconds:g}s",
        "--latency",
        "-H",
        "Accept-Encoding: gzip, deflate, br",
        *(part for header in headers for part in ("-H", header)),
        url,
    ]
    with trio.fail_after(seconds + 30):
        done = await trio.run_process(command, capture_stdout=True, capture_stderr=True)
    return parse_wrk(bytes(done.stdout).decode())


@dataclass(frozen=True, slots=True)
class WrkOptions:
    """wrk's runs of a comparison: ``rounds`` of ``seconds`` per route, ``connections``
    and ``threads``."""

    seconds: float = 10.0
    rounds: int = 3
    connections: int = 32
    threads: int = 1


async def wrk_in_turns(
    urls: Mapping[str, str],
    wrk: WrkOptions,
    headers: Mapping[str, Sequence[str]] | None = None,
) -> dict[str, list[dict[str, Any]]]:
    """`run_wrk` on each of ``urls`` (by name) in turns, ``wrk.rounds`` times, so drift in
    the machine's load falls on every route alike; ``headers[name]`` go with that route's
    requests. The parsed figures of each run, by name.

    Raises:
        RuntimeError: wrk is not installed, or printed no figures.
    """
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in urls}
    for _ in range(wrk.rounds):
        for name, url in urls.items():
            extra = (headers or {}).get(name, ())
            runs[name].append(await run_wrk(url, wrk.seconds, wrk.connections, wrk.threads, extra))
    return runs


def shares_of_healthz(runs: Mapping[str, list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """`wrk_totals` of each route of ``runs`` (which holds ``healthz``), each route but
    ``healthz`` with ``ratio_to_healthz``: its requests/s over ``/healthz``'s."""
    figures = {name: wrk_totals(rounds) for name, rounds in runs.items()}
    base = figures["healthz"]["requests_per_second"]
    for name, row in figures.items():
        if name != "healthz":
            row["ratio_to_healthz"] = round(row["requests_per_second"] / max(base, 1e-9), 3)
    return figures


def print_wrk_table(figures: Mapping[str, dict[str, Any]], labels: Mapping[str, str] = {}) -> None:
    """The table of `shares_of_healthz`'s ``figures`` on stdout, a route a line (named by
    ``labels``, else by its key): requests/s, share of /healthz, p50, p99, errors."""
    width = max(len(labels.get(name, name)) for name in [*figures, "route"])
    print(f"  {'route':<{width}} | requests/s | vs /healthz | p50 ms | p99 ms | errors")
    for name, row in figures.items():
        errors = row["non_2xx_3xx"] + row["socket_errors"]
        print(
            f"  {labels.get(name, name):<{width}} | {row['requests_per_second']:>10,.0f} | "
            f"{row.get('ratio_to_healthz', 1.0):>11.0%} | {row['p50_ms']:>6} | "
            f"{row['p99_ms']:>6} | {errors}"
        )


def _components(monitor_ids: list[str]) -> list[dict[str, Any]]:
    groups = ("API", "Websites", "Databases", None)
    return [
        {"monitor": mid, "name": f"Service {k + 1}", "group": groups[k % len(groups)]}
        for k, mid in enumerate(monitor_ids)
    ]


async def _create_page(
    client: httpx.AsyncClient, slug: str, monitor_ids: list[str]
) -> dict[str, Any]:
    body = {
        "name": f"Status {slug}",
        "slug": slug,
        "description": "Synthetic page of the status pages benchmark",
        "components": _components(monitor_ids),
    }
    response = await client.post("/status-pages", json=body)
    if response.status_code != 201:
        raise RuntimeError(f"POST /status-pages: {response.status_code} {response.text[:300]}")
    return response.json()  # type: ignore[no-any-return]


async def _open_incidents(client: httpx.AsyncClient, monitor_ids: list[str]) -> int:
    """Incidents on some of the monitors, each with a timeline (one resolved); how many."""
    affected = [monitor_ids[k : k + 5] for k in range(0, min(len(monitor_ids), 15), 5)]
    for n, monitors in enumerate(affected):
        created = await client.post(
            "/incidents", json={"title": f"Degraded service {n + 1}", "monitors": monitors}
        )
        if created.status_code != 201:
            raise RuntimeError(f"POST /incidents: {created.status_code} {created.text[:300]}")
        incident = created.json()["id"]
        for message in ("We are looking into it.", "A fix is being deployed."):
            await client.post(f"/incidents/{incident}/updates", json={"message": message})
        if n == 0:
            await client.post(f"/incidents/{incident}/resolve", json={})
    return len(affected)


def _summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "count": len(ordered),
        "p50_ms": round(statistics.median(ordered), 2),
        "p90_ms": round(ordered[max(0, math.ceil(len(ordered) * 0.9) - 1)], 2),
        "max_ms": round(ordered[-1], 2),
        "mean_ms": round(statistics.fmean(ordered), 2),
    }


async def _time_renders(client: httpx.AsyncClient, slugs: list[str]) -> dict[str, Any]:
    """Each page's first GET (cold) and second GET (cached), timed by the client."""
    cold: list[float] = []
    warm: list[float] = []
    sizes: list[int] = []
    for slug in slugs:
        for times in (cold, warm):
            began = time.perf_counter()
            response = await client.get(f"/status/{slug}")
            times.append((time.perf_counter() - began) * 1000)
            if response.status_code != 200:
                raise RuntimeError(f"GET /status/{slug}: {response.status_code}")
        sizes.append(len(response.content))
    return {"cold": _summary(cold), "cached": _summary(warm), "html_bytes": max(sizes)}


async def _cold_phase(
    data_dir: Path, token: str, components: int, pages: int, output: Path
) -> dict[str, Any]:
    command = serve_command(data_dir, "--no-engine", log_level="warning")
    headers = {"Authorization": f"Bearer {token}"}
    async with run_service_process(command, output / "service-cold.log") as service:
        async with httpx.AsyncClient(
            base_url=service.base_url, headers=headers, timeout=30
        ) as client:
            ids = [f"mon_hist{str(k).zfill(20)}" for k in range(1, components + 1)]
            incidents = await _open_incidents(client, ids)
            slugs = [f"history-{k}" for k in range(pages)]
            for slug in slugs:
                await _create_page(client, slug, ids)
            renders = await _time_renders(client, slugs)
        service.terminate()
        await service.wait_stopped()
    return {"incidents": incidents, **renders}


async def _load_phase(
    params: BenchParams, data_dir: Path, options: PageBenchOptions, output: Path
) -> dict[str, Any]:
    plans = make_plan(params)
    budget = 3600.0 + params.monitors / 10 + 4 * options.seconds * options.rounds
    async with open_targets(plans, params, output, max_seconds=budget) as targets:
        plans = [p.with_ports(targets.ports) for p in plans]
        command = service_command(params, data_dir, targets.ports.dns)
        async with run_service_process(command, output / "service-load.log") as service:
            (token,) = await mint_tokens(data_dir, None, "bench", 1)
            creation = await create_monitors(
                service.base_url, [TokenPool([token])], plans, params, lambda _: None
            )
            await trio.sleep(params.warmup)
            headers = {"Authorization": f"Bearer {token}"}
            async with httpx.AsyncClient(
                base_url=service.base_url, headers=headers, timeout=30
            ) as client:
                live = [creation.ids[k] for k in sorted(creation.ids)][: options.components]
                await _create_page(client, "live", live)
                cold_under_load = await _time_renders(client, ["live"])
            urls = {
                "healthz": f"{service.base_url}/healthz",
                "live_page": f"{service.base_url}/status/live",
                "history_page": f"{service.base_url}/status/history-0",
            }
            wrk = WrkOptions(options.seconds, options.rounds, options.connections, options.threads)
            runs = await wrk_in_turns(urls, wrk)
            service.terminate()
            await service.wait_stopped()
    figures = shares_of_healthz(runs)
    return {
        "monitors": params.monitors,
        "interval_seconds": params.interval_seconds,
        "created_per_second": round(len(creation.ids) / max(creation.seconds, 1e-6), 1),
        "live_page_cold_render": cold_under_load["cold"],
        "html_bytes": {"live_page": cold_under_load["html_bytes"]},
        "wrk": {
            k: v for k, v in asdict(options).items() if k not in ("components", "days", "pages")
        },
        "rounds": runs,
        "figures": figures,
    }


def wrk_totals(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """Requests/s over all rounds (requests over time), errors summed, worst p99."""
    seconds = sum(r["requests"] / r["requests_per_second"] for r in rounds if r["requests"])
    requests = sum(r["requests"] for r in rounds)
    return {
        "requests_per_second": round(requests / max(seconds, 1e-9), 1),
        "per_round": [r["requests_per_second"] for r in rounds],
        "non_2xx_3xx": sum(r["non_2xx_3xx"] for r in rounds),
        "socket_errors": sum(r["socket_errors"] for r in rounds),
        "p50_ms": statistics.median(r.get("p50_ms", 0.0) for r in rounds),
        "p99_ms": max(r.get("p99_ms", 0.0) for r in rounds),
    }


async def run_status_pages_bench(
    params: BenchParams, options: PageBenchOptions, output: Path
) -> dict[str, Any]:
    """The whole benchmark (module docstring) with the load of ``params``; returns the
    report, also written to ``output/status-pages.json``."""
    components, days = options.components, options.days
    await trio.Path(output).mkdir(parents=True, exist_ok=True)
    data_dir = Path(tempfile.mkdtemp(prefix="uptrio-status-pages-"))
    try:
        async with trio_asyncio.open_loop():
            async with open_bench_database(data_dir, None) as bench_db:
                (token,) = await mint_tokens(data_dir, None, "bench", 1)  # migrates, too
                took = await load_history(bench_db, components, days, 0, 60, int(time.time()))
                await _set_states(bench_db)
                cold = await _cold_phase(data_dir, token, components, options.pages, output)
            load = await _load_phase(params, data_dir, options, output)
    finally:
        if not params.keep_data:
            shutil.rmtree(data_dir, ignore_errors=True)
    ratio = min(load["figures"][name]["ratio_to_healthz"] for name in ("live_page", "history_page"))
    report = {
        "history": {"components": components, "days": days, "load_seconds": took},
        "cold_render": cold,
        "under_load": load,
        "goals": {
            **GOALS,
            "throughput_ratio": ratio,
            "cold_render_p50_ms": cold["cold"]["p50_ms"],
            "throughput_met": ratio >= GOALS["throughput_ratio_min"],
            "cold_render_met": cold["cold"]["p50_ms"] <= GOALS["cold_render_ms_max"],
        },
    }
    await trio.Path(output / "status-pages.json").write_text(json.dumps(report, indent=2))
    return report


async def _set_states(bench_db: BenchDatabase) -> None:
    async def run(connection: Any) -> None:
        await connection.execute(_STATES)

    await bench_db.run(run)


def print_status_pages(report: dict[str, Any]) -> None:
    """The report as plain text on stdout."""
    history, cold, load = report["history"], report["cold_render"], report["under_load"]
    goals = report["goals"]
    print(
        f"cold render, {history['components']} components, {history['days']} days of hourly "
        f"rollups, {cold['incidents']} incidents, {cold['html_bytes']:,} bytes of HTML "
        f"({cold['cold']['count']} pages, no load):"
    )
    for name in ("cold", "cached"):
        row = cold[name]
        print(
            f"  {name:>6}: p50 {row['p50_ms']} ms, p90 {row['p90_ms']} ms, max {row['max_ms']} ms"
        )
    wrk = load["wrk"]
    print(
        f"under load: {load['monitors']:,} http monitors every {load['interval_seconds']} s; "
        f"wrk -t{wrk['threads']} -c{wrk['connections']}, {wrk['rounds']} rounds of "
        f"{wrk['seconds']:g} s per route, in turns"
    )
    print_wrk_table(load["figures"])
    print(
        f"  cold render of the live page under load: {load['live_page_cold_render']['p50_ms']} ms"
    )
    print(
        f"goals: page >= {goals['throughput_ratio_min']:.0%} of /healthz: "
        f"{goals['throughput_ratio']:.0%} ({'met' if goals['throughput_met'] else 'MISSED'}); "
        f"cold render <= {goals['cold_render_ms_max']:g} ms: {goals['cold_render_p50_ms']} ms "
        f"p50 ({'met' if goals['cold_render_met'] else 'MISSED'})"
    )
