"""``uptrio bench oncall``: who is on call, answered through the API (docs/on-call.md; the
goal, :data:`GOAL_P99_MS`: ``GET /schedules/:id/on-call`` of a 5-layer schedule with 50
members and 100 overrides in at most 5 ms p99; docs/benchmarks.md, The other benchmarks).

In a new data directory, ``uptrio tokens create`` migrates the embedded Postgres and mints
the token, then ``uptrio serve --no-engine`` (the rate limits lifted, logs at ``warning``)
runs on it. Through the API, as a client would: ``--members`` members (default 50, in
Europe/Berlin), one schedule in Europe/Berlin whose five layers (:func:`layer_specs`: weekly;
daily on weekday business hours; custom 12 h; weekly on weekends; custom 8 h on weekday
nights) each take every member in an order of their own, and ``--overrides`` overrides
(default 100, :func:`override_specs`: 1 to 48 hours each, a random member) spread over the 90
days from the current hour. ``bench.oncall_micro`` times the same schedule in-process,
without HTTP or the database.

Then, on one kept-alive HTTP/1.1 connection (httpx, one request at a time), five cases:

- ``healthz``: ``GET /healthz``, the app's trivial route: the request path's own cost;
- ``schedule``: ``GET /schedules/:id``, an authenticated read of one row: what a token's
  check and one trip to Postgres add to that;
- ``on_call``: ``GET /schedules/:id/on-call?at=`` a random instant of the 90 days;
- ``shifts_7d``: ``GET /schedules/:id/shifts`` over a random 7-day range of them;
- ``shifts_90d``: ``GET /schedules/:id/shifts`` over 90 days from a random instant of the
  first day.

Each case is first warmed up (``--warmup-requests`` each, at most its count: caches,
prepared statements), then its requests (``--requests``, ``--week-requests``,
``--quarter-requests``; healthz and schedule as many as on-call) are made in
:data:`ROUNDS` rounds in turns, so drift in the machine's load falls on every case alike.
Each request is timed by the client from the call to the whole body read
(``time.perf_counter``); figures per case: p50, p90, p99 and max in milliseconds (nearest
rank), requests per second (requests over the seconds spent on them), the service's CPU
milliseconds per request (psutil, the service process alone; Postgres not counted) and what
the answers held. Black-box: the ``uptrio`` command and HTTP only. The report goes to
``<output>/oncall.json`` and stdout.
"""

from __future__ import annotations

import json
import math
import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil
import trio

from .service import mint_tokens, run_service_process, serve_command

__all__ = [
    "GOAL_P99_MS",
    "ROUNDS",
    "OnCallBenchOptions",
    "layer_specs",
    "override_specs",
    "print_oncall",
    "run_oncall_bench",
]

GOAL_P99_MS = 5.0
"""Goal: ``GET /schedules/:id/on-call`` p99 at most, milliseconds (docs/on-call.md)."""
ROUNDS = 4
"""Rounds in which each case's requests are made, in turns."""
TIME_ZONE = "Europe/Berlin"
DAY = 86_400
SPAN_SECONDS = 90 * DAY
"""The span of the overrides and of the instants asked about, seconds."""
_WEEK = 7 * DAY
_WEEKDAYS = ["mon", "tue", "wed", "thu", "fri"]


def layer_specs(rng: random.Random, members: list[str]) -> list[dict[str, Any]]:
    """The benchmark's five layers as ``POST /schedules`` takes them (docs/on-call.md,
    Schedules through the API), each with every one of ``members`` (1 to 50 ids) in an
    order ``rng`` draws; handoffs at 09:00 local time from Monday 2026-01-05."""

    def order() -> list[str]:
        return rng.sample(members, len(members))

    def rotation(kind: str, length_seconds: int | None = None) -> dict[str, Any]:
        spec: dict[str, Any] = {"type": kind, "handoff": "2026-01-05T09:00"}
        if length_seconds is not None:
            spec["length_seconds"] = length_seconds
        return spec

    return [
        {"name": "weekly", "members": order(), "rotation": rotation("weekly")},
        {
            "name": "business hours",
            "members": order(),
            "rotation": rotation("daily"),
            "restrictions": [{"days": _WEEKDAYS, "start": "09:00", "end": "17:00"}],
        },
        {"name": "half days", "members": order(), "rotation": rotation("custom", 12 * 3_600)},
        {
            "name": "weekends",
            "members": order(),
            "rotation": rotation("weekly"),
            "restrictions": [{"days": ["sat", "sun"], "start": "00:00", "end": "24:00"}],
        },
        {
            "name": "nights",
            "members": order(),
            "rotation": rotation("custom", 8 * 3_600),
            "restrictions": [
                {"days": _WEEKDAYS, "start": "22:00", "end": "24:00"},
                {"days": _WEEKDAYS, "start": "00:00", "end": "06:00"},
            ],
        },
    ]


def override_specs(
    rng: random.Random, members: list[str], start: int, count: int
) -> list[tuple[str, int, int]]:
    """``count`` overrides as ``(member, start, end)`` (epoch seconds): a random one of
    ``members`` for 1 to 48 whole hours from a random second of the :data:`SPAN_SECONDS`
    after ``start``."""
    found = []
    for _ in range(count):
        begins = start + rng.randrange(SPAN_SECONDS)
        found.append((rng.choice(members), begins, begins + rng.randint(1, 48) * 3_600))
    return found


@dataclass(frozen=True, slots=True)
class OnCallBenchOptions:
    """The command's options (module docstring): requests per case, warm-up requests per
    case, the schedule's size, the random seed, and whether the data directory stays."""

    requests: int = 2_000
    week_requests: int = 300
    quarter_requests: int = 50
    warmup_requests: int = 200
    members: int = 50
    overrides: int = 100
    seed: int = 1
    keep_data: bool = False


@dataclass(slots=True)
class _Case:
    """One case: its requests (``request()`` draws the next path and query), and what the
    timed ones gave: latencies (ms), seconds spent, service CPU seconds, and ``answers``
    (``(items, bytes)`` per answer: members on call or shifts listed)."""

    count: int
    request: Callable[[], tuple[str, dict[str, int]]]
    items: str | None
    latencies_ms: list[float] = field(default_factory=list)
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    answers: list[tuple[int, int]] = field(default_factory=list)


async def _post(client: httpx.AsyncClient, path: str, body: dict[str, Any]) -> dict[str, Any]:
    response = await client.post(path, json=body)
    if response.status_code != 201:  # the bench's service lifts the rate limits
        raise RuntimeError(f"POST {path}: {response.status_code} {response.text[:500]}")
    return response.json()  # type: ignore[no-any-return]


async def _make_schedule(
    client: httpx.AsyncClient, options: OnCallBenchOptions, rng: random.Random, start: int
) -> str:
    """The members, the schedule and its overrides (module docstring); the schedule's id.

    Raises:
        RuntimeError: the API refused one of them.
    """
    members = [
        (
            await _post(
                client,
                "/members",
                {
                    "name": f"Member {k + 1}",
                    "email": f"member{k + 1}@example.com",
                    "time_zone": TIME_ZONE,
                },
            )
        )["id"]
        for k in range(options.members)
    ]
    body = {"name": "bench", "time_zone": TIME_ZONE, "layers": layer_specs(rng, members)}
    schedule = str((await _post(client, "/schedules", body))["id"])
    for member, begins, ends in override_specs(rng, members, start, options.overrides):
        override = {"member": member, "start": begins, "end": ends}
        await _post(client, f"/schedules/{schedule}/overrides", override)
    return schedule


def _cases(
    options: OnCallBenchOptions, rng: random.Random, schedule: str, start: int
) -> dict[str, _Case]:
    base = f"/schedules/{schedule}"

    def on_call() -> tuple[str, dict[str, int]]:
        return f"{base}/on-call", {"at": start + rng.randrange(SPAN_SECONDS)}

    def week() -> tuple[str, dict[str, int]]:
        begins = start + rng.randrange(SPAN_SECONDS - _WEEK)
        return f"{base}/shifts", {"start": begins, "end": begins + _WEEK}

    def quarter() -> tuple[str, dict[str, int]]:
        begins = start + rng.randrange(DAY)
        return f"{base}/shifts", {"start": begins, "end": begins + SPAN_SECONDS}

    return {
        "healthz": _Case(options.requests, lambda: ("/healthz", {}), None),
        "schedule": _Case(options.requests, lambda: (base, {}), None),
        "on_call": _Case(options.requests, on_call, "members"),
        "shifts_7d": _Case(options.week_requests, week, "data"),
        "shifts_90d": _Case(options.quarter_requests, quarter, "data"),
    }


async def _get(client: httpx.AsyncClient, case: _Case) -> tuple[float, httpx.Response]:
    """One request of ``case``: its latency (ms) and answer.

    Raises:
        RuntimeError: the answer was not a 200.
    """
    path, query = case.request()
    began = time.perf_counter()
    response = await client.get(path, params=query)
    took = (time.perf_counter() - began) * 1000
    if response.status_code != 200:
        raise RuntimeError(f"GET {path} {query}: {response.status_code} {response.text[:500]}")
    return took, response


async def _time_cases(
    client: httpx.AsyncClient, cases: dict[str, _Case], warmup: int, pid: int
) -> None:
    """Warm each case up, then make its requests in :data:`ROUNDS` rounds, in turns."""
    for case in cases.values():
        for _ in range(min(warmup, case.count)):
            await _get(client, case)
    process = psutil.Process(pid)
    for k in range(ROUNDS):
        for case in cases.values():
            share = case.count * (k + 1) // ROUNDS - case.count * k // ROUNDS
            cpu = process.cpu_times()
            began = time.perf_counter()
            for _ in range(share):
                took, response = await _get(client, case)
                case.latencies_ms.append(took)
                items = len(response.json()[case.items]) if case.items else 0
                case.answers.append((items, len(response.content)))
            case.seconds += time.perf_counter() - began
            after = process.cpu_times()
            case.cpu_seconds += after.user + after.system - cpu.user - cpu.system


def _rank(ordered: list[float], q: float) -> float:
    """The nearest-rank ``q`` quantile of the sorted ``ordered``."""
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def _figures(case: _Case) -> dict[str, Any]:
    ordered = sorted(case.latencies_ms)
    if not ordered:
        return {"count": 0}
    items = [n for n, _ in case.answers]
    return {
        "count": len(ordered),
        "p50_ms": round(_rank(ordered, 0.5), 3),
        "p90_ms": round(_rank(ordered, 0.9), 3),
        "p99_ms": round(_rank(ordered, 0.99), 3),
        "max_ms": round(ordered[-1], 3),
        "mean_ms": round(statistics.fmean(ordered), 3),
        "requests_per_second": round(len(ordered) / max(case.seconds, 1e-9), 1),
        "service_cpu_ms_per_request": round(1000 * case.cpu_seconds / len(ordered), 3),
        "mean_bytes": round(statistics.fmean(b for _, b in case.answers)),
        "mean_items": round(statistics.fmean(items), 2) if case.items else None,
        "empty_answers": sum(1 for n in items if n == 0) if case.items else None,
    }


async def run_oncall_bench(options: OnCallBenchOptions, output: Path) -> dict[str, Any]:
    """The whole benchmark (module docstring); returns the report, also written to
    ``output/oncall.json``.

    Raises:
        RuntimeError: the service did not start, or refused or failed a request.
    """
    await trio.Path(output).mkdir(parents=True, exist_ok=True)
    data_dir = Path(tempfile.mkdtemp(prefix="uptrio-oncall-"))
    rng = random.Random(options.seed)
    start = int(time.time()) // 3600 * 3600
    try:
        (token,) = await mint_tokens(data_dir, None, "bench", 1)  # migrates, too
        command = serve_command(data_dir, "--no-engine", log_level="warning")
        async with run_service_process(command, output / "service.log") as service:
            headers = {"Authorization": f"Bearer {token}"}
            one = httpx.Limits(max_connections=1, max_keepalive_connections=1)
            async with httpx.AsyncClient(
                base_url=service.base_url, headers=headers, timeout=30, limits=one
            ) as client:
                began = time.perf_counter()
                schedule = await _make_schedule(client, options, rng, start)
                setup_seconds = time.perf_counter() - began
                cases = _cases(options, rng, schedule, start)
                await _time_cases(client, cases, options.warmup_requests, service.pid)
            service.terminate()
            await service.wait_stopped()
    finally:
        if not options.keep_data:
            shutil.rmtree(data_dir, ignore_errors=True)
    figures = {name: _figures(case) for name, case in cases.items()}
    p99 = figures["on_call"].get("p99_ms")
    report = {
        "options": asdict(options),
        "schedule": {
            "layers": 5,
            "members": options.members,
            "overrides": options.overrides,
            "time_zone": TIME_ZONE,
            "span_start": start,
            "span_days": SPAN_SECONDS // DAY,
            "setup_seconds": round(setup_seconds, 2),
        },
        "rounds": ROUNDS,
        "figures": figures,
        "goal": {
            "on_call_p99_ms_at_most": GOAL_P99_MS,
            "met": p99 is not None and p99 <= GOAL_P99_MS,
        },
        "data_dir": str(data_dir) if options.keep_data else None,
    }
    await trio.Path(output / "oncall.json").write_text(json.dumps(report, indent=2))
    return report


_LABELS = {
    "healthz": "GET /healthz",
    "schedule": "GET schedule",
    "on_call": "on-call ?at=",
    "shifts_7d": "shifts, 7 days",
    "shifts_90d": "shifts, 90 days",
}


def print_oncall(report: dict[str, Any]) -> None:
    """The report as a plain-text table on stdout."""
    schedule = report["schedule"]
    print(
        f"on call: {schedule['layers']} layers, {schedule['members']} members, "
        f"{schedule['overrides']} overrides over {schedule['span_days']} days, "
        f"{schedule['time_zone']} (made through the API in {schedule['setup_seconds']} s); "
        f"one kept-alive connection, one request at a time, {report['rounds']} rounds in turns"
    )
    print(
        "  case            | requests |  p50 ms |  p90 ms |  p99 ms |  max ms | requests/s"
        " | CPU ms/req | items"
    )
    for name, row in report["figures"].items():
        if not row["count"]:
            continue
        items = "" if row["mean_items"] is None else f"{row['mean_items']:g}"
        print(
            f"  {_LABELS[name]:<15} | {row['count']:>8,} | {row['p50_ms']:>7.2f} | "
            f"{row['p90_ms']:>7.2f} | {row['p99_ms']:>7.2f} | {row['max_ms']:>7.2f} | "
            f"{row['requests_per_second']:>10,.0f} | {row['service_cpu_ms_per_request']:>10.2f}"
            f" | {items}"
        )
    on_call = report["figures"]["on_call"]
    goal = report["goal"]
    added = on_call["p50_ms"] - report["figures"]["healthz"]["p50_ms"]
    print(
        f"  nobody on call in {on_call['empty_answers']} of {on_call['count']} answers; "
        f"on-call over /healthz: +{added:.2f} ms at p50"
    )
    print(
        f"goal: on-call p99 <= {goal['on_call_p99_ms_at_most']:g} ms: "
        f"{on_call.get('p99_ms')} ms ({'met' if goal['met'] else 'MISSED'})"
    )
