"""The trio face of the asyncpg pool: one bridge crossing per unit of work.

asyncpg runs on asyncio; Uptrio runs on trio. The bridge is trio-asyncio (an asyncio loop
opened in the root nursery with ``trio_asyncio.open_loop()``). Crossing it costs tens of
microseconds, so a unit of work crosses once: :meth:`Database.run` and
:meth:`Database.transaction` take an *asyncio* coroutine function ``fn(connection, *args)``
(the query functions of this package, in the style of tozo's ``select_todo(connection,
...)``) and run it entirely on the asyncio side with a pooled connection.

Deadlines hold whatever the server does (docs/operations.md, A database outage): a unit of
work whose deadline passes, or whose caller's cancel scope is cancelled, is abandoned at
once, its connection terminated rather than returned to the pool (:mod:`store.bridge`), so a
server that hangs (stopped, a network cut, a lock held for minutes) costs a caller its
deadline, not the hang.

Error handling: asyncpg, socket and timeout errors are translated here, once, into
:mod:`store.errors` types. Anything else raised by ``fn`` (for example a caller's validation
error raised while a patch is applied) passes through unchanged after the transaction rolled
back.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from json.scanner import make_scanner
from typing import Any, Concatenate, ParamSpec, TypeVar, cast

import asyncpg
import structlog
import trio

from .bridge import Bridge, BridgeStatistics, Work
from .errors import DatabaseUnavailable, IntegrityConflict, StoreError

log = structlog.get_logger("uptrio.store")

P = ParamSpec("P")
T = TypeVar("T")

Connection = Any
"""An ``asyncpg.Connection`` (asyncpg ships no type information)."""

_UNAVAILABLE = (
    OSError,
    ConnectionError,
    TimeoutError,
    asyncpg.InterfaceError,
    # raised by the pool itself, e.g. from pool.release when the server went away
    # mid-reset (seen during `pg_ctl stop -m fast`): the connection is gone
    asyncpg.InternalClientError,
    asyncpg.CannotConnectNowError,
    asyncpg.ConnectionFailureError,
    asyncpg.PostgresConnectionError,
    asyncpg.AdminShutdownError,
    asyncpg.CrashShutdownError,
    asyncpg.TooManyConnectionsError,
)


_scan_json: Callable[[str, int], tuple[Any, int]] = make_scanner(
    cast(Any, json.JSONDecoder())  # typeshed types make_scanner's argument as itself
)


def decode_json(text: str) -> Any:
    """``json.loads(text)``, faster on what Postgres sends for ``jsonb`` (one JSON value,
    no whitespace around it): the standard library's scanner alone, without the layers
    of ``json.loads`` around it (a fifth of the time on a small object; a page of 100
    monitors decodes several values a row). Anything else, whitespace around the value
    (a ``json`` column keeps its text as written) or text that is not JSON, goes
    through ``json.loads``: same values, same errors.

    Raises:
        json.JSONDecodeError: ``text`` is not one JSON value.
    """
    try:
        value, end = _scan_json(text, 0)
    except StopIteration:
        return json.loads(text)
    if end != len(text):
        return json.loads(text)
    return value


async def _init_connection(connection: Connection) -> None:
    """Decode ``jsonb`` and ``json`` as Python objects on every pooled connection
    (:func:`decode_json`)."""
    for name in ("jsonb", "json"):
        await connection.set_type_codec(
            name, encoder=json.dumps, decoder=decode_json, schema="pg_catalog"
        )


async def _keep_session(connection: Connection) -> None:
    """What a pooled connection's release does beyond asyncpg's own clean-up (which rolls
    back a transaction left open and forgets listeners): nothing. asyncpg's default runs
    ``SELECT pg_advisory_unlock_all(); CLOSE ALL; UNLISTEN *; RESET ALL`` on every release,
    a round trip to the server per unit of work, undoing session state that the store
    never leaves behind: its advisory locks are transaction-scoped
    (``pg_advisory_xact_lock``) but the migrations' lock, which they release themselves
    (:mod:`store.migrate`); it runs ``SET LOCAL`` only, declares no cursor, listens to
    nothing. A unit cut off midway has its connection terminated (:mod:`store.bridge`), so
    its session is never reused."""


def _translate(exc: Exception) -> StoreError | None:
    """Map an asyncpg or socket error to a store error; None for anything else."""
    if isinstance(exc, asyncpg.IntegrityConstraintViolationError):
        return IntegrityConflict(str(exc), getattr(exc, "constraint_name", None))
    if isinstance(exc, _UNAVAILABLE):
        return DatabaseUnavailable(f"database unavailable: {exc.__class__.__name__}: {exc}")
    if isinstance(exc, asyncpg.PostgresError):
        return StoreError(f"{exc.__class__.__name__}: {exc}")
    return None


class Database:
    """A pool of asyncpg connections, used from trio.

    Create one with :func:`open_database`. Thread it explicitly to whoever needs it (the
    store actor, the web handlers); there is no global pool.

    Attributes:
        url: the Postgres URL the pool connects to (it may carry a password: never log it).
        deadline_seconds: longest any one :meth:`run` or :meth:`transaction` may take,
            waiting for a pooled connection included, in seconds (None: no limit; see
            :meth:`with_deadline`); past it the work is abandoned (its connection
            terminated, so the server rolls its transaction back) and the call raises
            ``DatabaseUnavailable`` at once, whatever the server does.
    """

    def __init__(
        self,
        pool: Any,
        url: str,
        *,
        deadline_seconds: float | None = None,
        bridge: Bridge | None = None,
    ) -> None:
        self._pool = pool
        self.url = url
        self.deadline_seconds = deadline_seconds
        self._bridge = Bridge() if bridge is None else bridge

    def with_deadline(self, seconds: float) -> Database:
        """The same pool, but every :meth:`run` and :meth:`transaction` gives up after
        ``seconds`` seconds with ``DatabaseUnavailable`` (the work is abandoned and its
        connection terminated: the server rolls its transaction back). The web layer uses it
        so that a request needing a database that hangs fails within its deadline instead of
        hanging (docs/operations.md, A database outage; docs/operations.md, A database
        outage)."""
        return Database(self._pool, self.url, deadline_seconds=seconds, bridge=self._bridge)

    def statistics(self) -> BridgeStatistics:
        """Units of work abandoned and connections terminated since the pool opened
        (shared by every view of the pool)."""
        return self._bridge.statistics()

    async def run(
        self,
        fn: Callable[Concatenate[Connection, P], Awaitable[T]],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """Run asyncio coroutine ``fn(connection, *args, **kwargs)`` with a pooled connection,
        outside any explicit transaction (each statement commits on its own).

        Raises:
            DatabaseUnavailable: the server cannot be reached, the connection broke, or no
                answer within :attr:`deadline_seconds`.
            IntegrityConflict: a constraint refused a write.
            StoreError: any other database error.
        """
        return await self._bridge_call(False, fn, *args, **kwargs)

    async def transaction(
        self,
        fn: Callable[Concatenate[Connection, P], Awaitable[T]],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """Like :meth:`run`, inside one transaction: committed when ``fn`` returns, rolled
        back when it raises. A 2xx response sent after this returned is durable
        (docs/design-notes.md, Writes: "a 201 or 200 means committed")."""
        return await self._bridge_call(True, fn, *args, **kwargs)

    async def _cross(self, fn: Callable[[Work], Awaitable[T]], deadline_seconds: float | None) -> T:
        """Run ``fn(work)`` on the asyncio side through the pool's bridge, its errors
        translated into store errors (see `_translate`)."""

        async def on_asyncio(work: Work) -> T:
            try:
                return await fn(work)
            except Exception as exc:
                translated = _translate(exc)
                if translated is None:
                    raise
                raise translated from exc

        return await self._bridge.cross(on_asyncio, deadline_seconds)

    async def _bridge_call(
        self,
        in_transaction: bool,
        fn: Callable[Concatenate[Connection, P], Awaitable[T]],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        pool = self._pool

        async def on_asyncio(work: Work) -> T:
            connection = await pool.acquire()
            work.connection = connection
            try:
                if not in_transaction:
                    return await fn(connection, *args, **kwargs)
                async with connection.transaction():
                    return await fn(connection, *args, **kwargs)
            finally:
                await pool.release(connection)

        return await self._cross(on_asyncio, self.deadline_seconds)

    @asynccontextmanager
    async def open_transaction(self) -> AsyncIterator[Database]:
        """One transaction on one pooled connection, held across several bridge crossings.

        Yields a :class:`Database` bound to that connection: its :meth:`run` runs inside the
        transaction and its :meth:`transaction` becomes a savepoint, so separate units of
        work, possibly written by different code (a handler's write and the idempotency
        record of its response, :mod:`web.idempotency`), commit or roll back as one.
        Committed when the block exits normally; rolled back when it raises, cancellation
        included. The rollback and the return of the connection to the pool are shielded
        from cancellation and bounded by :attr:`deadline_seconds` (10 s when None); a
        crossing abandoned on its deadline terminates the connection, and the server
        rolls back. Calls on the bound database are serialised (one connection).

        Raises:
            DatabaseUnavailable: the server cannot be reached or the connection broke
                (also while committing), or no answer within :attr:`deadline_seconds`.
            IntegrityConflict, StoreError: as :meth:`run`, also from the commit.
        """
        pool, deadline = self._pool, self.deadline_seconds
        cleanup_seconds = _CLEANUP_SECONDS if deadline is None else deadline

        async def begin(work: Work) -> tuple[Connection, Any]:
            connection = await pool.acquire()
            work.connection = connection
            try:
                transaction = connection.transaction()
                await transaction.start()
            except BaseException:
                await pool.release(connection)
                raise
            return connection, transaction

        connection, transaction = await self._cross(begin, deadline)

        def on(method: Callable[[], Awaitable[None]]) -> Callable[[Work], Awaitable[None]]:
            async def call(work: Work) -> None:
                work.connection = connection
                await method()

            return call

        async def release(work: Work) -> None:
            await pool.release(connection)

        done = False
        try:
            yield _BoundDatabase(connection, self.url, deadline, self._bridge)
            await self._cross(on(transaction.commit), deadline)
            done = True
        finally:
            with trio.CancelScope(shield=True):
                # a broken connection cannot roll back: the server does it on its own
                with contextlib.suppress(StoreError):
                    if not done:
                        await self._cross(on(transaction.rollback), cleanup_seconds)
                with contextlib.suppress(StoreError):
                    await self._cross(release, cleanup_seconds)


_CLEANUP_SECONDS = 10.0
"""Bound of an open transaction's shielded rollback and release when its database has no
deadline, seconds."""


class _BoundDatabase(Database):
    """A :class:`Database` whose work all runs on one connection inside an open
    transaction (see :meth:`Database.open_transaction`)."""

    def __init__(
        self, connection: Connection, url: str, deadline_seconds: float | None, bridge: Bridge
    ) -> None:
        super().__init__(None, url, deadline_seconds=deadline_seconds, bridge=bridge)
        self._connection = connection
        self._lock = trio.Lock()

    async def _bridge_call(
        self,
        in_transaction: bool,
        fn: Callable[Concatenate[Connection, P], Awaitable[T]],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        connection = self._connection

        async def on_asyncio(work: Work) -> T:
            work.connection = connection
            if not in_transaction:
                return await fn(connection, *args, **kwargs)
            async with connection.transaction():  # a savepoint
                return await fn(connection, *args, **kwargs)

        async with self._lock:
            return await self._cross(on_asyncio, self.deadline_seconds)

    @asynccontextmanager
    async def open_transaction(self) -> AsyncIterator[Database]:
        """Not supported: this database is already one transaction.

        Raises:
            RuntimeError: always.
        """
        raise RuntimeError("already inside a transaction opened by open_transaction")
        yield self  # pragma: no cover (makes this an async generator)


@asynccontextmanager
async def open_database(
    url: str,
    *,
    min_size: int = 2,
    max_size: int = 10,
    deadline_seconds: float = 30.0,
    connect_timeout_seconds: float = 1.0,
    close_seconds: float = 5.0,
) -> AsyncIterator[Database]:
    """Open a pool of ``min_size`` to ``max_size`` connections to ``url``; close it on exit.

    Must run inside ``trio_asyncio.open_loop()``. The close is shielded from cancellation
    (as triopg does), so connections are returned even when the service is being cancelled.

    Timeouts, all in seconds, keep a database outage from hanging callers
    (docs/operations.md, A database outage): ``connect_timeout_seconds`` bounds opening one
    connection (asyncpg's ``timeout``, armed only when connecting); ``deadline_seconds``
    bounds opening the pool and one unit of work, waiting for a pooled connection included
    (kept on the trio side by :mod:`store.bridge`; the web layer narrows it with
    `Database.with_deadline`); ``close_seconds`` bounds the close: the pool's graceful
    close, then (if the server does not answer) its connections are terminated, then the
    units of work abandoned earlier are waited for, at most ``close_seconds`` again. A
    stopped server fails at once (the socket is refused); one that hangs within these
    bounds. The pool reconnects by itself when the server is back.

    asyncpg's own timeouts per statement or per unit of work (``command_timeout``,
    ``acquire(timeout=)``) are not used, nor its idle-connection timer
    (``max_inactive_connection_lifetime``, re-armed at every release): each arms an
    asyncio timer, and trio-asyncio keeps a cancelled timer, with the contextvars context
    of the trio task that armed it (for a web request, the whole request), until it would
    have fired: at 100 requests/s and 30 s that held about 14 KB of RSS per monitor in the
    benchmark (bench/RESULTS.md).

    A connection goes back to the pool without asyncpg's reset statement (`_keep_session`):
    that is a round trip to the server after every unit of work, as many as the unit's own
    for a one-row read.

    Raises:
        DatabaseUnavailable: the server could not be reached.
    """
    bridge = Bridge()
    setup = Database(None, url, bridge=bridge)

    async def create(work: Work) -> Any:
        return await asyncpg.create_pool(
            url,
            min_size=min_size,
            max_size=max_size,
            timeout=connect_timeout_seconds,
            # No idle-connection timer: asyncpg re-arms it at every release (see above
            # for why a timer per unit of work costs memory here).
            max_inactive_connection_lifetime=0,
            init=_init_connection,
            reset=_keep_session,
        )

    pool = await setup._cross(create, deadline_seconds)

    async def close(work: Work) -> None:
        await pool.close()  # cancelled (abandoned): asyncpg terminates every connection

    try:
        yield Database(pool, url, deadline_seconds=deadline_seconds, bridge=bridge)
    finally:
        with trio.CancelScope(shield=True):
            try:
                await setup._cross(close, close_seconds)
            except StoreError as exc:
                pool.terminate()  # at once, not at the abandoned close's next step
                log.warning("database pool terminated", error=str(exc))
            await bridge.aclose(close_seconds)
