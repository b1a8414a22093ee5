"""Profiling a bench phase with py-spy (``uptrio bench --profile``).

`record_profile` attaches ``py-spy record`` to a running process (the service, or the
baseline) for the measured window, sampling 100 times a second in ``--nonblocking``
mode (the process is never paused, so its timing is barely disturbed; its CPU figures
are still best taken from a run without ``--profile``), and writes the collapsed stacks
(``raw`` format: one ``frame;frame;... count`` line per stack). `summarize` turns them
into the share of samples spent in each function, inclusive of what it calls, and in
each leaf: where the time goes.

py-spy needs permission to read the process's memory (root, or ``CAP_SYS_PTRACE``);
without py-spy or the permission, the profile is missing and the run goes on.
"""

from __future__ import annotations

import shutil
import subprocess
from collections import Counter
from pathlib import Path

import trio

__all__ = ["ProfileSummary", "record_profile", "summarize"]

ProfileSummary = dict[str, object]
"""``{"samples": N, "inclusive": [[percent, function], ...], "leaf": [...]}``"""


def _py_spy() -> str | None:
    found = shutil.which("py-spy")
    if found:
        return found
    import sys

    candidate = Path(sys.executable).with_name("py-spy")
    return str(candidate) if candidate.exists() else None


async def record_profile(pid: int, seconds: float, output: Path) -> str | None:
    """Sample process ``pid`` for ``seconds`` into ``output`` (collapsed stacks).
    Returns None, or why there is no profile."""
    binary = _py_spy()
    if binary is None:
        return "py-spy is not installed (pip install py-spy)"
    done = await trio.run_process(
        [
            binary,
            "record",
            "--pid",
            str(pid),
            "--duration",
            str(max(1, round(seconds))),
            "--rate",
            "100",
            "--nonblocking",
            "--format",
            "raw",
            "--output",
            str(output),
        ],
        capture_stdout=True,
        capture_stderr=True,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    if done.returncode != 0 or not await trio.Path(output).exists():
        return f"py-spy failed: {bytes(done.stderr).decode(errors='replace')[-500:]}"
    return None


def _function(frame: str) -> str:
    """``name (path/file.py:line)`` as ``name (file.py)``: one entry per function."""
    name, _, where = frame.partition(" (")
    file = where.rsplit(":", 1)[0].rsplit("/", 1)[-1]
    return f"{name} ({file})" if file else name


def summarize(path: Path, top: int = 40) -> ProfileSummary:
    """The ``top`` functions by inclusive and by leaf share of samples (percent)."""
    inclusive: Counter[str] = Counter()
    leaf: Counter[str] = Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        total += count
        frames = [_function(f) for f in stack.split(";")]
        leaf[frames[-1]] += count
        for name in set(frames):
            inclusive[name] += count
    if total == 0:
        return {"samples": 0, "inclusive": [], "leaf": []}
    return {
        "samples": total,
        "inclusive": [[round(100 * n / total, 1), f] for f, n in inclusive.most_common(top)],
        "leaf": [[round(100 * n / total, 1), f] for f, n in leaf.most_common(top)],
    }
