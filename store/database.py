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
    asyncpg.AdminShutdownError,
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
    """

    def __init__(self, pool: Any, url: str) -> None:
        self._pool = pool
        self.url = url

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
            try:
                async with self._pool.acquire() as connection:
                    if not in_transaction:
                        return await fn(connection, *args, **kwargs)
                    async with connection.transaction():
                        return await fn(connection, *args, **kwargs)
            except Exception as exc:
                translated = _translate(exc)
                if translated is None:
                    raise
                raise translated from exc

        result: T = await trio_asyncio.aio_as_trio(on_asyncio)()
        return result


@asynccontextmanager
async def open_database(
    url: str, *, min_size: int = 2, max_size: int = 10, command_timeout_seconds: float = 30.0
) -> AsyncIterator[Database]:
    """Open a pool of ``min_size`` to ``max_size`` connections to ``url``; close it on exit.

    Must run inside ``trio_asyncio.open_loop()``. The close is shielded from cancellation
    (as triopg does), so connections are returned even when the service is being cancelled.

    Raises:
        DatabaseUnavailable: the server could not be reached.
    """

    async def create() -> Any:
        try:
            return await asyncpg.create_pool(
                url,
                min_size=min_size,
                max_size=max_size,
                command_timeout=command_timeout_seconds,
                init=_init_connection,
            )
        except Exception as exc:
            translated = _translate(exc)
            if translated is None:
                raise
            raise translated from exc

    pool = await trio_asyncio.aio_as_trio(create)()
    try:
        yield Database(pool, url)
    finally:
        with trio.CancelScope(shield=True), trio.move_on_after(10):
            await trio_asyncio.aio_as_trio(pool.close)()
