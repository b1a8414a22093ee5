"""``uptrio bench heartbeats``: the two goals of heartbeats (bench/RESULTS.md, Heartbeats;
docs/benchmarks.md, The other benchmarks).

**Throughput** (goal: the ping endpoint at ≥ 80 % of a hello-world route of the same
app). In a new data directory ``uptrio serve`` runs with its engine and the per-key ping
limit lifted; one heartbeat is created through the API, and ``wrk`` loads ``/healthz``
(the app's trivial route: a constant JSON body) and ``GET /ping/<key>`` in turns,
``--wrk-rounds`` times each for ``--wrk-seconds`` (the machinery of
:mod:`bench.status_pages`). Every ping answered 200 went through the key lookup in
memory, the per-key rate limit, the heartbeat's actor and the store actor's inbox; the
store writes them in batches meanwhile. After the runs the service is stopped cleanly and
the store's ``uptrio_store_commit_delay_seconds`` (a ping's hand-over to its batch's
commit) is read from ``/metrics``. The other durability choice is measured beside it: the
service again with ``--ping-ack committed`` (a ping's 200 waits for its batch's commit),
wrk on the same ping URL (``ping_committed``). At the end the stored pings are counted
against wrk's completed 200s (a ping answered 200 is never lost: stored ≥ answered).

**Memory** (goal: 10,000 heartbeats with 60 s periods held by one node at ≤ 5 KB
each). The service is started again on the same database; after a warm-up its resident
set (RSS, ``psutil``, the service process alone; Postgres is another process) is
sampled. ``--heartbeats`` heartbeats (``--period`` s, ``--grace`` s) are inserted with
SQL and ``uptrio supervisors restart engine`` loads them (before the baseline, every
code path a held heartbeat takes was taken once: ``_warm_up``) (a restart reads what the
database holds, as after a crash). Then a pinger pings every heartbeat once per period,
evenly spread (10,000 every 60 s: 167 pings/s), for ``--rounds`` periods (0: none, the
figure is then the loaded heartbeats', not yet pinged: a smoke test): after the first
round every heartbeat is ``up`` with its deadline armed, as a node holding them in
production. RSS is sampled at the end of each round; the figure is (RSS after the last
round - RSS before the insert) / heartbeats. RSS counts what the process holds from the
operating system, fragmentation and allocator slack included: an upper bound of what
the heartbeats cost. At the end no heartbeat may be ``down`` (none missed its deadline).

Black-box: the ``uptrio`` command, HTTP and SQL only. The report goes to
``<output>/heartbeats.json`` and stdout.
"""

from __future__ import annotations

import json
import math
import shutil
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx
import psutil
import trio
import trio_asyncio

from .service import (
    UPTRIO,
    BenchDatabase,
    mint_tokens,
    open_bench_database,
    run_service_process,
    serve_command,
)
from .status_pages import (
    WrkOptions,
    print_wrk_table,
    run_wrk,
    shares_of_healthz,
    wrk_in_turns,
)

__all__ = ["GOALS", "HeartbeatBenchOptions", "print_heartbeats", "run_heartbeats_bench"]

GOALS = {"throughput_ratio_min": 0.80, "bytes_per_heartbeat_max": 5 * 1024}
"""The goals (bench/RESULTS.md, Heartbeats): ping vs /healthz requests/s; RSS per heartbeat
held."""

_FLAGS = ("--pings-per-minute", "1000000000", "--shutdown-seconds", "10")


@dataclass(frozen=True, slots=True)
class HeartbeatBenchOptions:
    """The runs: ``heartbeats`` held with ``period`` s and ``grace`` s for ``rounds``
    periods; wrk's ``wrk_rounds`` of ``seconds`` per route with ``connections`` and
    ``threads``; ``concurrency`` pings in flight at most from the pinger."""

    heartbeats: int = 10_000
    period: int = 60
    grace: int = 5
    rounds: int = 2
    seconds: float = 10.0
    wrk_rounds: int = 3
    connections: int = 32
    threads: int = 1
    concurrency: int = 32
    keep_data: bool = False


_INSERT = """
INSERT INTO heartbeats (id, account_id, name, period_seconds, grace_seconds, status,
                        ping_key, created, updated)
SELECT new_id('hbt'), a.id, 'bench ' || i, $2, $3, 'pending',
       md5(random()::text || clock_timestamp()::text || i::text), $4, $4
FROM accounts a, generate_series(1, $5) AS i WHERE a.name = $1
RETURNING ping_key
"""


async def _create_heartbeat(client: httpx.AsyncClient) -> dict[str, Any]:
    response = await client.post("/heartbeats", json={"name": "wrk", "period_seconds": 3600})
    if response.status_code != 201:
        raise RuntimeError(f"POST /heartbeats: {response.status_code} {response.text[:300]}")
    return response.json()  # type: ignore[no-any-return]


def _histogram(text: str, name: str) -> dict[str, float]:
    """Mean and p50/p99 (upper bounds of the buckets holding them), seconds, of a
    Prometheus histogram in ``text``."""
    buckets: list[tuple[float, float]] = []
    total = count = 0.0
    for line in text.splitlines():
        if line.startswith(f"{name}_bucket"):
            bound = line.split('le="', 1)[1].split('"', 1)[0]
            buckets.append((math.inf if bound == "+Inf" else float(bound), float(line.split()[-1])))
        elif line.startswith(f"{name}_sum"):
            total = float(line.split()[-1])
        elif line.startswith(f"{name}_count"):
            count = float(line.split()[-1])

    def quantile(q: float) -> float:
        return next((b for b, n in sorted(buckets) if n >= q * count), math.inf)

    return {
        "count": count,
        "mean_ms": round(1000 * total / count, 1) if count else 0.0,
        "p50_ms_at_most": round(1000 * quantile(0.5), 1),
        "p99_ms_at_most": round(1000 * quantile(0.99), 1),
    }


async def _count(bench_db: BenchDatabase, query: str, *args: Any) -> int:
    async def run(connection: Any) -> int:
        return int(await connection.fetchval(query, *args))

    return await bench_db.run(run)


async def _throughput(
    data_dir: Path, token: str, options: HeartbeatBenchOptions, output: Path
) -> dict[str, Any]:
    command = serve_command(data_dir, *_FLAGS, log_level="warning")
    headers = {"Authorization": f"Bearer {token}"}
    async with run_service_process(command, output / "service-throughput.log") as service:
        async with httpx.AsyncClient(base_url=service.base_url, headers=headers) as client:
            beat = await _create_heartbeat(client)
            urls = {"healthz": f"{service.base_url}/healthz", "ping": beat["ping_url"]}
            wrk = WrkOptions(
                options.seconds, options.wrk_rounds, options.connections, options.threads
            )
            runs = await wrk_in_turns(urls, wrk)
            metrics = (await client.get("/metrics")).text
        service.terminate()
        exit_status = await service.wait_stopped()
    # the other durability choice, measured beside: the 200 waits for the batch's commit
    committed = serve_command(data_dir, *_FLAGS, "--ping-ack", "committed", log_level="warning")
    async with run_service_process(committed, output / "service-committed.log") as service:
        key = beat["ping_url"].rsplit("/", 1)[1]
        runs["ping_committed"] = [
            await run_wrk(
                f"{service.base_url}/ping/{key}",
                options.seconds,
                options.connections,
                options.threads,
            )
            for _ in range(options.wrk_rounds)
        ]
        service.terminate()
        await service.wait_stopped()
    figures = shares_of_healthz(runs)
    return {
        "heartbeat": beat["id"],
        "wrk": {
            "seconds": options.seconds,
            "rounds": options.wrk_rounds,
            "connections": options.connections,
            "threads": options.threads,
        },
        "rounds": runs,
        "figures": figures,
        "answered": sum(
            r["requests"] - r["non_2xx_3xx"] for r in runs["ping"] + runs["ping_committed"]
        ),
        "commit_delay": _histogram(metrics, "uptrio_store_commit_delay_seconds"),
        "service_exit_status": exit_status,
    }


def _rss(pid: int) -> int:
    return int(psutil.Process(pid).memory_info().rss)


async def _rss_settled(pid: int) -> int:
    """The median of five RSS samples a tenth of a second apart, bytes."""
    samples = []
    for _ in range(5):
        samples.append(_rss(pid))
        await trio.sleep(0.1)
    return int(statistics.median(samples))


async def _ping_round(
    client: httpx.AsyncClient, urls: list[str], period: float, concurrency: int
) -> list[float]:
    """Ping every url once, evenly spread over ``period`` seconds; the latencies (ms).

    Raises:
        RuntimeError: a ping was not answered 200.
    """
    latencies: list[float] = []
    limiter = trio.CapacityLimiter(concurrency)
    began = trio.current_time()

    async def one(url: str) -> None:
        async with limiter:
            sent = time.perf_counter()
            response = await client.get(url)
            latencies.append((time.perf_counter() - sent) * 1000)
        if response.status_code != 200:
            raise RuntimeError(f"GET {url}: {response.status_code} {response.text[:200]}")

    async with trio.open_nursery() as nursery:
        for k, url in enumerate(urls):
            await trio.sleep_until(began + period * k / len(urls))
            nursery.start_soon(one, url)
    await trio.sleep_until(began + period)
    return latencies


async def _warm_up(client: httpx.AsyncClient, token: str) -> None:
    """Take every code path a held heartbeat takes once, before the baseline: the API,
    pings of each kind, a move down and up with its incident and events, the store's
    batches of them (first uses fill caches and prepared statements: not the
    heartbeats' cost)."""
    headers = {"Authorization": f"Bearer {token}"}
    beat = (
        await client.post(
            "/heartbeats", json={"name": "warm-up", "period_seconds": 3600}, headers=headers
        )
    ).json()
    for suffix in ["", "/start", "/fail", "", *[""] * 200]:
        response = await client.get(beat["ping_url"] + suffix)
        if response.status_code != 200:
            raise RuntimeError(f"warm-up ping: {response.status_code} {response.text[:200]}")
    await client.get("/heartbeats", headers=headers)
    await client.get(f"/heartbeats/{beat['id']}/pings", headers=headers)


async def _memory(
    data_dir: Path,
    bench_db: BenchDatabase,
    token: str,
    options: HeartbeatBenchOptions,
    output: Path,
) -> dict[str, Any]:
    command = serve_command(data_dir, *_FLAGS, log_level="warning")
    async with run_service_process(command, output / "service-memory.log") as service:
        pid = service.pid
        # Idle connections are dropped after 2 s, before the server's keep-alive timeout
        # (5 s, web.http.protocols) closes them: at httpx's default of 5 s a connection
        # idle since the warm-up could be reused just as the server closed it ("Server
        # disconnected without sending a response" on the first pings).
        limits = httpx.Limits(max_connections=options.concurrency, keepalive_expiry=2.0)
        async with httpx.AsyncClient(base_url=service.base_url, limits=limits) as client:
            await _warm_up(client, token)
            await trio.sleep(3)
            before = await _rss_settled(pid)

            async def insert(connection: Any) -> list[str]:
                rows = await connection.fetch(
                    _INSERT, "bench", options.period, options.grace, int(time.time()),
                    options.heartbeats,
                )  # fmt: skip
                return [str(r["ping_key"]) for r in rows]

            keys = await bench_db.run(insert)
            restart = [*UPTRIO, "supervisors", "restart", "engine", "--data-dir", str(data_dir)]
            began = time.perf_counter()
            with trio.fail_after(120):
                await trio.run_process(restart, capture_stdout=True, capture_stderr=True)
            load_seconds = time.perf_counter() - began
            loaded = await _rss_settled(pid)
            urls = [f"/ping/{key}" for key in keys]
            rounds = []
            for _ in range(options.rounds):
                latencies = await _ping_round(client, urls, options.period, options.concurrency)
                ordered = sorted(latencies)
                rounds.append(
                    {
                        "rss_bytes": await _rss_settled(pid),
                        "ping_p50_ms": round(statistics.median(ordered), 2),
                        "ping_p99_ms": round(ordered[int(len(ordered) * 0.99) - 1], 2),
                    }
                )
            down = await _count(bench_db, "SELECT count(*) FROM heartbeats WHERE status = 'down'")
            up = await _count(bench_db, "SELECT count(*) FROM heartbeats WHERE status = 'up'")
        service.terminate()
        await service.wait_stopped()
    held = rounds[-1]["rss_bytes"] if rounds else loaded
    return {
        "heartbeats": options.heartbeats,
        "period_seconds": options.period,
        "grace_seconds": options.grace,
        "engine_reload_seconds": round(load_seconds, 2),
        "rss_before_bytes": before,
        "rss_loaded_bytes": loaded,
        "rounds": rounds,
        "bytes_per_heartbeat_loaded": round((loaded - before) / options.heartbeats),
        "bytes_per_heartbeat": round((held - before) / options.heartbeats),
        "up_at_end": up,
        "down_at_end": down,
    }


async def run_heartbeats_bench(options: HeartbeatBenchOptions, output: Path) -> dict[str, Any]:
    """The whole benchmark (module docstring); returns the report, also written to
    ``output/heartbeats.json``."""
    await trio.Path(output).mkdir(parents=True, exist_ok=True)
    data_dir = Path(tempfile.mkdtemp(prefix="uptrio-heartbeats-"))
    try:
        async with trio_asyncio.open_loop():
            (token,) = await mint_tokens(data_dir, None, "bench", 1)  # migrates, too
            throughput = await _throughput(data_dir, token, options, output)
            async with open_bench_database(data_dir, None) as bench_db:
                stored = await _count(bench_db, "SELECT count(*) FROM pings")
                memory = await _memory(data_dir, bench_db, token, options, output)
    finally:
        if not options.keep_data:
            shutil.rmtree(data_dir, ignore_errors=True)
    throughput["stored"] = stored
    ratio = throughput["figures"]["ping"]["ratio_to_healthz"]
    per_heartbeat = memory["bytes_per_heartbeat"]
    report = {
        "options": asdict(options),
        "throughput": throughput,
        "memory": memory,
        "goals": {
            **GOALS,
            "throughput_ratio": ratio,
            "bytes_per_heartbeat": per_heartbeat,
            "throughput_met": ratio >= GOALS["throughput_ratio_min"],
            "memory_met": per_heartbeat <= GOALS["bytes_per_heartbeat_max"],
            "no_ping_lost": stored >= throughput["answered"],
            "none_down": memory["down_at_end"] == 0,
        },
    }
    await trio.Path(output / "heartbeats.json").write_text(json.dumps(report, indent=2))
    return report


def print_heartbeats(report: dict[str, Any]) -> None:
    """The report as plain text on stdout."""
    throughput, memory, goals = report["throughput"], report["memory"], report["goals"]
    wrk = throughput["wrk"]
    print(
        f"throughput: wrk -t{wrk['threads']} -c{wrk['connections']}, {wrk['rounds']} rounds "
        f"of {wrk['seconds']:g} s per route, in turns"
    )
    print_wrk_table(throughput["figures"])
    delay = throughput["commit_delay"]
    print(
        f"  pings answered 200 {throughput['answered']:,}, stored {throughput['stored']:,}; "
        f"hand-over to commit: mean {delay['mean_ms']} ms, p99 <= {delay['p99_ms_at_most']} ms"
    )
    print(
        f"memory: {memory['heartbeats']:,} heartbeats, period {memory['period_seconds']} s, "
        f"grace {memory['grace_seconds']} s; engine reload {memory['engine_reload_seconds']} s"
    )
    mb = 1024 * 1024
    print(
        f"  RSS before {memory['rss_before_bytes'] / mb:.1f} MB, loaded "
        f"{memory['rss_loaded_bytes'] / mb:.1f} MB, after each round of pings: "
        + ", ".join(f"{r['rss_bytes'] / mb:.1f} MB" for r in memory["rounds"])
    )
    last = memory["rounds"][-1] if memory["rounds"] else {"ping_p50_ms": "-", "ping_p99_ms": "-"}
    print(
        f"  {memory['bytes_per_heartbeat']:,} bytes per heartbeat held "
        f"({memory['bytes_per_heartbeat_loaded']:,} loaded, not yet pinged); pings p50 "
        f"{last['ping_p50_ms']} ms, p99 {last['ping_p99_ms']} ms; up {memory['up_at_end']:,}, "
        f"down {memory['down_at_end']}"
    )
    print(
        f"goals: ping >= {goals['throughput_ratio_min']:.0%} of /healthz: "
        f"{goals['throughput_ratio']:.0%} ({'met' if goals['throughput_met'] else 'MISSED'}); "
        f"<= {goals['bytes_per_heartbeat_max']:,} bytes per heartbeat: "
        f"{goals['bytes_per_heartbeat']:,} ({'met' if goals['memory_met'] else 'MISSED'}); "
        f"no ping lost: {goals['no_ping_lost']}; none down: {goals['none_down']}"
    )
