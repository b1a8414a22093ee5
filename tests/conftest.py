"""Shared fixtures: the real embedded Postgres, one fresh database per test.

Rules for every test module here: loopback only (127.0.0.1 / ::1), ports chosen by the OS
(port 0), ``autojump_clock`` for anything timed that has no real I/O in flight, and a
``trio.fail_after`` inside each test so a hang fails fast.

The server starts once per session (about 0.6 s) in a temporary directory, or
``UPTRIO_TEST_DATABASE_URL`` points at an external Postgres whose user may create
databases. A template database is migrated once; each test that asks for a database gets
a copy of it (``CREATE DATABASE ... TEMPLATE``), because the store writes through its own
pool and tests must not see each other's rows.

No embedded server outlives the session: every process the suite starts inherits
:data:`SUITE_MARK` in its environment, and so does every Postgres server it starts
(directly, or through an ``uptrio serve`` subprocess); at the end of the session
:func:`_no_server_left` looks for running servers that carry this session's mark, stops
them and fails the session if it finds any. A test that kills a service with SIGKILL
stops the server that service started (``tests.postgres.stop_leftover_server``).
"""

from __future__ import annotations

import itertools
import os
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import psutil
import pytest
import structlog
import trio
import trio_asyncio
from quart.typing import TestClientProtocol

from store import (
    Database,
    EmbeddedPostgres,
    apply_migrations,
    open_database,
    start_embedded,
)
from tests.api import Api, EngineLike, MakeToken, mint_token, web_deps
from tests.postgres import SUITE_MARK, open_own_postgres, stop_servers
from web.http.deps import Dependencies
from web.process.app import create_app
from web.process.logs import console_renderer

# structlog's default renderer, but with plain tracebacks (web.process.logs.console_renderer):
# rich ones with every frame's locals take the event loop for tens of milliseconds each,
# enough to make a test of a crashing actor miss its neighbours' grid points.
structlog.configure(processors=[*structlog.get_config()["processors"][:-1], console_renderer()])

TEMPLATE = "uptrio_template"
_counter = itertools.count()


_PROCESS_TESTS = {
    "processes": ("tests/ops/", "tests/web/test_serve.py"),
    "harness": ("tests/bench/", "tests/browser/"),
}
"""Tests that run whole processes (``uptrio serve``, the harness, Chromium), in two
groups: under ``pytest -n 3 --dist loadgroup`` (``make test``) each group runs on one
worker, one test at a time, so at most two of them load the machine together (the
service's stories beside the harness's and the browser's); the third worker and the
groups' workers once done run the rest."""

_ALONE_TESTS = (
    "tests/bench/test_bench_nodes.py::test_two_nodes",
    "tests/bench/test_bench_nodes.py::test_a_killed",
    "tests/ops/test_nodes.py",
    "tests/ops/test_nodes_notify.py",
)
"""Tests of a cluster's time bounds (a killed node's monitors probed again within a lease
and an interval, a hand-over that misses no grid point, a change through one node in
effect on the other within a second: docs/several-nodes.md): two or three processes,
Postgres and the targets need the machine to themselves. They carry the ``alone`` mark,
and ``make test`` runs them after the others (``-m "not alone"`` then ``-m alone``): on
2 cores beside the other worker's tests they missed their bounds by a few hundredths of a
second."""


_LONG_FIRST = ("tests/web/test_schemathesis.py", "tests/web/test_permissions.py")
"""Modules of the rest whose tests take the longest (40 s or more each module): handed out
right after the two groups, so that none of them starts last and runs on alone while
the other workers are done (the longest first is the usual rule for the shortest
finish)."""


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Put the tests of :data:`_PROCESS_TESTS` in their ``xdist_group`` (a no-op without
    xdist) and mark those of :data:`_ALONE_TESTS` ``alone``; first, so that ``-m`` sees
    the mark. Then order them: the groups' tests, :data:`_LONG_FIRST`, the rest, each
    part in collection order (xdist hands out work in this order)."""
    rank: dict[str, int] = {}
    for item in items:
        rank[item.nodeid] = 2
        for group, prefixes in _PROCESS_TESTS.items():
            if item.nodeid.startswith(prefixes):
                item.add_marker(pytest.mark.xdist_group(group))
                rank[item.nodeid] = 0
        if item.nodeid.startswith(_LONG_FIRST):
            rank[item.nodeid] = 1
        if item.nodeid.startswith(_ALONE_TESTS):
            item.add_marker(pytest.mark.alone)
    items.sort(key=lambda item: rank[item.nodeid])


def _with_database(url: str, name: str) -> str:
    """``url`` pointing at database ``name`` (the path part of a libpq URL)."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + name))


def _servers_of_this_session(mark: str) -> list[psutil.Process]:
    """The running Postgres servers (postmasters) whose environment carries ``mark``."""
    found = []
    for process in psutil.process_iter(["name", "cmdline"]):
        if process.info["name"] != "postgres" or "-D" not in (process.info["cmdline"] or []):
            continue  # a backend or a helper process, not a server
        try:
            if process.environ().get(SUITE_MARK) == mark:
                found.append(process)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


@pytest.fixture(scope="session", autouse=True)
def _no_server_left() -> Iterator[None]:
    """Mark this session's processes (:data:`SUITE_MARK`); at the end, stop every server
    that carries the mark and fail the session if there was one."""
    mark = f"{os.getpid()}-{os.urandom(6).hex()}"
    os.environ[SUITE_MARK] = mark
    yield
    left = _servers_of_this_session(mark)
    if left:
        data = [p.info["cmdline"][p.info["cmdline"].index("-D") + 1] for p in left]
        stop_servers(left)
        pytest.fail(f"the test session left {len(left)} Postgres server(s) running: {data}")


@pytest.fixture(scope="session")
def postgres_url(_no_server_left: None) -> Iterator[str]:
    """URL of the session's Postgres server (its maintenance database)."""
    external = os.environ.get("UPTRIO_TEST_DATABASE_URL")
    if external:
        yield external
        return
    with tempfile.TemporaryDirectory(prefix="uptrio-test-") as tmp:
        server = start_embedded(Path(tmp), delete_on_stop=True)
        try:
            yield server.url
        finally:
            server.stop()


@pytest.fixture(scope="session")
def template_url(postgres_url: str) -> str:
    """A migrated template database, created once per session."""

    async def build() -> None:
        async with trio_asyncio.open_loop():

            async def on_asyncio() -> None:
                admin = await asyncpg.connect(postgres_url)
                try:
                    await admin.execute(f"DROP DATABASE IF EXISTS {TEMPLATE} WITH (FORCE)")
                    await admin.execute(f"CREATE DATABASE {TEMPLATE}")
                finally:
                    await admin.close()
                conn = await asyncpg.connect(_with_database(postgres_url, TEMPLATE))
                try:
                    await apply_migrations(conn)
                finally:
                    await conn.close()

            await trio_asyncio.aio_as_trio(on_asyncio)()

    trio.run(build)
    return _with_database(postgres_url, TEMPLATE)


@pytest.fixture
async def asyncio_loop() -> AsyncIterator[None]:
    """The trio-asyncio bridge, as the service opens it in its root nursery."""
    async with trio_asyncio.open_loop():
        yield


@pytest.fixture
async def own_postgres(asyncio_loop: None) -> AsyncIterator[EmbeddedPostgres]:
    """An embedded Postgres of this test alone (``tests.postgres``), for tests that stop
    or freeze their server; deleted afterwards."""
    async with open_own_postgres() as server:
        yield server


async def _admin(postgres_url: str, sql: str) -> None:
    """Run ``sql`` on the server's maintenance database (asyncio side)."""
    conn = await asyncpg.connect(postgres_url)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


@asynccontextmanager
async def _fresh_database(postgres_url: str, template: str | None) -> AsyncIterator[str]:
    """A new database (a copy of ``template``, else empty), dropped on exit; its URL."""
    name = f"uptrio_test_{os.getpid()}_{next(_counter)}"
    copy = f" TEMPLATE {template}" if template else ""
    await trio_asyncio.aio_as_trio(_admin)(postgres_url, f"CREATE DATABASE {name}{copy}")
    try:
        yield _with_database(postgres_url, name)
    finally:
        with trio.CancelScope(shield=True):
            await trio_asyncio.aio_as_trio(_admin)(
                postgres_url, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"
            )


@pytest.fixture
async def database_url(
    postgres_url: str, template_url: str, asyncio_loop: None
) -> AsyncIterator[str]:
    """URL of a fresh, migrated database, dropped after the test."""
    async with _fresh_database(postgres_url, TEMPLATE) as url:
        yield url


@pytest.fixture
async def empty_database_url(postgres_url: str, asyncio_loop: None) -> AsyncIterator[str]:
    """URL of a fresh, empty database (no migration applied), dropped after the test."""
    async with _fresh_database(postgres_url, None) as url:
        yield url


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[Database]:
    """A :class:`store.Database` on a fresh database."""
    async with open_database(database_url, min_size=1, max_size=5) as database:
        yield database


# ---- the API: the real app on the fresh database ----------------------------------


@pytest.fixture
def engine() -> EngineLike:
    """The engine the app hands changes to; tests of the API alone use none (a test
    module overrides it with a running engine, or a recorder of the verb)."""
    return None


@pytest.fixture
def deps(db: Database, engine: EngineLike) -> Dependencies:
    """The app's dependencies on a fresh database."""
    return web_deps(db, engine)


@pytest.fixture
async def client(deps: Dependencies) -> AsyncIterator[TestClientProtocol]:
    """A test client of the real app."""
    app = create_app(deps)
    async with app.test_app() as test_app:
        yield test_app.test_client()


@pytest.fixture
def make_token(db: Database) -> MakeToken:
    """``await make_token(account="acme", permissions=[...], expires_in=None)``: a JWT for
    a new token record (the account is created and pinned on its first token)."""

    async def make(
        account: str = "acme",
        permissions: list[str] | None = None,
        expires_in: int | None = None,
    ) -> str:
        return (await mint_token(db, account, permissions, expires_in))[1]

    return make


@pytest.fixture
async def api(client: TestClientProtocol, make_token: MakeToken) -> Api:
    """A client with every permission on account ``acme``."""
    return Api(client, await make_token())


@pytest.fixture
def api_for(client: TestClientProtocol, make_token: MakeToken) -> Callable[..., Awaitable[Api]]:
    """``await api_for(account="other", permissions=[...])``: a client for another token."""

    async def make(account: str = "acme", permissions: list[str] | None = None) -> Api:
        return Api(client, await make_token(account=account, permissions=permissions))

    return make
