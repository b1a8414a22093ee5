"""Micro-benchmark: what an idle monitor actor (or heartbeat actor) holds, in bytes.

White-box (allowed by the import contracts in ``pyproject.toml``): it runs the engine's
own ``engine.run_engine`` in this process, with its real kinds, shards, supervisors and
actors, on a stand-in database that answers the two loads (``load_active_monitors``,
``load_heartbeats``) with records built in memory as asyncpg builds them (every string
and dict its own object, as a row decoded afresh). The trio clock is a ``MockClock``
that never moves, so no probe comes due and no heartbeat's deadline passes: what is
measured is the actors at rest, which is what a node holds between checks.

Usage::

    .venv/bin/python -m bench.memory_micro [--monitors 10000] [--type http|heartbeat] [--top 15]

``http`` monitors: ``GET https://host-N.example.com/health``, every 60 s, no headers nor
assertions (the API's defaults). ``heartbeat``: up, last success now, period 60 s, grace
5 s (an actor with a deadline, the steady state).

It prints the bytes per monitor that tracemalloc counts between "engine with nothing"
and "engine with N actors running" (the records included: the engine keeps them), then
the top allocations three ways:

- **by type**: objects new since the baseline (``gc.get_objects`` and what they refer
  to, by ``id``), ``sys.getsizeof`` summed by type name, per monitor;
- **by line**: tracemalloc's statistics by the allocating line (often trio's);
- **by our line**: the same, each allocation charged to the innermost frame in
  ``engine/`` or ``store/`` on its stack (what of ours caused it).

Figures are per monitor (total / N); lines below 16 bytes per monitor are left out.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time
import tracemalloc
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, cast

import trio
import trio.testing

from engine import EngineSettings, Prober, run_engine
from store import Database, HeartbeatRecord, MonitorRecord, StoreWriter, leases

_HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_OURS = tuple(os.path.join(_HERE, package) + os.sep for package in ("engine", "store"))


def _text(value: str) -> str:
    """A fresh copy of ``value`` (asyncpg decodes each row's strings anew)."""
    return "".join(list(value))


def _monitor(i: int, now: int) -> MonitorRecord:
    return MonitorRecord(
        id=f"mon_{i:024d}",
        account_id=_text("acct_0000000000000000000001"),
        name=f"api {i}",
        url=f"https://host-{i}.example.com/health",
        type=_text("http"),
        status=_text("up"),
        interval_seconds=60,
        timeout_seconds=30,
        method=_text("GET"),
        expected_status_code=200,
        failure_threshold=1,
        success_threshold=1,
        run_epoch=1,
        created=now,
        updated=now,
        metadata={},
        last_checked_at=now,
        incident_severity=_text("major"),
        settings_digest=hash(f"digest-{i}"),
    )


def _heartbeat(i: int, now: int) -> HeartbeatRecord:
    return HeartbeatRecord(
        id=f"hbt_{i:024d}",
        account_id=_text("acct_0000000000000000000001"),
        name=f"job {i}",
        period_seconds=60,
        grace_seconds=5,
        status=_text("up"),
        ping_key=f"{i:032x}",
        last_ping_at=now,
        last_success_at=now,
        auto_incidents=True,
        incident_severity=_text("major"),
        run_epoch=1,
        created=now,
        updated=now,
        metadata={},
    )


class _Rows:
    """The stand-in database: ``run(query, buckets, ...)`` answers the two loads with the
    records of those buckets, built afresh per call; anything else fails loudly."""

    def __init__(self, kind: str, count: int) -> None:
        self.kind, self.count, self.now = kind, count, int(time.time())

    async def run(
        self,
        query: Callable[..., Any],
        buckets: Sequence[int] | None = None,
        *_args: object,
        **_kwargs: object,
    ) -> list[Any]:
        await trio.lowlevel.checkpoint()
        wanted = None if buckets is None else set(buckets)
        if query.__name__ == "load_active_monitors":
            make: Callable[[int, int], Any] | None = _monitor if self.kind == "http" else None
        elif query.__name__ == "load_heartbeats":
            make = _heartbeat if self.kind == "heartbeat" else None
        else:
            raise RuntimeError(f"the memory benchmark has no answer for {query.__name__}")
        if make is None:
            return []
        prefix = "mon" if self.kind == "http" else "hbt"
        return [
            make(i, self.now)
            for i in range(self.count)
            if wanted is None or leases.bucket_of(f"{prefix}_{i:024d}") in wanted
        ]


class _NoWriter:
    """A store writer that must never be used (nothing is due while the clock stands)."""

    def __getattr__(self, name: str) -> Any:
        raise RuntimeError(f"the store writer was used ({name}): a probe came due")


def _objects(skip: object = None) -> dict[int, object]:
    """Every object the collector tracks, and the untracked ones they hold (strings,
    numbers, tuples of them), by id; ``skip`` and what it holds left out (the
    benchmark's own set of ids)."""
    seen: dict[int, object] = {}
    for obj in gc.get_objects():
        if obj is skip:
            continue
        seen[id(obj)] = obj
        for ref in gc.get_referents(obj):
            if not gc.is_tracked(ref):
                seen[id(ref)] = ref
    return seen


def _ours(trace: tracemalloc.Traceback) -> str:
    for frame in reversed(trace):  # innermost first (tracebacks run oldest first)
        if frame.filename.startswith(_OURS):
            return f"{os.path.relpath(frame.filename, _HERE)}:{frame.lineno}"
    return "(outside engine/ and store/)"


async def _measure(kind: str, count: int, top: int) -> None:
    settings = EngineSettings(gc_freeze_every_seconds=None)
    writer = cast(StoreWriter, _NoWriter())
    prober = Prober()
    async with trio.open_nursery() as nursery:
        # a first engine with nothing, so that what every engine makes once is warm
        empty = await nursery.start(
            run_engine, cast(Database, _Rows(kind, 0)), writer, prober, settings
        )
        empty.stop()
        await trio.testing.wait_all_tasks_blocked()
        gc.collect()
        before_ids = set(_objects())
        # traced from here: what is alive at the snapshot was made by this engine
        tracemalloc.start(25)
        engine = await nursery.start(
            run_engine, cast(Database, _Rows(kind, count)), writer, prober, settings
        )
        await trio.testing.wait_all_tasks_blocked()
        gc.collect()
        snapshot = tracemalloc.take_snapshot()
        tracemalloc.stop()
        snapshot = snapshot.filter_traces([tracemalloc.Filter(False, tracemalloc.__file__)])
        total = 0
        by_line: Counter[str] = Counter()
        by_ours: Counter[str] = Counter()
        for stat in snapshot.statistics("traceback"):
            total += stat.size
            frame = stat.traceback[-1]  # the allocating frame (tracebacks run oldest first)
            by_line[f"{_short(frame.filename)}:{frame.lineno}"] += stat.size
            by_ours[_ours(stat.traceback)] += stat.size
        del snapshot, stat  # its traces are objects too: not counted by type below
        gc.collect()
        by_type: Counter[str] = Counter()
        numbers: Counter[str] = Counter()
        for key, obj in _objects(before_ids).items():
            if key not in before_ids:
                name = type(obj).__qualname__
                by_type[name] += sys.getsizeof(obj)
                numbers[name] += 1
        print(f"{kind}: {count} actors running; tracemalloc: {total / count:,.0f} bytes each")
        _table("by type (sys.getsizeof of new objects)", by_type, numbers, count, top)
        _table("by line (tracemalloc)", by_line, None, count, top)
        _table("by our line (innermost engine/ or store/ frame)", by_ours, None, count, top)
        engine.stop()
        nursery.cancel_scope.cancel()


def _short(filename: str) -> str:
    for marker in ("site-packages" + os.sep, _HERE + os.sep):
        if marker in filename:
            return filename.split(marker, 1)[1]
    return os.path.basename(filename)


def _table(
    title: str, sizes: Counter[str], numbers: Counter[str] | None, count: int, top: int
) -> None:
    print(f"\n{title}, bytes per actor:")
    for name, size in sizes.most_common(top):
        if size / count < 16:
            break
        extra = "" if numbers is None else f"  ({numbers[name] / count:.2f} per actor)"
        print(f"  {size / count:8,.0f}  {name}{extra}")


def main(argv: Sequence[str] | None = None) -> None:
    """Parse the command line and measure."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--monitors", type=int, default=10_000, help="actors to start")
    parser.add_argument("--type", choices=("http", "heartbeat"), default="http")
    parser.add_argument("--top", type=int, default=15, help="rows per table")
    args = parser.parse_args(argv)
    trio.run(_measure, args.type, args.monitors, args.top, clock=trio.testing.MockClock())


if __name__ == "__main__":
    main()
