"""`bench.profile.split`: py-spy's collapsed stacks counted in the parts of a check's path
(bench/RESULTS.md, "Where the time goes"), on stacks shaped as py-spy writes them for the
service (the process's start, then ``trio.run``, then one task's frames)."""

from __future__ import annotations

from pathlib import Path

from bench.profile import PARTS, part_of, split, summarize

_ROOT = (
    "<module> (bin/uptrio:8);main (web/process/cli/__init__.py:70);"
    "run_service (web/process/service.py:90);run (trio/_core/_run.py:2300);"
    "unrolled_run (trio/_core/_run.py:2700)"
)


def _stack(*frames: str) -> list[str]:
    return [*_ROOT.split(";"), *frames]


def test_each_frame_shape_counts_in_its_part() -> None:
    monitor = "run_monitor (engine/monitor.py:380)"
    probe = "probe (engine/probes/_http.py:150)"
    assert part_of(_stack(monitor, probe, "connect (trio/_socket.py:700)")) == ("probe: connect")
    assert part_of(_stack(monitor, probe, "socket._real_close (socket.py:500)")) == ("probe: close")
    assert part_of(_stack(monitor, probe, "next_event (h11/_connection.py:400)")) == (
        "probe: send, receive, parse"
    )
    assert part_of(_stack(monitor, "record (engine/monitor.py:280)")) == (
        "state machine and check record"
    )
    assert part_of(_stack(monitor, "sleep_until (trio/_timeouts.py:60)")) == ("actor and its timer")
    store = "run (store/actor.py:120)"
    assert part_of(_stack(store, "execute (asyncpg/connection.py:300)")) == (
        "store actor and database bridge"
    )
    logged = _stack(store, "info (structlog/_native.py:40)")
    assert part_of(logged) == "metrics and logging"  # before the store: its own part
    assert part_of(_stack("keep_heap_frozen (engine/heap.py:55)")) == "collector"
    assert part_of(_stack("handle (hypercorn/protocol/h11.py:90)")) == ("web (API reads, /metrics)")
    assert part_of(_stack("epoll_wait (trio/_core/_io_epoll.py:220)")) == (
        "trio scheduler and I/O wait"
    )
    assert part_of(["<module> (bin/uptrio:8)"]) == "other"


def test_the_split_adds_up_and_goes_into_the_summary(tmp_path: Path) -> None:
    raw = tmp_path / "profile.txt"
    lines = [
        (";".join(_stack("run_monitor (engine/monitor.py:380)")), 30),
        (";".join(_stack("p (engine/probes/_tcp.py:9)", "connect (socket.py:1)")), 60),
        (";".join(_stack("epoll_wait (trio/_core/_io_epoll.py:220)")), 10),
    ]
    raw.write_text("".join(f"{stack} {count}\n" for stack, count in lines) + "garbage\n")
    parts = split(raw)
    assert parts == [
        [60.0, "probe: connect"],
        [30.0, "actor and its timer"],
        [10.0, "trio scheduler and I/O wait"],
    ]
    summary = summarize(raw)
    assert summary["samples"] == 100 and summary["split"] == parts
    assert {name for name, _, _ in PARTS} >= {p for _, p in parts}
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    assert split(empty) == [] and summarize(empty)["split"] == []
