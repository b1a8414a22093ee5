"""A Postgres server of a test's own, a way to make it hang, and the end of servers a
killed service left behind.

The session's server (``tests/conftest.py``) is shared by every test and is never
stopped; a test that breaks its server starts one of its own with `open_own_postgres`
(about 1 s), in a directory of its own under the system's temporary directory (not
pytest's ``tmp_path``, which pytest keeps 0700: the server's own system user, which
pgserver creates when run as root, could not enter it).

`freeze_postgres` stops every process of that server with SIGSTOP (the postmaster first,
so that it forks no new backend, then every child it has) and continues them with
SIGCONT after a given time, or when cancelled: a server that hangs instead of refusing,
as a stopped VM, a paused container or a full disk look to a client. The processes are
found from the server's data directory: ``postmaster.pid`` holds the postmaster's pid
on its first line, and its children are read from ``/proc`` (psutil).

`stop_leftover_server` ends the server of a data directory whose ``uptrio serve`` was
killed (SIGKILL): nothing else would, and the session's end checks that no server is
left (``tests/conftest.py``, :data:`SUITE_MARK`).
"""

from __future__ import annotations

import signal
import subprocess
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from functools import partial
from pathlib import Path

import psutil
import trio

from store import EmbeddedPostgres, start_embedded

SUITE_MARK = "PYTEST_UPTRIO_SESSION"
"""The environment variable that marks the processes of one test session, and so the
Postgres servers they start (a server inherits the environment of whoever started it).
Not an ``UPTRIO_*`` name: the tests strip those from a service's environment."""


@asynccontextmanager
async def open_own_postgres() -> AsyncIterator[EmbeddedPostgres]:
    """Start an embedded Postgres of the caller's own; stop it and delete its data on
    exit (shielded: it runs even when the test is cancelled)."""
    with tempfile.TemporaryDirectory(prefix="uptrio-own-pg-") as tmp:
        server = await trio.to_thread.run_sync(
            partial(start_embedded, Path(tmp), delete_on_stop=True)
        )
        try:
            yield server
        finally:
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(server.stop)


async def stop_leftover_server(data_dir: Path) -> None:
    """Stop the embedded server of ``data_dir`` if one runs, whoever holds it (shielded:
    it runs even when the test is cancelled). For a test that killed its service."""
    if not (data_dir / "pgdata" / "postmaster.pid").exists():
        return
    with trio.CancelScope(shield=True):
        server = await trio.to_thread.run_sync(start_embedded, data_dir)
        with suppress(subprocess.CalledProcessError):  # it stopped meanwhile
            await trio.to_thread.run_sync(server.stop_server)
        await trio.to_thread.run_sync(server.stop)


def stop_servers(postmasters: list[psutil.Process], timeout_seconds: float = 10.0) -> None:
    """Stop the servers whose postmasters are given: a fast shutdown (SIGINT: sessions
    cut, transactions rolled back), SIGKILL past ``timeout_seconds`` (blocking)."""
    for process in postmasters:
        with suppress(psutil.NoSuchProcess):
            process.send_signal(signal.SIGINT)
    _, alive = psutil.wait_procs(postmasters, timeout=timeout_seconds)
    for process in alive:
        with suppress(psutil.NoSuchProcess):
            process.kill()


def _stop_all(pgdata: Path) -> list[psutil.Process]:
    """SIGSTOP the postmaster of ``pgdata``, then each of its children; the processes."""
    postmaster = psutil.Process(int((pgdata / "postmaster.pid").read_text().split()[0]))
    postmaster.send_signal(signal.SIGSTOP)
    stopped = [postmaster]
    for child in postmaster.children(recursive=True):
        try:
            child.send_signal(signal.SIGSTOP)
        except psutil.NoSuchProcess:
            continue
        stopped.append(child)
    return stopped


def _continue_all(processes: list[psutil.Process]) -> None:
    for process in reversed(processes):  # the postmaster last
        with suppress(psutil.NoSuchProcess):
            process.send_signal(signal.SIGCONT)


async def freeze_postgres(
    pgdata: Path,
    seconds: float,
    *,
    task_status: trio.TaskStatus[float] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Stop every process of the server whose data directory is ``pgdata`` (SIGSTOP),
    report the trio time it happened through ``task_status.started``, and continue them
    (SIGCONT) ``seconds`` seconds later, or at once when cancelled. For
    ``nursery.start``: the caller's nursery waits for the thaw.

    Raises:
        psutil.NoSuchProcess, FileNotFoundError: no server runs on ``pgdata``.
    """
    processes = _stop_all(pgdata)
    try:
        task_status.started(trio.current_time())
        await trio.sleep(seconds)
    finally:
        _continue_all(processes)
