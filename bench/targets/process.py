"""Stopping a child process: the last rung of every clean-up ladder in the bench."""

from __future__ import annotations

import trio

__all__ = ["stop_process"]


async def stop_process(process: trio.Process, *, grace_seconds: float) -> None:
    """Wait up to ``grace_seconds`` for ``process`` to exit, then kill it and reap it.
    Shielded from cancellation (clean-up must finish)."""
    with trio.CancelScope(shield=True):
        with trio.move_on_after(grace_seconds):
            await process.wait()
        if process.returncode is None:
            process.kill()
            await process.wait()
