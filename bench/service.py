"""The service under test: ``uptrio serve`` as a child process, and its database.

The harness sees the service only as a user does: it runs the ``uptrio`` command
(:data:`UPTRIO`), speaks HTTP to it, and reads its Postgres as an operator would, with
asyncpg and SQL. It imports nothing of ``web``, ``engine`` or ``store`` (the import
contracts in ``pyproject.toml`` check it).

`run_service_process` runs ``uptrio serve`` on a loopback port the OS picks, with the
bench's DNS server as its nameserver, its output in ``service.log``; it yields once the
service listens and stops it on exit with the usual ladder (docs/operations.md, Shutdown):
SIGTERM, up to 30 s for a clean stop (the store writes every result still queued), then
SIGKILL.

`open_bench_database` gives the bench its own view of the database: with no URL it
joins the embedded Postgres of the data directory first, through pgserver as the service
does (pgserver counts the processes using it, so the service shares that server and it
stops when the last of the two lets go); the bench reads the postmaster's pid (for CPU
and memory) and counts stored checks through it. `mint_tokens` creates API tokens with
``uptrio tokens create``.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import subprocess
import sys
import time
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import asyncpg
import trio
import trio_asyncio

from .plan import BenchParams
from .targets import stop_process

__all__ = [
    "UPTRIO",
    "BenchDatabase",
    "ServiceProcess",
    "claim_secret",
    "mint_tokens",
    "open_bench_database",
    "run_service_process",
    "serve_command",
    "service_command",
]

UPTRIO = [
    sys.executable,
    "-m",
    "web.cli" if Path("web/cli.py").is_file() else "web.process.cli",
]
"""The ``uptrio`` command of this environment (the console script's own module), in the
working directory: ``web.cli`` there in a revision from before ``web/`` had subpackages,
so an A/B against an older service still starts it (bench/RESULTS.md)."""

RATE_LIMIT_FLAGS = [
    "--token-requests-per-minute=100000000",
    "--token-requests-per-hour=100000000",
    "--account-requests-per-minute=100000000",
]
"""``uptrio serve`` flags that lift the API rate limits for the bench."""

_LISTENING = re.compile(rb"listening on (http://127\.0\.0\.1:\d+)")
_STOP_GRACE_SECONDS = 30.0
_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class ServiceProcess:
    """A running ``uptrio serve``: its process, base URL and log file."""

    process: trio.Process
    base_url: str
    log_path: Path
    command: list[str]

    @property
    def pid(self) -> int:
        """The service's process id."""
        return self.process.pid

    def terminate(self) -> None:
        """Send SIGTERM (the service stops cleanly; see `run_service_process`)."""
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGTERM)

    async def wait_stopped(self) -> int:
        """Wait for the exit (killed past 30 s); returns the exit status."""
        await stop_process(self.process, grace_seconds=_STOP_GRACE_SECONDS)
        code = self.process.returncode
        assert code is not None
        return code


@dataclass(frozen=True, slots=True)
class BenchDatabase:
    """The bench's handle on the service's database.

    Attributes:
        url: the libpq URL of the database the service uses.
        pool: a small asyncpg pool on it (the bench's own queries).
        pgdata: the server's data directory when it is local and known, else None.
    """

    url: str
    pool: Any
    pgdata: Path | None

    async def run(
        self, query: Callable[[Any], Awaitable[_T]], *, timeout_seconds: float = 60.0
    ) -> _T:
        """``await query(connection)`` on a pooled asyncpg connection (asyncio, bridged);
        bounded by ``timeout_seconds`` (60 s: a bulk load asks for more)."""

        async def on_asyncio() -> _T:
            async with self.pool.acquire() as connection:
                return await query(connection)

        with trio.fail_after(timeout_seconds):
            result: _T = await trio_asyncio.aio_as_trio(on_asyncio)()
        return result

    def postmaster_pid(self) -> int | None:
        """The postmaster's pid (first line of ``postmaster.pid``), None if unknown."""
        if self.pgdata is None:
            return None
        try:
            return int((self.pgdata / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None


def _join_embedded(data_dir: Path, settings: Sequence[tuple[str, str]] = ()) -> Any:
    """Start or join the embedded Postgres in ``data_dir / "pgdata"`` (blocking).

    With ``settings`` (``(name, value)`` pairs, e.g. ``track_commit_timestamp = on``,
    which only a start reads), they are written with ``ALTER SYSTEM`` and the server is
    stopped and started again: the bench must be its only user then (it joins before
    the service starts)."""
    logging.getLogger("pgserver").setLevel(logging.WARNING)
    data_dir.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs warns about XDG_RUNTIME_DIR
        import pgserver

        pgdata = data_dir.resolve() / "pgdata"
        server = pgserver.get_server(pgdata, cleanup_mode="stop")  # type: ignore[attr-defined]
        if not settings:
            return server
        server.psql("".join(f"ALTER SYSTEM SET {name} = '{value}';\n" for name, value in settings))
        server.cleanup()  # the last user: it stops
        return pgserver.get_server(pgdata, cleanup_mode="stop")  # type: ignore[attr-defined]


@asynccontextmanager
async def open_bench_database(
    data_dir: Path, database_url: str | None, postgres_settings: Sequence[tuple[str, str]] = ()
) -> AsyncIterator[BenchDatabase]:
    """Join (or start) the embedded Postgres in ``data_dir``, or connect to
    ``database_url``; yield a `BenchDatabase`. Must run inside
    ``trio_asyncio.open_loop()``. ``postgres_settings`` are set on the embedded server
    before anything else uses it (`_join_embedded`); an external server is left as it
    is.

    The service applies the migrations; the bench only uses the pool after it started.
    """
    server: Any = None
    url = database_url
    if url is None:
        server = await trio.to_thread.run_sync(_join_embedded, data_dir, postgres_settings)
        url = str(server.get_uri())
    try:
        with trio.fail_after(60):
            pool = await trio_asyncio.aio_as_trio(asyncpg.create_pool)(url, min_size=1, max_size=2)
        try:
            bench_db = BenchDatabase(url=url, pool=pool, pgdata=None)
            pgdata = (data_dir / "pgdata").resolve() if server is not None else None
            if pgdata is None:
                pgdata = await _external_pgdata(bench_db)
            yield BenchDatabase(url=url, pool=pool, pgdata=pgdata)
        finally:
            with trio.CancelScope(shield=True), trio.move_on_after(10):
                await trio_asyncio.aio_as_trio(pool.close)()
    finally:
        if server is not None:
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(server.cleanup)


async def _external_pgdata(bench_db: BenchDatabase) -> Path | None:
    """The data directory of an external server, when it is on this machine."""

    async def show(connection: Any) -> str | None:
        try:
            value = await connection.fetchval("SHOW data_directory")
        except Exception:  # not a superuser: the directory stays unknown
            return None
        return str(value) if value else None

    directory = await bench_db.run(show)
    if directory and (Path(directory) / "postmaster.pid").exists():
        return Path(directory)
    return None


def serve_command(data_dir: Path, *flags: str, log_level: str = "info") -> list[str]:
    """``uptrio serve`` on a loopback port the OS picks, with ``data_dir``, the rate limits
    lifted, JSON logs at ``log_level``, and ``flags``."""
    return [
        *UPTRIO,
        "--log-format",
        "json",
        "--log-level",
        log_level,
        "serve",
        "--host",
        "127.0.0.1",
        "--port",
        "0",
        "--data-dir",
        str(data_dir),
        *RATE_LIMIT_FLAGS,
        *flags,
    ]


def service_command(params: BenchParams, data_dir: Path, dns_port: int) -> list[str]:
    """The ``uptrio serve`` command line of a run."""
    flags = [
        "--dns-nameserver",
        f"127.0.0.1:{dns_port}",
        "--shutdown-seconds",
        "5",
    ]
    if params.database_url:
        flags += ["--database-url", params.database_url]
    if params.max_probes_in_flight is not None:
        flags += ["--max-probes-in-flight", str(params.max_probes_in_flight)]
    if params.batch_size is not None:
        flags += ["--batch-size", str(params.batch_size)]
    if params.batch_age_ms is not None:
        flags += ["--batch-age-ms", str(params.batch_age_ms)]
    return serve_command(data_dir, *flags, *params.serve_args, log_level=params.service_log_level)


@asynccontextmanager
async def run_service_process(
    command: list[str], log_path: Path, env: Mapping[str, str] | None = None
) -> AsyncIterator[ServiceProcess]:
    """Run ``command`` (from `service_command`) with its output in ``log_path`` and
    ``env`` added to this process's environment; yield once it listens (at most 60 s);
    stop it on exit (SIGTERM, then SIGKILL after 30 s).

    Raises:
        RuntimeError: the service exited or did not listen within 60 s (its log says why).
    """
    environment = {k: v for k, v in os.environ.items() if k not in ("UPTRIO_DATABASE_URL",)}
    environment.update(env or {})
    with log_path.open("wb") as log:
        process = await trio.lowlevel.open_process(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=environment,
        )
    try:
        base_url = await _wait_listening(process, log_path, timeout_seconds=60.0)
        service = ServiceProcess(process, base_url, log_path, command)
        yield service
    finally:
        with trio.CancelScope(shield=True):
            if process.returncode is None:
                process.send_signal(signal.SIGTERM)
            await stop_process(process, grace_seconds=_STOP_GRACE_SECONDS)


async def _wait_listening(process: trio.Process, log_path: Path, *, timeout_seconds: float) -> str:
    deadline = time.monotonic() + timeout_seconds
    while time.monotonic() < deadline:
        found = _LISTENING.search(await trio.Path(log_path).read_bytes())
        if found:
            return found.group(1).decode()
        if process.returncode is not None or process.poll() is not None:
            break
        await trio.sleep(0.05)
    tail = (await trio.Path(log_path).read_bytes())[-2000:].decode(errors="replace")
    raise RuntimeError(f"uptrio serve did not start (see {log_path}):\n{tail}")


async def claim_secret(
    data_dir: Path, database_url: str, env: Mapping[str, str] | None = None
) -> None:
    """Make this run's JWT secret (``data_dir``'s, or ``UPTRIO_JWT_SECRET`` in ``env``) the
    one of the external database at ``database_url``: an earlier run recorded its own there,
    and a service with another secret refuses to start (docs/several-nodes.md, One secret
    per database). ``uptrio tokens reset-secret --yes`` (60 s at most) revokes the earlier
    runs' tokens.

    Raises:
        subprocess.CalledProcessError: the command failed.
    """
    command = [*UPTRIO, "tokens", "reset-secret", "--yes", "--data-dir", str(data_dir)]
    with trio.fail_after(60):
        await trio.run_process(
            [*command, "--database-url", database_url],
            capture_stdout=True,
            capture_stderr=True,
            env={**os.environ, **(env or {})},
        )


async def mint_tokens(
    data_dir: Path,
    database_url: str | None,
    account: str,
    count: int,
    env: Mapping[str, str] | None = None,
) -> list[str]:
    """``count`` API tokens with every permission for ``account``, each made by
    ``uptrio tokens create`` (60 s at most each, ``env`` added to the environment: the
    nodes' shared ``UPTRIO_JWT_SECRET``), as an operator would: the first alone, the
    others side by side once the database is migrated.

    Raises:
        subprocess.CalledProcessError: the command failed.
    """
    command = [*UPTRIO, "tokens", "create", "--account", account, "--permissions", "all"]
    command += ["--data-dir", str(data_dir)]
    if database_url:
        command += ["--database-url", database_url]
    minted: list[str] = [""] * count

    async def mint(k: int) -> None:
        with trio.fail_after(60):
            done = await trio.run_process(
                command,
                capture_stdout=True,
                capture_stderr=True,
                env={**os.environ, **(env or {})},
            )
        minted[k] = bytes(done.stdout).decode().strip()

    if count:
        await mint(0)  # alone: it may migrate, or start the embedded server and stop it
    async with trio.open_nursery() as nursery:
        for k in range(1, count):
            nursery.start_soon(mint, k)
    return minted
