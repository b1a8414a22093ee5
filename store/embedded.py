"""The embedded Postgres server: a real Postgres 16 from the ``pgserver`` wheel.

With no database URL configured, ``uptrio serve`` (and ``uptrio tokens ...``) start
Postgres in ``<data-dir>/pgdata`` and talk to it over a Unix socket. pgserver counts the
processes using one data directory, so a CLI command run beside the service shares the
running server, and the server stops when the last of them exits.

These functions block (they run ``initdb`` and ``pg_ctl``, about 0.6 s for a start): call
them through ``trio.to_thread.run_sync``.
"""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any


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
        """Release this process's handle; the server stops when no process holds one
        (also a server started again by :meth:`start_server` in another process: the
        handle's view of the running postmaster is refreshed first)."""
        from pgserver.utils import PostmasterInfo

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
    data_dir.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs warns about XDG_RUNTIME_DIR
        import pgserver  # imported here: it scans its install on import, ~50 ms

        server = pgserver.get_server(  # type: ignore[attr-defined]
            data_dir.resolve() / "pgdata", cleanup_mode="delete" if delete_on_stop else "stop"
        )
    return EmbeddedPostgres(url=server.get_uri(), pgdata=data_dir / "pgdata", server=server)
