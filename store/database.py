"""The trio face of the asyncpg pool: one bridge crossing per unit of work.

asyncpg runs on asyncio; Uptrio runs on trio. The bridge is trio-asyncio (an asyncio loop
opened in the root nursery with ``trio_asyncio.open_loop()``). Crossing it costs tens of
microseconds, so a unit of work crosses once: :meth:`Database.run` and
:meth:`Database.transaction` take an *asyncio* coroutine function ``fn(connection, *args)``
(the query functions of this package, in the style of tozo's ``select_todo(connection,
...)``) and run it entirely on the asyncio side with a pooled connection.

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
from typing import Any, Concatenate, ParamSpec, TypeVar

import asyncpg
import trio
import trio_asyncio

from .errors import DatabaseUnavailable, IntegrityConflict, StoreError

P = ParamSpec("P")
T = TypeVar("T")

Connection = Any
"""An ``asyncpg.Connection`` (asyncpg ships no type information)."""

_UNAVAILABLE = (
    OSError,
    ConnectionError,
    TimeoutError,
    asyncpg.InterfaceError,
    asyncpg.CannotConnectNowError,
    asyncpg.ConnectionFailureError,
    asyncpg.PostgresConnectionError,
    asyncpg.AdminShutdownError,
    asyncpg.CrashShutdownError,
    asyncpg.TooManyConnectionsError,
)


async def _init_connection(connection: Connection) -> None:
    """Decode ``jsonb`` and ``json`` as Python objects on every pooled connection."""
    for name in ("jsonb", "json"):
        await connection.set_type_codec(
            name, encoder=json.dumps, decoder=json.loads, schema="pg_catalog"
        )


def _translate(exc: Exception) -> StoreError | None:
    """Map an asyncpg or socket error to a store error; None for anything else."""
    if isinstance(exc, asyncpg.IntegrityConstraintViolationError):
        return IntegrityConflict(str(exc))
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
            :meth:`with_deadline`); past it the work is cancelled, its transaction rolled
            back, and the call raises ``DatabaseUnavailable``.
    """

    def __init__(self, pool: Any, url: str, *, deadline_seconds: float | None = None) -> None:
        self._pool = pool
        self.url = url
        self.deadline_seconds = deadline_seconds

    def with_deadline(self, seconds: float) -> Database:
        """The same pool, but every :meth:`run` and :meth:`transaction` gives up after
        ``seconds`` seconds with ``DatabaseUnavailable`` (the work is cancelled and its
        transaction rolled back). The web layer uses it so that a request needing a
        database that hangs fails fast instead of hanging (operations issue, item 5)."""
        return Database(self._pool, self.url, deadline_seconds=seconds)

    async def run(
        self,
        fn: Callable[Concatenate[Connection, P], Awaitable[T]],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """Run asyncio coroutine ``fn(connection, *args, **kwargs)`` with a pooled connection,
        outside any explicit transaction (each statement commits on its own).

        Raises:
            DatabaseUnavailable: the server cannot be reached or the connection broke.
            IntegrityConflict: a constraint refused a write.
            StoreError: any other database error.
        """
        return await self._bridge(False, fn, *args, **kwargs)

    async def transaction(
        self,
        fn: Callable[Concatenate[Connection, P], Awaitable[T]],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """Like :meth:`run`, inside one transaction: committed when ``fn`` returns, rolled
        back when it raises. A 2xx response sent after this returned is durable (DESIGN:
        "a 201 or 200 means committed")."""
        return await self._bridge(True, fn, *args, **kwargs)

    async def _bridge(
        self,
        in_transaction: bool,
        fn: Callable[Concatenate[Connection, P], Awaitable[T]],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        async def on_asyncio() -> T:
            async with self._pool.acquire() as connection:
                if not in_transaction:
                    return await fn(connection, *args, **kwargs)
                async with connection.transaction():
                    return await fn(connection, *args, **kwargs)

        return await _crossing(on_asyncio, self.deadline_seconds)

    @asynccontextmanager
    async def open_transaction(self) -> AsyncIterator[Database]:
        """One transaction on one pooled connection, held across several bridge crossings.

        Yields a :class:`Database` bound to that connection: its :meth:`run` runs inside the
        transaction and its :meth:`transaction` becomes a savepoint, so separate units of
        work, possibly written by different code (a handler's write and the idempotency
        record of its response, :mod:`web.idempotency`), commit or roll back as one.
        Committed when the block exits normally; rolled back when it raises, cancellation
        included. The rollback and the return of the connection to the pool are shielded
        from cancellation. Calls on the bound database are serialised (one connection).

        Raises:
            DatabaseUnavailable: the server cannot be reached or the connection broke
                (also while committing).
            IntegrityConflict, StoreError: as :meth:`run`, also from the commit.
        """
        pool = self._pool

        async def begin() -> tuple[Connection, Any]:
            connection = await pool.acquire()
            try:
                transaction = connection.transaction()
                await transaction.start()
            except BaseException:
                await pool.release(connection)
                raise
            return connection, transaction

        connection, transaction = await _crossing(begin, self.deadline_seconds)
        done = False
        try:
            yield _BoundDatabase(connection, self.url, self.deadline_seconds)
            await _crossing(transaction.commit, self.deadline_seconds)
            done = True
        finally:
            with trio.CancelScope(shield=True):
                if not done:
                    # a broken connection cannot roll back: the server does it on its own
                    with contextlib.suppress(StoreError):
                        await _crossing(transaction.rollback, self.deadline_seconds)
                await trio_asyncio.aio_as_trio(pool.release)(connection)


class _BoundDatabase(Database):
    """A :class:`Database` whose work all runs on one connection inside an open
    transaction (see :meth:`Database.open_transaction`)."""

    def __init__(self, connection: Connection, url: str, deadline_seconds: float | None) -> None:
        super().__init__(None, url, deadline_seconds=deadline_seconds)
        self._connection = connection
        self._lock = trio.Lock()

    async def _bridge(
        self,
        in_transaction: bool,
        fn: Callable[Concatenate[Connection, P], Awaitable[T]],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        connection = self._connection

        async def on_asyncio() -> T:
            if not in_transaction:
                return await fn(connection, *args, **kwargs)
            async with connection.transaction():  # a savepoint
                return await fn(connection, *args, **kwargs)

        async with self._lock:
            return await _crossing(on_asyncio, self.deadline_seconds)

    @asynccontextmanager
    async def open_transaction(self) -> AsyncIterator[Database]:
        """Not supported: this database is already one transaction.

        Raises:
            RuntimeError: always.
        """
        raise RuntimeError("already inside a transaction opened by open_transaction")
        yield self  # pragma: no cover (makes this an async generator)


async def _crossing(fn: Callable[[], Awaitable[T]], deadline_seconds: float | None) -> T:
    """Run asyncio coroutine function ``fn`` across the bridge, translating its errors.

    The deadline (seconds, None for none) is kept on the trio side: cancelling the trio
    call cancels the asyncio task and waits for it to finish (trio-asyncio's
    ``run_aio_future``), so a timed-out transaction is rolled back before this raises.
    asyncpg's own timeouts (``command_timeout``, ``acquire(timeout=)``) are not used,
    nor its idle-connection timer (``max_inactive_connection_lifetime``, re-armed at every
    release): each arms an asyncio timer per statement or per unit of work, and
    trio-asyncio keeps a cancelled timer,
    with the contextvars context of the trio task that armed it (for a web request, the
    whole request), until it would have fired: at 100 requests/s and 30 s that held
    about 14 KB of RSS per monitor in the benchmark (bench/RESULTS.md).

    Raises:
        DatabaseUnavailable: no answer within ``deadline_seconds``, or as `_translate`.
        IntegrityConflict, StoreError: as `_translate`.
    """

    async def on_asyncio() -> T:
        try:
            return await fn()
        except Exception as exc:
            translated = _translate(exc)
            if translated is None:
                raise
            raise translated from exc

    if deadline_seconds is None:
        result: T = await trio_asyncio.aio_as_trio(on_asyncio)()
        return result
    with trio.move_on_after(deadline_seconds):
        bounded: T = await trio_asyncio.aio_as_trio(on_asyncio)()
        return bounded
    raise DatabaseUnavailable(f"no answer from the database within {deadline_seconds} s")


@asynccontextmanager
async def open_database(
    url: str,
    *,
    min_size: int = 2,
    max_size: int = 10,
    deadline_seconds: float = 30.0,
    connect_timeout_seconds: float = 1.0,
) -> AsyncIterator[Database]:
    """Open a pool of ``min_size`` to ``max_size`` connections to ``url``; close it on exit.

    Must run inside ``trio_asyncio.open_loop()``. The close is shielded from cancellation
    (as triopg does), so connections are returned even when the service is being cancelled.

    Timeouts, all in seconds, keep a database outage from hanging callers (operations
    issue, item 5): ``connect_timeout_seconds`` bounds opening one connection (asyncpg's
    ``timeout``, armed only when connecting) and ``deadline_seconds`` bounds one unit of
    work, waiting for a pooled connection included (kept on the trio side, see
    `_crossing`; the web layer narrows it with `Database.with_deadline`). A stopped server
    fails at once (the socket is refused); a hung one within these bounds. The pool
    reconnects by itself when the server is back.

    Raises:
        DatabaseUnavailable: the server could not be reached.
    """

    async def create() -> Any:
        try:
            return await asyncpg.create_pool(
                url,
                min_size=min_size,
                max_size=max_size,
                timeout=connect_timeout_seconds,
                # No idle-connection timer: asyncpg re-arms it at every release (see
                # `_crossing` for why a timer per unit of work costs memory here).
                max_inactive_connection_lifetime=0,
                init=_init_connection,
            )
        except Exception as exc:
            translated = _translate(exc)
            if translated is None:
                raise
            raise translated from exc

    pool = await trio_asyncio.aio_as_trio(create)()
    try:
        yield Database(pool, url, deadline_seconds=deadline_seconds)
    finally:
        with trio.CancelScope(shield=True), trio.move_on_after(10):
            await trio_asyncio.aio_as_trio(pool.close)()
