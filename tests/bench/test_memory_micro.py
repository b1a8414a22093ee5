"""The memory micro-benchmark (bench/memory_micro.py) runs the real engine on its
stand-in database and reports per-actor figures for both kinds; no process, no socket,
no database (the clock stands still, so no probe is due and the store is never used)."""

from __future__ import annotations

import re

import pytest

from bench.memory_micro import main


@pytest.mark.parametrize("kind", ["http", "heartbeat"])
def test_it_starts_the_actors_and_reports_bytes_by_type_and_line(
    kind: str, capsys: pytest.CaptureFixture[str]
) -> None:
    main(["--monitors", "50", "--type", kind, "--top", "60"])
    out = capsys.readouterr().out
    found = re.search(rf"^{kind}: 50 actors running; tracemalloc: ([\d,]+) bytes each", out, re.M)
    assert found, out
    assert 1_000 < int(found.group(1).replace(",", "")) < 50_000
    assert "by type" in out and "by line" in out and "engine/" in out
    state = "_Monitor" if kind == "http" else "HeartbeatState"
    assert re.search(rf"^\s+\d+\s+{state}\s+\(1\.00 per actor\)", out, re.M), out
