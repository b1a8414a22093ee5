"""The embedded Postgres and its data directory (docs/operations.md, The data directory):
the directory stays closed to other users after the server starts, and a server whose holder
was killed (SIGKILL) is adopted and stopped by the next clean stop.

pgserver counts the processes holding a server in ``pgdata/.handle_pids.json`` and stops
the server when the last one releases it; a holder killed with SIGKILL never removes
itself. The holders killed here are real processes (this Python, joining the server with
``store.start_embedded``), killed with SIGKILL. Each test works in a directory of its own
under the system's temporary directory (pytest's ``tmp_path`` is closed to the server's
own system user when the suite runs as root) and stops its server whatever happens.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator
from contextlib import suppress
from pathlib import Path

import pytest
import trio

from store import EmbeddedPostgres, start_embedded

ROOT = Path(__file__).resolve().parents[2]

_HOLDER = (
    "import sys, time; from pathlib import Path; from store import start_embedded; "
    "start_embedded(Path(sys.argv[1])); print('ready', flush=True); time.sleep(120)"
)

EXPECTED_MODE = 0o711 if os.geteuid() == 0 else 0o700
"""The data directory's mode once a server runs: 0700, and as root 0711 (Postgres then
runs as pgserver's own system user, which must pass through to ``pgdata``)."""


@pytest.fixture
async def data_dir() -> AsyncIterator[Path]:
    """A data directory's path (not created); its server is stopped at the end."""
    with tempfile.TemporaryDirectory(prefix="uptrio-embedded-") as tmp:
        path = Path(tmp) / "data"
        try:
            yield path
        finally:
            if (path / "pgdata" / "postmaster.pid").exists():
                with trio.CancelScope(shield=True):
                    server = await trio.to_thread.run_sync(start_embedded, path)
                    with suppress(subprocess.CalledProcessError):  # stopped meanwhile
                        await trio.to_thread.run_sync(server.stop_server)


async def _holder(data_dir: Path) -> trio.Process:
    """Another process holding the server of ``data_dir`` (started if need be)."""
    process = await trio.lowlevel.open_process(
        [sys.executable, "-c", _HOLDER, str(data_dir)],
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert process.stdout is not None
    out = b""
    while not out.endswith(b"\n"):
        chunk = await process.stdout.receive_some(100)
        assert chunk, "the holder exited"
        out += chunk
    assert out == b"ready\n", out
    return process


async def _sigkill(process: trio.Process) -> None:
    process.kill()
    await process.wait()


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _make_open_dir(path: Path) -> None:
    """``path`` made as a user's ``mkdir`` leaves it: mode 0755."""
    path.mkdir()
    path.chmod(0o755)


def _running(server: EmbeddedPostgres) -> bool:
    return (server.pgdata / "postmaster.pid").exists()


async def test_the_data_directory_stays_closed_to_other_users(data_dir: Path) -> None:
    with trio.fail_after(30):
        _make_open_dir(data_dir)
        server = await trio.to_thread.run_sync(start_embedded, data_dir)
        try:
            assert _mode(data_dir) == EXPECTED_MODE
            assert _mode(server.pgdata) == 0o700
        finally:
            await trio.to_thread.run_sync(server.stop)


async def test_a_server_held_by_a_killed_process_is_stopped_by_the_next_clean_stop(
    data_dir: Path,
) -> None:
    with trio.fail_after(60):
        # a command joins the service's server and is killed; the service stops cleanly
        server = await trio.to_thread.run_sync(start_embedded, data_dir)
        await _sigkill(await _holder(data_dir))
        await trio.to_thread.run_sync(server.stop)
        assert not _running(server), "the killed holder kept the server running"

        # the service is killed; the next one adopts its server and stops it cleanly
        killed = await _holder(data_dir)
        await _sigkill(killed)
        server = await trio.to_thread.run_sync(start_embedded, data_dir)
        assert _running(server)
        await trio.to_thread.run_sync(server.stop)
        assert not _running(server), "the server of the killed process was left running"
