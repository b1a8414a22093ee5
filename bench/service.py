"""The service under test: ``uptrio serve`` as a child process, and its database.

`open_service` runs ``python -m web.cli serve`` on a loopback port the OS picks, with the
bench's DNS server as its nameserver, its output in ``service.log``; it yields once the
service listens and stops it on exit with the ladder of DESIGN/STYLE: SIGTERM, up to
30 s for a clean stop (the store writes every result still queued), then SIGKILL.

`open_bench_database` gives the bench its own view of the database: with no URL it
joins the embedded Postgres of the data directory first (pgserver counts the processes
using it, so the service shares that server and it stops when the last of the two lets
go); the bench reads the postmaster's pid (for CPU and memory), mints API tokens and
counts stored checks through it.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio

from store import Database, EmbeddedPostgres, accounts, open_database, start_embedded

from .plan import BenchParams
from .targets import stop_process

__all__ = [
    "BenchDatabase",
    "ServiceProcess",
    "mint_tokens",
    "open_bench_database",
    "open_service",
    "rate_limit_flags",
]

_LISTENING = re.compile(rb"listening on (http://127\.0\.0\.1:\d+)")
_STOP_GRACE_SECONDS = 30.0


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
        """Send SIGTERM (the service stops cleanly; see `open_service`)."""
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
        db: a small pool on it (the bench's own queries).
        pgdata: the server's data directory when it is local and known, else None.
    """

    url: str
    db: Database
    pgdata: Path | None

    def postmaster_pid(self) -> int | None:
        """The postmaster's pid (first line of ``postmaster.pid``), None if unknown."""
        if self.pgdata is None:
            return None
        try:
            return int((self.pgdata / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None


@asynccontextmanager
async def open_bench_database(
    data_dir: Path, database_url: str | None
) -> AsyncIterator[BenchDatabase]:
    """Join (or start) the embedded Postgres in ``data_dir``, or connect to
    ``database_url``; yield a `BenchDatabase`. Must run inside
    ``trio_asyncio.open_loop()``.

    The service applies the migrations; the bench only uses the pool after it started.
    """
    embedded: EmbeddedPostgres | None = None
    url = database_url
    if url is None:
        embedded = await trio.to_thread.run_sync(start_embedded, data_dir)
        url = embedded.url
    try:
        async with open_database(url, min_size=1, max_size=2) as db:
            pgdata = embedded.pgdata.resolve() if embedded is not None else None
            if pgdata is None:
                pgdata = await _external_pgdata(db)
            yield BenchDatabase(url=url, db=db, pgdata=pgdata)
    finally:
        if embedded is not None:
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(embedded.stop)


async def _external_pgdata(db: Database) -> Path | None:
    """The data directory of an external server, when it is on this machine."""

    async def show(connection: Any) -> str | None:
        try:
            value = await connection.fetchval("SHOW data_directory")
        except Exception:  # not a superuser: the directory stays unknown
            return None
        return str(value) if value else None

    directory = await db.run(show)
    if directory and (Path(directory) / "postmaster.pid").exists():
        return Path(directory)
    return None


def rate_limit_flags(help_text: str) -> list[str]:
    """``uptrio serve`` flags that lift the API rate limits for the bench, as far as
    ``uptrio serve --help`` shows them (none before rate limits exist)."""
    lifted = {
        "--token-requests-per-minute": "100000000",
        "--token-requests-per-hour": "100000000",
        "--account-requests-per-minute": "100000000",
    }
    flags: list[str] = []
    for flag, value in lifted.items():
        if flag in help_text:
            flags += [flag, value]
    return flags


async def serve_help() -> str:
    """The text of ``uptrio serve --help``."""
    done = await trio.run_process(
        [sys.executable, "-m", "web.cli", "serve", "--help"],
        capture_stdout=True,
        capture_stderr=True,
        check=False,
    )
    return bytes(done.stdout).decode(errors="replace")


def service_command(
    params: BenchParams, data_dir: Path, dns_port: int, extra_flags: list[str]
) -> list[str]:
    """The ``uptrio serve`` command line of a run."""
    command = [
        sys.executable,
        "-m",
        "web.cli",
        "--log-format",
        "json",
        "--log-level",
        params.service_log_level,
        "serve",
        "--host",
        "127.0.0.1",
        "--port",
        "0",
        "--data-dir",
        str(data_dir),
        "--dns-nameserver",
        f"127.0.0.1:{dns_port}",
        "--shutdown-seconds",
        "5",
    ]
    if params.database_url:
        command += ["--database-url", params.database_url]
    if params.max_probes_in_flight is not None:
        command += ["--max-probes-in-flight", str(params.max_probes_in_flight)]
    if params.batch_size is not None:
        command += ["--batch-size", str(params.batch_size)]
    if params.batch_age_ms is not None:
        command += ["--batch-age-ms", str(params.batch_age_ms)]
    return command + extra_flags + list(params.serve_args)


@asynccontextmanager
async def open_service(command: list[str], log_path: Path) -> AsyncIterator[ServiceProcess]:
    """Run ``command`` (from `service_command`) with its output in ``log_path``; yield
    once it listens (at most 60 s); stop it on exit (SIGTERM, then SIGKILL after 30 s).

    Raises:
        RuntimeError: the service exited or did not listen within 60 s (its log says why).
    """
    env = {k: v for k, v in os.environ.items() if k not in ("UPTRIO_DATABASE_URL",)}
    with log_path.open("wb") as log:
        process = await trio.lowlevel.open_process(
            command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env
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


async def mint_tokens(
    bench_db: BenchDatabase, secret: bytes, accounts_and_counts: list[tuple[str, int]]
) -> dict[str, list[str]]:
    """Create API tokens with every monitor permission, as ``uptrio tokens create``
    does (the same store function and JWT issuer): ``{account: [jwt, ...]}``."""
    from web.auth import PERMISSIONS, issue_token
    from web.versioning import CURRENT_VERSION

    minted: dict[str, list[str]] = {}
    now = int(time.time())
    for account, count in accounts_and_counts:
        for _ in range(count):
            _, token = await bench_db.db.transaction(
                accounts.create_token,
                account,
                list(PERMISSIONS),
                now=now,
                expires_at=None,
                current_version=CURRENT_VERSION,
            )
            minted.setdefault(account, []).append(
                issue_token(secret, token.id, now=now, expires_at=None)
            )
    return minted
