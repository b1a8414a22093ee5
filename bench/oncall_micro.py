"""Micro-benchmark: what answering "who is on call" costs, without the database
(docs/on-call.md, "How a schedule decides"; the goal is 5 ms p99 for a 5-layer schedule with
50 members and 100 overrides).

White-box (allowed by the import contracts in ``pyproject.toml``): it imports
``store.rotation`` and calls it in this process.

Usage::

    .venv/bin/python -m bench.oncall_micro [--calls 10000] [--shift-calls 1000] [--seed 1]

The schedule of ``uptrio bench oncall`` (which times the same through the API), in
Europe/Berlin (so daylight saving is in play): five layers of the same 50 members, each in
its own order and rotation (weekly; daily with weekday business hours; custom 12 h; weekly
on weekends; custom 8 h on weekday nights), and 100 overrides of 1 to 48 hours spread over
the 90 days from 2026-03-01 UTC, which spans the spring change.

- ``on_call``: ``--calls`` random instants of those 90 days, one call each;
- ``shifts``: ``--shift-calls`` random 7-day ranges inside them, one call each.

Each call is timed alone (``time.perf_counter_ns``, wall clock); printed: the calls'
p50, p99 and max in microseconds, and the shifts' mean count.
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from store.rotation import Override, Plan, on_call, parse_plan, shifts

from .oncall import SPAN_SECONDS, layer_specs, override_specs

_START = int(datetime(2026, 3, 1, tzinfo=UTC).timestamp())
_WEEK = 7 * 86_400


def schedule(rng: random.Random) -> tuple[Plan, list[Override]]:
    """The benchmark's schedule and overrides (module docstring): the layers and overrides
    of ``uptrio bench oncall`` (`bench.oncall.layer_specs`, `bench.oncall.override_specs`)."""
    members = [f"mbr_{i:02}" for i in range(50)]
    layers = layer_specs(rng, members)
    overrides = [
        Override(f"ovr_{i:03}", member, start, end)
        for i, (member, start, end) in enumerate(override_specs(rng, members, _START, 100))
    ]
    return parse_plan("Europe/Berlin", layers), overrides


def _timed(call: Callable[[], object], count: int) -> tuple[list[float], list[object]]:
    """Each call's wall time in microseconds, and its results."""
    times, results = [], []
    for _ in range(count):
        before = time.perf_counter_ns()
        results.append(call())
        times.append((time.perf_counter_ns() - before) / 1_000)
    return times, results


def _line(name: str, times: list[float], extra: str = "") -> str:
    ordered = sorted(times)
    p50 = ordered[len(ordered) // 2]
    p99 = ordered[min(len(ordered) - 1, len(ordered) * 99 // 100)]
    return (
        f"{name:>8}: p50 {p50:,.1f} us, p99 {p99:,.1f} us, max {ordered[-1]:,.1f} us "
        f"({len(times):,} calls{extra})"
    )


def main(argv: Sequence[str] | None = None) -> None:
    """Time the calls and print one line for ``on_call`` and one for ``shifts``."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=10_000)
    parser.add_argument("--shift-calls", type=int, default=1_000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    plan, overrides = schedule(rng)
    instants = iter([_START + rng.randrange(SPAN_SECONDS) for _ in range(args.calls)])
    times, _ = _timed(lambda: on_call(plan, overrides, next(instants)), args.calls)
    print(_line("on_call", times))
    starts = iter([_START + rng.randrange(SPAN_SECONDS - _WEEK) for _ in range(args.shift_calls)])

    def week() -> list[object]:
        start = next(starts)
        return list(shifts(plan, overrides, start, start + _WEEK))

    times, listed = _timed(week, args.shift_calls)
    mean = sum(len(r) for r in listed if isinstance(r, list)) / max(1, len(listed))
    print(_line("shifts", times, f", 7 days each, {mean:,.0f} shifts on average"))


if __name__ == "__main__":
    main()
