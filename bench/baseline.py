"""The baseline: the same probes on the same schedule from a bare trio loop.

White-box (allowed by the import contracts in ``pyproject.toml``): it imports
``engine`` to run the service's own probes and schedule without the service around them.

``python -m bench.baseline --plan PLAN.json --out RESULTS.json`` runs, in one process and
one ``trio.run``, one task per monitor that sleeps until its next grid point (the
engine's `engine.schedule` arithmetic, the same monitor ids, so the same phases), takes a
slot of one shared ``trio.CapacityLimiter`` and calls the same
`engine.probes.Prober.probe` the service calls, on a `engine.probes.Prober` built as
``uptrio serve`` builds it (its default target policy included). No actors, no inboxes,
no store, no API, no logging: what is left is the bare cost of probing on this machine,
the denominator of the report's ratios. It runs with the garbage collector tuned as
the engine tunes it (`engine.EngineSettings.gc_young_threshold`), so both sides pay the
same interpreter. A probe that overruns skips the grid points it missed, as the engine
does. Every task stops by itself at ``stop_at``.

PLAN.json: ``{"interval_seconds", "timeout_seconds", "max_in_flight", "dns": [ip, port],
"stop_at": epoch seconds, "monitors": [[index, monitor id, type, url], ...]}``.
RESULTS.json: ``{"index": [...], "deadline": [...], "started": [...],
"response_ms": [...], "ok": [...]}``, one entry per probe (deadline and start in epoch
seconds).

It prints ``idle`` before it starts the tasks (the parent samples its memory then; it
waits 0.5 s) and ``ready`` once every task runs.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from array import array
from pathlib import Path
from typing import Any

import trio

from engine import EngineSettings, TargetPolicy
from engine.probes import Prober, ProbeSpec
from engine.schedule import grid_phase, next_deadline

__all__ = ["main", "run_baseline"]


class _Records:
    """Per-probe records, columns as arrays."""

    def __init__(self) -> None:
        self.index = array("i")
        self.deadline = array("d")
        self.started = array("d")
        self.response_ms = array("d")
        self.ok = array("b")

    def as_json(self) -> dict[str, list[Any]]:
        return {
            "index": self.index.tolist(),
            "deadline": self.deadline.tolist(),
            "started": self.started.tolist(),
            "response_ms": self.response_ms.tolist(),
            "ok": self.ok.tolist(),
        }


async def run_baseline(plan: dict[str, Any], records: _Records) -> None:
    """Probe every monitor of ``plan`` on its grid until ``plan["stop_at"]``."""
    interval = float(plan["interval_seconds"])
    timeout = float(plan["timeout_seconds"])
    dns = plan.get("dns")
    prober = Prober(  # as ``uptrio serve`` builds it, with its default target policy
        dns_nameserver=(str(dns[0]), int(dns[1])) if dns else None,
        address_policy=TargetPolicy(),
    )
    limiter = trio.CapacityLimiter(int(plan["max_in_flight"]))
    clock_offset = trio.current_time() - time.time()
    stop = float(plan["stop_at"]) + clock_offset

    async def monitor(index: int, monitor_id: str, spec: ProbeSpec) -> None:
        phase = grid_phase(monitor_id, interval, clock_offset)
        deadline = next_deadline(trio.current_time(), phase, interval)
        while deadline < stop:
            await trio.sleep_until(deadline)
            async with limiter:
                started = trio.current_time()
                result = await prober.probe(spec)
            records.index.append(index)
            records.deadline.append(deadline - clock_offset)
            records.started.append(started - clock_offset)
            records.response_ms.append(result.response_time_ms)
            records.ok.append(result.ok)
            deadline = next_deadline(max(trio.current_time(), deadline), phase, interval)

    print("idle", flush=True)  # the parent samples memory before the monitors exist
    await trio.sleep(0.5)
    async with trio.open_nursery() as nursery:
        for index, monitor_id, kind, url in plan["monitors"]:
            method, expected = ("GET", 200) if kind == "http" else (None, None)
            spec = ProbeSpec(
                type=kind,
                url=url,
                timeout_seconds=timeout,
                method=method,
                expected_status_code=expected,
            )
            nursery.start_soon(monitor, int(index), str(monitor_id), spec)
        print("ready", flush=True)


def main(argv: list[str] | None = None) -> None:
    """Entry point of ``python -m bench.baseline`` (module docstring)."""
    parser = argparse.ArgumentParser(prog="python -m bench.baseline")
    parser.add_argument("--plan", required=True, type=Path)
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args(argv)
    plan = json.loads(args.plan.read_text())
    threshold = EngineSettings().gc_young_threshold
    if threshold is not None:
        gc.set_threshold(threshold, *gc.get_threshold()[1:])
    records = _Records()
    trio.run(run_baseline, plan, records)
    args.out.write_text(json.dumps(records.as_json()))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
