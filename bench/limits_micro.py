"""Micro-benchmark: what the rate limiter costs a request in one process, a lease in hand
against the limiter in memory (docs/several-nodes.md, Rate limits across nodes).

White-box (allowed by the import contracts in ``pyproject.toml``): it imports ``web`` and
``store`` and calls the limiters in this process, on an embedded Postgres of its own in
a temporary directory.

Usage::

    .venv/bin/python -m bench.limits_micro [--calls 200000] [--rounds 3]

Both variants decide the three windows of an API request (the token's minute and hour,
the account's minute; limits of 10^9, so nothing is refused), ``--calls`` times a round,
one call after the other:

- ``memory``: `web.http.limits.rolling.RateLimiter.admit`, the in-memory limiter, as a node without
  a database decides (and as every node decided before the quota leases);
- ``lease``: `web.http.limits.quota.QuotaLimiter.admit` on the database, as under ``uptrio serve``:
  nearly every call finds its leases in hand and returns without awaiting anything (it
  also counts the request in this node's own in-memory windows, for deciding alone);
  a new slice (every second, for the minute windows) costs one exchange, whose time is
  included.

Per variant and round: microseconds per call (wall clock) and CPU microseconds of this
process (`time.process_time`; Postgres's is not counted, but the exchanges are given);
the best round is the figure.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import trio
import trio_asyncio

from store import StoreLocation, open_store
from web.http.limits.quota import QuotaLimiter
from web.http.limits.rolling import Decision, RateLimiter, Window
from web.http.limits.throttle import SHARED_WINDOWS

_CHECKS = [
    (Window("token/minute", 10**9, 60.0), "tok_a"),
    (Window("token/hour", 10**9, 3600.0), "tok_a"),
    (Window("account/minute", 10**9, 60.0), "acct_a"),
]


async def _round(call: Callable[[], Awaitable[Decision]], calls: int) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(calls):
        await call()
    return (
        (time.perf_counter() - wall) / calls * 1e6,
        (time.process_time() - cpu) / calls * 1e6,
    )


async def _run(calls: int, rounds: int, data_dir: Path) -> None:
    async with trio_asyncio.open_loop(), open_store(StoreLocation(data_dir=data_dir)) as db:
        memory = RateLimiter(clock=time.time)
        leased = QuotaLimiter(RateLimiter(clock=time.time), db=db, shared=SHARED_WINDOWS)

        async def in_memory() -> Decision:
            return memory.admit(_CHECKS)

        async def with_lease() -> Decision:
            return await leased.admit(_CHECKS)

        for name, call in (("memory", in_memory), ("lease", with_lease)):
            assert (await call()).allowed
            before = leased.statistics().exchanges
            results = [await _round(call, calls) for _ in range(rounds)]
            best = min(results)
            listed = ", ".join(f"{wall:.2f}" for wall, _ in results)
            exchanges = leased.statistics().exchanges - before
            print(
                f"{name:>6}: {best[0]:.2f} us a call, {best[1]:.2f} us CPU "
                f"(rounds: {listed}; exchanges: {exchanges} for {calls * rounds:,} calls)"
            )


def main(argv: Sequence[str] | None = None) -> None:
    """Run the rounds and print one line per variant."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="uptrio-limits-micro-") as data_dir:
        trio.run(_run, args.calls, args.rounds, Path(data_dir))


if __name__ == "__main__":
    main()
