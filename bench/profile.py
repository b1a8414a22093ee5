"""Profiling a bench phase with py-spy (``uptrio bench --profile``).

`record_profile` attaches ``py-spy record`` to a running process (the service, or the
baseline) for the measured window, sampling 100 times a second in ``--nonblocking``
mode (the process is never paused, so its timing is barely disturbed; its CPU figures
are still best taken from a run without ``--profile``), and writes the collapsed stacks
(``raw`` format: one ``frame;frame;... count`` line per stack). `summarize` turns them
into the share of samples spent in each function, inclusive of what it calls, and in
each leaf, and splits the samples between the parts of a check's path (`split`,
`PARTS`): where the time goes.

py-spy needs permission to read the process's memory (root, or ``CAP_SYS_PTRACE``);
without py-spy or the permission, the profile is missing and the run goes on.
"""

from __future__ import annotations

import shutil
import subprocess
from collections import Counter
from pathlib import Path

import trio

__all__ = ["PARTS", "ProfileSummary", "part_of", "record_profile", "split", "summarize"]

ProfileSummary = dict[str, object]
"""``{"samples": N, "inclusive": [[percent, function], ...], "leaf": [...],
"split": [[percent, part], ...]}``"""

PARTS: tuple[tuple[str, tuple[str, ...], frozenset[str] | None], ...] = (
    ("collector", ("/engine/heap.py", "<gc>"), None),
    ("metrics and logging", ("/prometheus_client/", "/structlog/", "/logging/"), None),
    ("probe: connect", ("/engine/probes/",), frozenset({"connect", "connect_tcp", "_connect"})),
    ("probe: close", ("/engine/probes/",), frozenset({"close", "aclose", "_real_close"})),
    ("probe: send, receive, parse", ("/engine/probes/",), None),
    (
        "store actor and database bridge",
        ("/store/", "/trio_asyncio/", "/asyncpg/", "/asyncio/"),
        None,
    ),
    ("state machine and check record", ("/engine/monitor.py",), frozenset({"record", "item"})),
    (
        "web (API reads, /metrics)",
        ("/web/http/", "/web/routes/", "/web/api/", "/web/public/", "/quart/", "/hypercorn/"),
        None,
    ),
    (
        "actor and its timer",
        ("/engine/monitor.py", "/engine/actor.py", "/engine/schedule.py", "/engine/shard.py"),
        None,
    ),
    ("engine, other", ("/engine/",), None),
    ("trio scheduler and I/O wait", ("/trio/",), None),
)
"""The parts of a check's path a sample is counted in, tried in this order: ``(part,
path fragments, function names or None for any)``. A sample counts in the first part
any of its frames matches; a part with function names needs a frame of those names
(the last part of a qualified name: ``socket._real_close``) at or below (nearer the leaf
than) the first frame of the path. So a probe's ``connect`` counts
as "probe: connect" (py-spy without ``--native`` shows the kernel's share in the
Python function that made the system call), logging from the store as "metrics and
logging", and what matches nothing as "other". (The process's own start, ``web/process/``
and ``trio.run``, is below every stack: no part names it.)"""


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


def part_of(frames: list[str]) -> str:
    """The part of `PARTS` one sample's stack (py-spy frames ``name (path:line)``, root
    first) counts in; ``"other"`` when none matches."""
    # py-spy writes a path relative to its ``sys.path`` entry (``trio/_run.py``) or
    # absolute: "/" before it lets a fragment match either way.
    split_frames = [frame.partition(" (") for frame in frames]
    names_of = [name.rsplit(".", 1)[-1] for name, _, _ in split_frames]
    places = ["/" + place for _, _, place in split_frames]
    for part, fragments, names in PARTS:
        for depth, place in enumerate(places):
            if not any(fragment in place for fragment in fragments):
                continue
            if names is None or not names.isdisjoint(names_of[depth:]):
                return part
            break
    return "other"


def split(path: Path) -> list[list[float | str]]:
    """``[[percent, part], ...]`` of the samples in ``path`` (collapsed stacks), every
    part of `PARTS` and ``other``, largest first; empty for a profile without samples."""
    counts: Counter[str] = Counter()
    for line in path.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if stack and count_text.isdigit():
            counts[part_of(stack.split(";"))] += int(count_text)
    total = sum(counts.values())
    if total == 0:
        return []
    return [[round(100 * n / total, 1), part] for part, n in counts.most_common()]


def summarize(path: Path, top: int = 40) -> ProfileSummary:
    """The ``top`` functions by inclusive and by leaf share of samples (percent), and
    the samples' `split` between the parts of a check's path."""
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
        return {"samples": 0, "inclusive": [], "leaf": [], "split": []}
    return {
        "samples": total,
        "split": split(path),
        "inclusive": [[round(100 * n / total, 1), f] for f, n in inclusive.most_common(top)],
        "leaf": [[round(100 * n / total, 1), f] for f, n in leaf.most_common(top)],
    }
