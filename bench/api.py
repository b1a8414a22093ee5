"""The bench as an API client: creating the monitors, and a steady reader during the
measured window.

`create_monitors` POSTs every planned monitor through ``create_concurrency`` tasks over
keep-alive connections (to each service, with several: plan ``k`` goes to service
``k % len(base_urls)``). Tokens are used round-robin; a token answered 429 rests until
its ``Retry-After`` (the request is retried on another token), so a run is slowed by a
rate limit, never broken by it. An answer that says the service was busy (500 or 503
with code ``database_unavailable`` or ``engine_unavailable``) is retried after a short
back-off and counted; any other error ends the run. `read_load` alternates ``GET /monitors/:id`` and
``GET /monitors`` at a fixed rate and records each request's latency.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field

import httpx
import trio

from .plan import BenchParams, MonitorPlan

__all__ = ["ApiLatencies", "CreateOutcome", "TokenPool", "create_monitors", "read_load"]


class TokenPool:
    """Bearer tokens used in turn; a token told 429 rests until its Retry-After."""

    def __init__(self, tokens: Sequence[str]) -> None:
        if not tokens:
            raise ValueError("no tokens")
        self._tokens = list(tokens)
        self._rest_until = [0.0] * len(tokens)
        self._next = 0
        self.throttled = 0

    async def take(self) -> tuple[int, str]:
        """The next token not resting (waits for one): ``(slot, jwt)``."""
        while True:
            now = time.monotonic()
            for _ in range(len(self._tokens)):
                slot = self._next
                self._next = (self._next + 1) % len(self._tokens)
                if self._rest_until[slot] <= now:
                    return slot, self._tokens[slot]
            await trio.sleep(max(0.01, min(self._rest_until) - now))

    def rest(self, slot: int, seconds: float) -> None:
        """Mark token ``slot`` throttled for ``seconds``."""
        self.throttled += 1
        self._rest_until[slot] = time.monotonic() + max(0.05, seconds)


@dataclass(slots=True)
class CreateOutcome:
    """Monitors created: ids by plan index, seconds taken, throttled answers (429),
    busy answers retried (500/503 ``database_unavailable`` or ``engine_unavailable``)."""

    ids: dict[int, str] = field(default_factory=dict)
    seconds: float = 0.0
    throttled: int = 0
    retried: int = 0
    started_at: float = 0.0
    finished_at: float = 0.0

    @property
    def per_second(self) -> float:
        """Monitors created per second of wall time."""
        return len(self.ids) / self.seconds if self.seconds > 0 else 0.0


def _body(plan: MonitorPlan, params: BenchParams) -> dict[str, object]:
    body: dict[str, object] = {
        "name": f"bench-{plan.index}",
        "url": plan.url,
        "type": plan.type,
        "interval_seconds": params.interval_seconds,
        "timeout_seconds": params.timeout_seconds,
    }
    if params.failure_threshold is not None:
        body["failure_threshold"] = params.failure_threshold
    if params.regions:  # every region, the default quorum (docs/regions.md)
        body["regions"] = [f"r{k}" for k in range(1, params.regions + 1)]
    return body


_RETRYABLE_CODES = frozenset({"database_unavailable", "engine_unavailable"})


def _error_code(response: httpx.Response) -> str | None:
    """The ``error.code`` of an error answer (docs/api.md, Error codes), or None."""
    try:
        return str(response.json()["error"]["code"])
    except (ValueError, KeyError, TypeError):
        return None


def _retryable(response: httpx.Response) -> bool:
    """Whether an error answer says "try again" (the database or engine was busy)."""
    return _error_code(response) in _RETRYABLE_CODES


def _retry_after(response: httpx.Response) -> float:
    try:
        return float(response.headers.get("Retry-After", "1"))
    except ValueError:
        return 1.0


async def create_monitors(
    base_url: str | Sequence[str],
    pools: Sequence[TokenPool],
    plans: Sequence[MonitorPlan],
    params: BenchParams,
    on_progress: Callable[[int], None],
) -> CreateOutcome:
    """Create ``plans`` through ``POST /monitors``; plan ``k`` goes to account pool
    ``k % len(pools)``. ``on_progress(created)`` is called after each 201. With several
    ``base_url`` (the nodes of `bench.cluster`), plan ``k`` goes to service
    ``k % len(base_url)``, with ``create_concurrency`` tasks for each.

    Raises:
        RuntimeError: an answer other than 201 or 429 (its body says why).
    """
    outcome = CreateOutcome(started_at=time.time())
    urls = [base_url] if isinstance(base_url, str) else list(base_url)
    limits = httpx.Limits(
        max_connections=params.create_concurrency,
        max_keepalive_connections=params.create_concurrency,
    )
    started = time.perf_counter()
    async with AsyncExitStack() as stack:
        clients = [
            await stack.enter_async_context(
                httpx.AsyncClient(base_url=url, limits=limits, timeout=120.0)
            )
            for url in urls
        ]
        async with trio.open_nursery() as nursery:
            for k, client in enumerate(clients):
                queue = list(reversed(plans[k :: len(clients)]))
                for _ in range(params.create_concurrency):
                    nursery.start_soon(
                        _create_worker, client, queue, pools, params, outcome, on_progress
                    )
    outcome.seconds = time.perf_counter() - started
    outcome.finished_at = time.time()
    outcome.throttled = sum(p.throttled for p in pools)
    return outcome


async def _create_worker(
    client: httpx.AsyncClient,
    queue: list[MonitorPlan],
    pools: Sequence[TokenPool],
    params: BenchParams,
    outcome: CreateOutcome,
    on_progress: Callable[[int], None],
) -> None:
    """One task of `create_monitors`: POSTs the plans it pops from ``queue`` (shared
    with the other tasks of ``client``'s service) until it is empty."""
    while queue:
        plan = queue.pop()
        pool = pools[plan.index % len(pools)]
        for _attempt in range(1000):  # bounded: a limit that never lifts fails
            slot, token = await pool.take()
            # keyed (docs/api.md, Idempotency keys): a retry after a 500 engine_unavailable
            # (the monitor was committed) replays the 201 instead of creating a second
            # monitor
            headers = {
                "Authorization": f"Bearer {token}",
                "Idempotency-Key": f"bench-monitor-{plan.index}",
            }
            response = await client.post("/monitors", json=_body(plan, params), headers=headers)
            if response.status_code == 201:
                outcome.ids[plan.index] = str(response.json()["id"])
                on_progress(len(outcome.ids))
                break
            if response.status_code == 429:
                pool.rest(slot, _retry_after(response))
                continue
            if response.status_code == 409 and _error_code(response) == "idempotency_key_in_use":
                await trio.sleep(_retry_after(response))
                continue
            if response.status_code in (500, 503) and _retryable(response):
                outcome.retried += 1
                await trio.sleep(min(2.0, 0.05 * 2 ** min(_attempt, 5)))
                continue
            raise RuntimeError(
                f"POST /monitors answered {response.status_code}: {response.text[:500]}"
            )
        else:
            raise RuntimeError("POST /monitors kept answering 429")


@dataclass(slots=True)
class ApiLatencies:
    """Latencies in milliseconds by route, and answers by status, of `read_load`."""

    by_route: dict[str, list[float]] = field(default_factory=dict)
    statuses: dict[str, int] = field(default_factory=dict)

    def add(self, route: str, status: int, ms: float) -> None:
        """Record one request."""
        self.by_route.setdefault(route, []).append(ms)
        self.statuses[str(status)] = self.statuses.get(str(status), 0) + 1


async def read_load(
    base_url: str,
    token: str,
    monitor_ids: Sequence[str],
    rps: float,
    seconds: float,
    latencies: ApiLatencies,
    *,
    seed: int = 1,
) -> None:
    """Send ``rps`` requests per second for ``seconds`` (one at a time, on one
    keep-alive connection), alternating ``GET /monitors/:id`` (a random monitor of
    ``monitor_ids``) and ``GET /monitors``; record them in ``latencies``."""
    if rps <= 0 or not monitor_ids:
        return
    rng = random.Random(seed)
    period = 1.0 / rps
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=base_url, headers=headers, timeout=60.0) as client:
        begin = trio.current_time()
        for number in range(int(seconds * rps)):
            await trio.sleep_until(begin + number * period)
            if number % 2 == 0:
                route, path = "GET /monitors/:id", f"/monitors/{rng.choice(monitor_ids)}"
            else:
                route, path = "GET /monitors", "/monitors"
            started = time.perf_counter()
            try:
                response = await client.get(path)
                status = response.status_code
            except httpx.HTTPError:
                status = 0
            latencies.add(route, status, (time.perf_counter() - started) * 1000.0)
