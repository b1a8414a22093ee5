"""The live progress display of a bench run (rich, on stderr).

`Display` holds what the run reports as it goes (phase, counts, the figures of the last
second); `Display.run` redraws it every 0.5 s until `Display.close`. rich's own refresh
thread is not used (``auto_refresh=False``): the trio task redraws. Without a terminal,
or with ``enabled=False``, it prints one line per phase instead.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import trio
from rich.console import Console, Group
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table

__all__ = ["Display"]

Probe = Callable[[], Awaitable[dict[str, str]]]
"""Returns the live figures to show (label -> text); called once per second."""


@dataclass(slots=True)
class Display:
    """What the run shows; fields are set by the run, read by the redraw task.

    Attributes:
        title: the run's one-line description.
        phase: what happens now (``"creating monitors"``, ``"warm-up"``, ...).
        done, total: progress in the phase (``total`` 0: no bar).
        phase_ends_at: wall time the phase ends (for a countdown), or None.
        live: figure name -> text, refreshed once per second by ``probe``.
    """

    title: str
    enabled: bool = True
    phase: str = "starting"
    done: float = 0.0
    total: float = 0.0
    phase_ends_at: float | None = None
    live: dict[str, str] = field(default_factory=dict)
    probe: Probe | None = None
    console: Console = field(default_factory=lambda: Console(stderr=True))
    _closed: trio.Event = field(default_factory=trio.Event)
    _last_phase: str = ""

    def set_phase(self, phase: str, *, total: float = 0.0, ends_at: float | None = None) -> None:
        """Enter a new phase (progress reset)."""
        self.phase = phase
        self.done = 0.0
        self.total = total
        self.phase_ends_at = ends_at
        if not self._interactive():
            self.console.print(f"[bench] {phase}", highlight=False)

    def _interactive(self) -> bool:
        return self.enabled and self.console.is_terminal

    def close(self) -> None:
        """Stop redrawing (`run` returns)."""
        self._closed.set()

    def _render(self) -> Group:
        grid = Table.grid(padding=(0, 2))
        grid.add_column(style="bold")
        grid.add_column()
        line = self.phase
        if self.phase_ends_at is not None:
            line += f"  ({max(0.0, self.phase_ends_at - time.time()):.0f} s left)"
        if self.total:
            line += f"  {self.done:,.0f} / {self.total:,.0f}"
        grid.add_row("phase", line)
        for name, text in self.live.items():
            grid.add_row(name, text)
        parts: list[Table | ProgressBar] = [grid]
        if self.total:
            parts.append(ProgressBar(total=self.total, completed=self.done, width=60))
        header = Table.grid()
        header.add_row(f"[bold cyan]uptrio bench[/] {self.title}")
        return Group(header, *parts)

    async def run(self) -> None:
        """Redraw every 0.5 s (probing live figures every 1 s) until `close`."""
        if not self._interactive():
            await self._closed.wait()
            return
        with Live(
            self._render(), console=self.console, auto_refresh=False, transient=False
        ) as live:
            last_probe = 0.0
            while not self._closed.is_set():
                if self.probe is not None and time.monotonic() - last_probe >= 1.0:
                    last_probe = time.monotonic()
                    try:
                        self.live = await self.probe()
                    except Exception as exc:  # a display must never end a run
                        self.live = {"error": repr(exc)}
                live.update(self._render(), refresh=True)
                with trio.move_on_after(0.5):
                    await self._closed.wait()
            live.update(self._render(), refresh=True)
