"""The embedded Postgres server: a real Postgres 16 from the ``pgserver`` wheel.

With no database URL configured, ``uptrio serve`` (and ``uptrio tokens ...``) start
Postgres in ``<data-dir>/pgdata`` and talk to it over a Unix socket. pgserver counts the
processes using one data directory (their pids, in ``pgdata/.handle_pids.json``), so a
CLI command run beside the service shares the running server, and the server stops when
the last of them exits.

A process killed with SIGKILL never takes its pid off that list, and pgserver would then
never stop the server. So, at every start and stop, the pids of processes that are gone
(no such process, or a zombie) are taken off first: a service started after a killed one
adopts its server, and stops it when it stops cleanly. (A pid the system has already
given to an unrelated process counts as a holder: that server then stays up until the
process ends and a later stop finds it gone.)

pgserver run as root opens the directories above ``pgdata`` to every user; the data
directory is set back to its own mode (:mod:`store.datadir`) once the server runs.

These functions block (they run ``initdb`` and ``pg_ctl``, about 0.6 s for a start): call
them through ``trio.to_thread.run_sync``.
"""

from __future__ import annotations

import json
import logging
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import structlog

from .datadir import secure_data_dir

log = structlog.get_logger("uptrio.store")


@dataclass(frozen=True, slots=True)
class EmbeddedPostgres:
    """A running embedded server.

    Attributes:
        url: the libpq URL of its ``postgres`` database.
        pgdata: its data directory.
    """

    url: str
    pgdata: Path
    server: Any

    def url_for(self, database: str) -> str:
        """The URL of another database on the same server."""
        uri: str = self.server.get_uri(database)
        return uri

    def stop(self) -> None:
        """Release this process's handle; the server stops when no running process holds
        one (holders that are gone are forgotten first: module docstring; also a server
        started again by :meth:`start_server` in another process: the handle's view of
        the running postmaster is refreshed first)."""
        from pgserver.utils import PostmasterInfo

        _forget_gone_holders(self.pgdata)
        running = PostmasterInfo.read_from_pgdata(self.server.pgdata)
        if running is not None and running.is_running():
            self.server._postmaster_info = running  # pgserver keeps the first one it saw
        self.server.cleanup()

    def stop_server(self) -> None:
        """Stop the server now, whoever holds handles (``pg_ctl stop -m fast``: open
        connections are cut, open transactions roll back). For outage drills and tests;
        :meth:`start_server` brings it back with the same socket, so the URL stays valid.

        Raises:
            subprocess.CalledProcessError: ``pg_ctl`` failed (say, the server was not
                running).
        """
        from pgserver._commands import pg_ctl  # type: ignore[attr-defined]

        server = self.server
        pg_ctl(["-w", "stop", "-m", "fast"], pgdata=server.pgdata, user=server.system_user)

    def start_server(self) -> None:
        """Start the server again after :meth:`stop_server` (a no-op when it runs);
        returns once it accepts connections (about 0.5 s).

        Raises:
            subprocess.CalledProcessError, subprocess.TimeoutExpired: ``pg_ctl`` failed.
        """
        with self.server._lock:
            self.server.ensure_postgres_running()


def start_embedded(data_dir: Path, *, delete_on_stop: bool = False) -> EmbeddedPostgres:
    """Start (or join) the embedded Postgres whose data lives in ``data_dir / "pgdata"``.

    ``data_dir`` is created if missing. ``delete_on_stop`` removes the data when the last
    handle stops (tests use it).

    Raises:
        RuntimeError: the server failed to initialise or start (pgserver's message, with
            the server log, is in the exception chain).
    """
    logging.getLogger("pgserver").setLevel(logging.WARNING)
    secure_data_dir(data_dir)
    pgdata = data_dir.resolve() / "pgdata"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs warns about XDG_RUNTIME_DIR
        import pgserver  # imported here: it scans its install on import, ~50 ms

        _forget_gone_holders(pgdata)
        server = pgserver.get_server(  # type: ignore[attr-defined]
            pgdata, cleanup_mode="delete" if delete_on_stop else "stop"
        )
    secure_data_dir(data_dir)  # pgserver, run as root, opened it to every user
    return EmbeddedPostgres(url=server.get_uri(), pgdata=data_dir / "pgdata", server=server)


def _forget_gone_holders(pgdata: Path) -> list[int]:
    """Take the pids of processes that are gone (none by that pid, or a zombie) off
    pgserver's list of the server's holders (``pgdata/.handle_pids.json``), under
    pgserver's own lock; returns them (module docstring)."""
    from pgserver.postgres_server import PostgresServer

    path = pgdata / ".handle_pids.json"
    with PostgresServer._lock:
        try:
            pids: list[int] = json.loads(path.read_text())
        except FileNotFoundError:
            return []
        gone = [pid for pid in pids if not _running(pid)]
        if gone:
            path.write_text(json.dumps([pid for pid in pids if pid not in gone]))
    if gone:
        log.info("embedded server: holders that are gone forgotten", pids=gone)
    return gone


def _running(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:  # another user's process: it exists
        return True
