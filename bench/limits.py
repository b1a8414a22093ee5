"""``uptrio bench limits``: the rate limits across nodes (docs/several-nodes.md, Rate limits
across nodes): how far the nodes together go over a limit, and what the quota leases cost
per request, with 1, 2 and 4 nodes.

One embedded Postgres for the whole bench (`open_bench_database`, in a new data
directory). For each node count N of ``--node-counts`` (default 1,2,4), two clusters of
N ``uptrio serve`` processes on it, one after the other (``--node-name node-k``, one
``UPTRIO_JWT_SECRET``, ports the OS picks, no monitors; started, ready on ``/readyz``,
stopped with SIGTERM):

**Overshoot.** The nodes run with ``--token-requests-per-minute`` ``--limit`` (default
1,000; the hour's and the account's limits lifted). A new token sends ``limit * (1 +
--over)`` requests (``GET /monitors?limit=1``; 1,100 by default), request i to node
``i mod N``, ``--senders`` at once (default 8), each as soon as a sender is free.
Admitted (200) against the limit; refusals (429) got against those due (sent - limit).
The burst must end within the minute (the window rolls on after it): its seconds are
reported. These are counts: valid on a busy machine too.

**Cost.** The nodes run with every limit lifted (10^8 a minute: every request admitted
and leases large, so what is measured is the common case, a lease in hand). One ``wrk``
per node at once (``--wrk-connections`` each, ``--wrk-seconds``, one token on all
nodes). Per request: CPU milliseconds of the nodes and of Postgres (all its processes),
wrk's latency p50 and p99, and the lease statements the nodes ran
(``uptrio_rate_limit_exchanges_total``). These are times: take them on a quiet machine;
the report gives the load average before and after (``os.getloadavg``).

Black-box: the ``uptrio`` command, HTTP and ``/metrics``. The report goes to
``<output>/limits.json`` and stdout. The limiter's own cost in one process (a lease in
hand against the in-memory limiter) is ``python -m bench.limits_micro``.
"""

from __future__ import annotations

import itertools
import json
import os
import secrets
import shutil
import statistics
import tempfile
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx
import trio
import trio_asyncio

from .measure import snapshot_cpu
from .metrics import MetricsSnapshot, counter_delta, scrape
from .nodes import wait_ready
from .procstats import ProcessGroup
from .service import (
    BenchDatabase,
    ServiceProcess,
    mint_tokens,
    open_bench_database,
    run_service_process,
    serve_command,
)
from .status_pages import run_wrk

__all__ = ["LimitsBenchOptions", "print_limits", "run_limits_bench"]

_LIFTED = "100000000"
_ROUTE = "/monitors?limit=1"


@dataclass(frozen=True, slots=True)
class LimitsBenchOptions:
    """The runs: ``node_counts``; the overshoot's ``limit`` (per token and minute),
    ``over`` (share sent beyond it) and ``senders``; the cost's wrk ``seconds``,
    ``connections`` (per node) and ``threads``."""

    node_counts: tuple[int, ...] = (1, 2, 4)
    limit: int = 1000
    over: float = 0.1
    senders: int = 8
    seconds: float = 10.0
    connections: int = 8
    threads: int = 1


@asynccontextmanager
async def _cluster(
    bench_db: BenchDatabase,
    data_dir: Path,
    logs: Path,
    count: int,
    env: dict[str, str],
    *flags: str,
) -> AsyncIterator[list[ServiceProcess]]:
    """``count`` nodes on ``bench_db`` with ``flags``, each ready; stopped on exit."""
    async with AsyncExitStack() as stack:
        nodes = []
        for number in range(1, count + 1):
            name = f"node-{number}"
            command = serve_command(
                data_dir / name, "--database-url", bench_db.url, "--node-name", name, *flags
            )
            log = logs.with_name(f"{logs.name}-{name}.log")
            nodes.append(await stack.enter_async_context(run_service_process(command, log, env)))
        for node in nodes:
            await wait_ready(node.base_url, 60.0)
        yield nodes


async def _scrape_all(nodes: Sequence[ServiceProcess]) -> list[MetricsSnapshot]:
    snapshots = []
    async with httpx.AsyncClient(timeout=30.0) as client:
        for node in nodes:
            client.base_url = httpx.URL(node.base_url)
            snapshots.append(await scrape(client, trio.current_time()))
    return snapshots


def _grown(before: list[MetricsSnapshot], after: list[MetricsSnapshot], name: str) -> int:
    """Growth of counter ``name`` summed over the nodes (a missing one counts 0)."""
    return int(sum(counter_delta(b, a, name) or 0 for b, a in zip(before, after, strict=True)))


async def _overshoot(
    nodes: list[ServiceProcess], token: str, options: LimitsBenchOptions
) -> dict[str, Any]:
    """The overshoot phase (module docstring) on running ``nodes``."""
    sent = options.limit + round(options.limit * options.over)
    statuses = [0] * sent
    numbers = itertools.count()
    before = await _scrape_all(nodes)
    async with AsyncExitStack() as stack:
        clients = [
            await stack.enter_async_context(
                httpx.AsyncClient(
                    base_url=node.base_url,
                    headers={"Authorization": f"Bearer {token}"},
                    timeout=10.0,
                )
            )
            for node in nodes
        ]

        async def sender() -> None:
            while (number := next(numbers)) < sent:
                response = await clients[number % len(clients)].get(_ROUTE)
                statuses[number] = response.status_code

        began = trio.current_time()
        with trio.fail_after(120):
            async with trio.open_nursery() as nursery:
                for _ in range(options.senders):
                    nursery.start_soon(sender)
        seconds = trio.current_time() - began
    after = await _scrape_all(nodes)
    admitted, refused = statuses.count(200), statuses.count(429)
    statements = _grown(before, after, "uptrio_rate_limit_exchanges")
    return {
        "limit": options.limit,
        "sent": sent,
        "admitted": admitted,
        "over_limit": admitted - options.limit,
        "refusals_due": max(sent - options.limit, 0),
        "refusals_got": refused,
        "other_statuses": sent - admitted - refused,
        "seconds": round(seconds, 3),
        "within_the_minute": seconds < 60.0,
        "statements": statements,
        "requests_per_statement": round(sent / statements, 1) if statements else None,
        "admitted_alone": _grown(before, after, "uptrio_rate_limit_admitted_alone"),
    }


async def _cost(
    bench_db: BenchDatabase, nodes: list[ServiceProcess], token: str, options: LimitsBenchOptions
) -> dict[str, Any]:
    """The cost phase (module docstring) on running ``nodes``."""
    groups = {
        node.log_path.stem: ProcessGroup(node.log_path.stem, node.pid, include_children=False)
        for node in nodes
    }
    postmaster = bench_db.postmaster_pid()
    if postmaster is not None:
        groups["postgres"] = ProcessGroup("postgres", postmaster)
    before, cpu_before = await _scrape_all(nodes), snapshot_cpu(groups)
    results: list[dict[str, Any]] = []

    async def load(node: ServiceProcess) -> None:
        results.append(
            await run_wrk(
                node.base_url + _ROUTE,
                options.seconds,
                options.connections,
                options.threads,
                headers=[f"Authorization: Bearer {token}"],
            )
        )

    async with trio.open_nursery() as nursery:
        for node in nodes:
            nursery.start_soon(load, node)
    cpu_after, after = snapshot_cpu(groups), await _scrape_all(nodes)
    requests = sum(r["requests"] for r in results)
    spent = {name: cpu_after[name].seconds - cpu_before[name].seconds for name in groups}
    nodes_ms = sum(v for k, v in spent.items() if k != "postgres") * 1000 / max(requests, 1)
    postgres_ms = spent.get("postgres", 0.0) * 1000 / max(requests, 1)
    statements = _grown(before, after, "uptrio_rate_limit_exchanges")
    return {
        "requests": requests,
        "requests_per_second": round(sum(r["requests_per_second"] for r in results), 1),
        "non_2xx": sum(r["non_2xx_3xx"] for r in results),
        "p50_ms": round(statistics.median(r.get("p50_ms", 0.0) for r in results), 3),
        "p99_ms": max(r.get("p99_ms", 0.0) for r in results),
        "cpu_ms_per_request": {
            "nodes": round(nodes_ms, 3),
            "postgres": round(postgres_ms, 3) if postmaster is not None else None,
        },
        "statements": statements,
        "requests_per_statement": round(requests / statements, 1) if statements else None,
    }


async def run_limits_bench(options: LimitsBenchOptions, output: Path) -> dict[str, Any]:
    """The whole benchmark (module docstring); returns the report, also written to
    ``output/limits.json``."""
    await trio.Path(output).mkdir(parents=True, exist_ok=True)
    data_dir = Path(tempfile.mkdtemp(prefix="uptrio-limits-"))
    env = {"UPTRIO_JWT_SECRET": secrets.token_hex(32)}
    report: dict[str, Any] = {
        "options": asdict(options),
        "load_average_before": os.getloadavg(),
        "runs": [],
    }
    limited = ("--token-requests-per-minute", str(options.limit))
    lifted = ("--token-requests-per-minute", _LIFTED)
    try:
        async with trio_asyncio.open_loop(), open_bench_database(data_dir, None) as bench_db:
            count = len(options.node_counts) + 1  # one token per overshoot, one for the cost
            *fresh, shared = await mint_tokens(data_dir / "cli", bench_db.url, "bench", count, env)
            for nodes_count, token in zip(options.node_counts, fresh, strict=True):
                run: dict[str, Any] = {"nodes": nodes_count}
                logs = output / f"overshoot-{nodes_count}"
                async with _cluster(bench_db, data_dir, logs, nodes_count, env, *limited) as nodes:
                    run["overshoot"] = await _overshoot(nodes, token, options)
                logs = output / f"cost-{nodes_count}"
                async with _cluster(bench_db, data_dir, logs, nodes_count, env, *lifted) as nodes:
                    run["cost"] = await _cost(bench_db, nodes, shared, options)
                report["runs"].append(run)
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
    report["load_average_after"] = os.getloadavg()
    (output / "limits.json").write_text(json.dumps(report, indent=2) + "\n")
    return report


def print_limits(report: dict[str, Any]) -> None:
    """The report's two tables on stdout."""
    print("overshoot (one token, requests spread over the nodes in turn)")
    print("nodes  limit  sent  admitted  over  refusals due  got  seconds  statements  req/stmt")
    for run in report["runs"]:
        o = run["overshoot"]
        print(
            f"{run['nodes']:>5}  {o['limit']:>5}  {o['sent']:>4}  {o['admitted']:>8}  "
            f"{o['over_limit']:>4}  {o['refusals_due']:>12}  {o['refusals_got']:>3}  "
            f"{o['seconds']:>7}  {o['statements']:>10}  {o['requests_per_statement']}"
        )
    print("cost per request (limits lifted: a lease in hand)")
    print("nodes  requests/s  p50 ms  p99 ms  CPU ms nodes  CPU ms postgres  statements  req/stmt")
    for run in report["runs"]:
        c = run["cost"]
        cpu = c["cpu_ms_per_request"]
        print(
            f"{run['nodes']:>5}  {c['requests_per_second']:>10}  {c['p50_ms']:>6}  "
            f"{c['p99_ms']:>6}  {cpu['nodes']:>12}  {cpu['postgres']!s:>15}  "
            f"{c['statements']:>10}  {c['requests_per_statement']}"
        )
    before, after = report["load_average_before"], report["load_average_after"]
    print(f"load average before {before[0]:.2f}, after {after[0]:.2f}")
