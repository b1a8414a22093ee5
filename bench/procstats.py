"""CPU time and memory of the processes under test, read from /proc through psutil.

A `ProcessGroup` is a root process and its descendants: the service alone, or the
Postgres postmaster with its backends and workers. Its CPU time counts the live
processes (user + system, all threads) plus the children they already reaped
(``children_user`` / ``children_system`` of the root), so a backend that exits during
the window is not lost. Differences of two `CpuSnapshot` give CPU seconds spent in
between (resolution: the kernel's clock tick, 10 ms).

Memory: RSS of each process, and PSS (proportional set size: shared pages divided among
the processes sharing them) summed over the group, which does not count Postgres's
shared buffers once per backend as an RSS sum would.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import psutil

__all__ = ["CpuSnapshot", "MemorySample", "ProcessGroup"]


@dataclass(frozen=True, slots=True)
class CpuSnapshot:
    """CPU seconds (user + system) a group had used by ``at`` (epoch seconds)."""

    at: float
    seconds: float


@dataclass(frozen=True, slots=True)
class MemorySample:
    """Memory of a group at one moment: bytes of RSS summed over its processes, bytes
    of PSS summed (0 when unreadable), and how many processes."""

    rss_bytes: int
    pss_bytes: int
    processes: int


class ProcessGroup:
    """A root process and its descendants (see the module docstring).

    Args:
        name: for reports (``"service"``, ``"postgres"``).
        pid: the root's pid.
        include_children: count the descendants too (False: the root alone).
    """

    def __init__(self, name: str, pid: int, *, include_children: bool = True) -> None:
        self.name = name
        self.pid = pid
        self.include_children = include_children
        self._root = psutil.Process(pid)

    def _members(self) -> list[psutil.Process]:
        members = [self._root]
        if self.include_children:
            with contextlib.suppress(psutil.Error):
                members += self._root.children(recursive=True)
        return members

    def cpu(self, at: float) -> CpuSnapshot:
        """CPU seconds used so far by the group (module docstring), stamped ``at``."""
        total = 0.0
        for number, process in enumerate(self._members()):
            try:
                times = process.cpu_times()
            except psutil.Error:
                continue
            total += times.user + times.system
            if number == 0 and self.include_children:
                total += times.children_user + times.children_system
        return CpuSnapshot(at=at, seconds=total)

    def memory(self, *, pss: bool = True) -> MemorySample:
        """RSS and (when ``pss``) PSS of the group now."""
        rss = pss_total = count = 0
        for process in self._members():
            try:
                if pss:
                    full = process.memory_full_info()
                    rss += full.rss
                    pss_total += getattr(full, "pss", 0)
                else:
                    rss += process.memory_info().rss
            except psutil.Error:
                continue
            count += 1
        return MemorySample(rss_bytes=rss, pss_bytes=pss_total, processes=count)

    def peak_rss_bytes(self) -> int | None:
        """The root's peak RSS since it started (``VmHWM``), None if unreadable."""
        try:
            with open(f"/proc/{self.pid}/status") as status:
                for line in status:
                    if line.startswith("VmHWM:"):
                        return int(line.split()[1]) * 1024
        except OSError:
            return None
        return None

    def alive(self) -> bool:
        """Whether the root still runs."""
        return self._root.is_running()
