"""Micro-benchmark: the engine's h11 http probe against an httpx-based one.

White-box (allowed by the import contracts in ``pyproject.toml``): it imports
``engine.probes`` and runs the probe in this process.

Usage::

    .venv/bin/python -m bench.probe_micro [--checks 5000] [--concurrency 50] [--rounds 3]

It starts a minimal HTTP/1.1 target in a child process on 127.0.0.1 (port 0; a fixed
``200 OK``, ``Connection: close``, hand-written bytes so the target is never the
bottleneck and its CPU is not counted), then, in one trio loop in this process, runs
``--checks`` probes through ``--concurrency`` worker tasks for each variant:

- ``h11``: `engine.probes.Prober.probe` (new connection per check, h11 on trio streams);
- ``httpx``: one shared ``httpx.AsyncClient`` with keep-alive disabled
  (``max_keepalive_connections=0``) and ``Connection: close``, so every check opens a new
  connection too, status compared as the probe does.

Per variant and round it prints checks per second (wall clock) and CPU milliseconds per
check (`time.process_time`, this process only: the probing side). A warm-up round of
200 checks runs first and is not reported.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable

import httpx
import trio

from engine.probes import Prober, ProbeSpec

_RESPONSE = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 3\r\n"
    b"Connection: close\r\n\r\nok\n"
)

Check = Callable[[], Awaitable[bool]]


async def _serve_target() -> None:
    """The target: answer every request with `_RESPONSE` and close. Prints the port."""

    async def handle(stream: trio.SocketStream) -> None:
        try:
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = await stream.receive_some(65536)
                if not chunk:
                    return
                data += chunk
            await stream.send_all(_RESPONSE)
        except trio.BrokenResourceError:
            pass
        finally:
            await trio.aclose_forcefully(stream)

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(
            functools.partial(trio.serve_tcp, handle, 0, host="127.0.0.1", backlog=4096)
        )
        print(listeners[0].socket.getsockname()[1], flush=True)


async def _run_round(check: Check, checks: int, concurrency: int) -> tuple[float, float, int]:
    """Run ``checks`` checks over ``concurrency`` tasks: (checks/s, CPU ms/check, failures)."""
    remaining = checks
    failures = 0

    async def worker() -> None:
        nonlocal remaining, failures
        while remaining > 0:
            remaining -= 1
            if not await check():
                failures += 1

    wall, cpu = time.perf_counter(), time.process_time()
    async with trio.open_nursery() as nursery:
        for _ in range(concurrency):
            nursery.start_soon(worker)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return checks / wall, cpu * 1000.0 / checks, failures


async def _bench(port: int, checks: int, concurrency: int, rounds: int) -> None:
    url = f"http://127.0.0.1:{port}/health"
    prober = Prober()
    spec = ProbeSpec(
        type="http", url=url, timeout_seconds=10.0, method="GET", expected_status_code=200
    )

    async def h11_check() -> bool:
        return (await prober.probe(spec)).ok

    limits = httpx.Limits(max_keepalive_connections=0)
    async with httpx.AsyncClient(
        limits=limits, headers={"Connection": "close"}, timeout=10.0, follow_redirects=True
    ) as client:

        async def httpx_check() -> bool:
            try:
                response = await client.get(url)
            except httpx.HTTPError:
                return False
            return response.status_code == 200

        variants: dict[str, Check] = {"h11": h11_check, "httpx": httpx_check}
        figures: dict[str, list[tuple[float, float, int]]] = {name: [] for name in variants}
        for check in variants.values():
            await _run_round(check, 200, concurrency)  # warm-up
        for round_number in range(1, rounds + 1):
            for name, check in variants.items():
                rate, cpu_ms, failures = await _run_round(check, checks, concurrency)
                figures[name].append((rate, cpu_ms, failures))
                print(
                    f"round {round_number} {name:5}: {rate:8.0f} checks/s  "
                    f"{cpu_ms:6.3f} CPU ms/check  failures={failures}"
                )
        print(f"\nmedian of {rounds} rounds, {checks} checks, concurrency {concurrency}:")
        for name, rows in figures.items():
            rate = statistics.median(r[0] for r in rows)
            cpu_ms = statistics.median(r[1] for r in rows)
            print(f"  {name:5}: {rate:8.0f} checks/s  {cpu_ms:6.3f} CPU ms/check")


def main() -> None:
    """Parse the command line, start the target process, run the benchmark."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--checks", type=int, default=5000, help="checks per round and variant")
    parser.add_argument("--concurrency", type=int, default=50, help="concurrent worker tasks")
    parser.add_argument("--rounds", type=int, default=3, help="measured rounds")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        trio.run(_serve_target)
        return
    server = subprocess.Popen(
        [sys.executable, "-m", "bench.probe_micro", "--serve"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        trio.run(_bench, port, args.checks, args.concurrency, args.rounds)
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
