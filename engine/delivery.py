"""The webhook sender's HTTP client: httpcore's connection pool (HTTP/1.1, keep-alive)
on a network backend that connects only where the target policy allows.

Why a backend of our own: the pool would otherwise resolve the url's host itself, so a
name checked when the endpoint was saved could point anywhere by the time a delivery is
sent (DNS rebinding). :class:`PolicyBackend` resolves the host once per new connection
(``engine.probes`` ``resolve``: IP literals without a look-up, names through
getaddrinfo), drops every address the policy refuses, and connects to exactly one of the
checked addresses (happy eyeballs over them); TLS still verifies the certificate against
the url's host name and sends it as SNI (httpcore passes the origin's host to
``start_tls``). A connection kept alive was checked when it opened. Metadata host names
(``metadata.google.internal``...) are refused before any look-up.

Redirects are never followed (httpcore does not follow them): a 3xx is a failed attempt.

``ProbeFailure`` and the resolution and connect helpers are the probes' (`engine.probes`),
shared so that both paths judge addresses the same way; they never leave this module.

Error handling: :meth:`DeliveryClient.post` never raises for what the receiver or the
network does; it returns an :class:`Answer` whose ``error`` is a check error code of
``engine.probes`` (``timeout``, ``connection_refused``, ``connection_reset``,
``connection_failed``, ``unreachable``, ``dns_failure``, ``tls_error``,
``protocol_error``, ``target_denied``) or ``unexpected_status`` for an answer that is not
2xx. ``trio.Cancelled`` passes untouched.
"""

from __future__ import annotations

import select
import ssl
import time
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpcore
import trio

from .policy import TargetPolicy
from .probes._result import ProbeFailure
from .probes._tcp import connect, os_failure, resolve

__all__ = ["Answer", "DeliveryClient", "PolicyBackend", "open_delivery_client"]

RESPONSE_LIMIT_BYTES = 64 * 1024
"""Bytes of a receiver's response body read at most (and dropped); past it the
connection is closed instead of kept alive."""

KEEPALIVE_SECONDS = 30.0
"""How long an idle connection to a receiver is kept for the next delivery, seconds."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Answer:
    """The outcome of one POST.

    Attributes:
        status: the HTTP status, or None when no response came.
        error: None for a 2xx; else an error code (module docstring).
        message: a sentence for the logs, or None.
        duration_ms: from the start of the attempt to its end, milliseconds.
    """

    status: int | None
    error: str | None
    message: str | None
    duration_ms: float

    @property
    def ok(self) -> bool:
        """True for a 2xx answer in time."""
        return self.error is None


class _Stream(httpcore.AsyncNetworkStream):
    """A trio stream as httpcore's network stream (plain TCP, or TLS after
    :meth:`start_tls`). Errors become httpcore's, with the original as ``__cause__``.
    The ``timeout`` parameters are httpcore's interface (seconds, None: none)."""

    def __init__(self, stream: trio.SocketStream | trio.SSLStream[trio.SocketStream]) -> None:
        self._stream = stream

    def _socket(self) -> trio.socket.SocketType:
        inner = self._stream
        while isinstance(inner, trio.SSLStream):
            inner = inner.transport_stream
        assert isinstance(inner, trio.SocketStream)
        return inner.socket

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:  # noqa: ASYNC109
        with trio.move_on_after(float("inf") if timeout is None else timeout) as scope:
            try:
                return bytes(await self._stream.receive_some(max_bytes))
            except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                raise httpcore.ReadError(str(exc)) from exc
        assert scope.cancelled_caught
        raise httpcore.ReadTimeout("read timed out")

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:  # noqa: ASYNC109
        if not buffer:
            return
        with trio.move_on_after(float("inf") if timeout is None else timeout) as scope:
            try:
                await self._stream.send_all(buffer)
                return
            except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                raise httpcore.WriteError(str(exc)) from exc
        assert scope.cancelled_caught
        raise httpcore.WriteTimeout("write timed out")

    async def aclose(self) -> None:
        await trio.aclose_forcefully(self._stream)

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's signature)
    ) -> httpcore.AsyncNetworkStream:
        assert isinstance(self._stream, trio.SocketStream)
        tls = trio.SSLStream(
            self._stream, ssl_context, server_hostname=server_hostname, https_compatible=True
        )
        try:
            with trio.fail_after(float("inf") if timeout is None else timeout):
                await tls.do_handshake()
        except trio.TooSlowError:
            await self.aclose()
            raise httpcore.ConnectTimeout("TLS handshake timed out") from None
        except trio.BrokenResourceError as exc:
            await self.aclose()
            raise httpcore.ConnectError(f"TLS handshake failed: {exc.__cause__ or exc}") from exc
        return _Stream(tls)

    def get_extra_info(self, info: str) -> Any:
        if info == "ssl_object":
            return self._stream.ssl_object if isinstance(self._stream, trio.SSLStream) else None
        if info == "is_readable":  # an idle kept-alive connection the receiver closed
            readable, _, _ = select.select([self._socket()], [], [], 0)
            return bool(readable)
        if info == "client_addr":
            return self._socket().getsockname()
        if info == "server_addr":
            return self._socket().getpeername()
        return None


class PolicyBackend(httpcore.AsyncNetworkBackend):
    """httpcore's network backend that connects only to addresses ``policy`` accepts
    (module docstring).

    Raises (from :meth:`connect_tcp`):
        ProbeFailure: ``target_denied`` (every address, or the host name, refused),
            ``dns_failure``, or a connection error (``connection_refused``, ...).
    """

    def __init__(self, policy: TargetPolicy) -> None:
        self._policy = policy

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's signature)
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        """Resolve ``host`` once, drop refused addresses, connect to a checked one
        (within ``timeout`` seconds once resolved; None: no limit of its own)."""
        reason = self._policy.check_host_name(host)
        if reason is not None:
            raise ProbeFailure("target_denied", f"{host} is {reason}")
        addresses = await resolve(host, port, self._policy)
        with trio.move_on_after(float("inf") if timeout is None else timeout) as scope:
            return _Stream(trio.SocketStream(await connect(addresses)))
        assert scope.cancelled_caught
        raise ProbeFailure("timeout", f"connection to {host}:{port} timed out")

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's signature)
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        """Always refused: a webhook url is http(s) over TCP."""
        raise ProbeFailure("target_denied", "unix sockets are not webhook targets")

    async def sleep(self, seconds: float) -> None:
        """httpcore's pause between retries (the pool is made with none), seconds."""
        await trio.sleep(seconds)


class DeliveryClient:
    """POSTs deliveries through one keep-alive pool (make it with
    :func:`open_delivery_client`)."""

    def __init__(self, pool: httpcore.AsyncConnectionPool) -> None:
        self._pool = pool

    async def post(
        self,
        url: str,
        body: bytes,
        headers: Sequence[tuple[str, str]],
        *,
        timeout_seconds: float,
    ) -> Answer:
        """POST ``body`` to ``url`` with ``headers``; the whole exchange (resolution,
        connect, TLS, request, response head and up to :data:`RESPONSE_LIMIT_BYTES` of
        body) must end within ``timeout_seconds`` seconds, whatever the receiver does
        (a ``trio`` deadline around it all, not only socket timeouts).

        Returns:
            an :class:`Answer`; never raises for the receiver's or the network's doing.
        """
        started = time.perf_counter()
        status: int | None = None
        error: str | None = None
        message: str | None = None
        phase = {p: timeout_seconds for p in ("connect", "read", "write", "pool")}
        try:
            with trio.fail_after(timeout_seconds):
                async with self._pool.stream(
                    "POST", url, headers=list(headers), content=body, extensions={"timeout": phase}
                ) as response:
                    status = response.status
                    received = 0
                    async for chunk in response.aiter_stream():
                        received += len(chunk)
                        if received >= RESPONSE_LIMIT_BYTES:
                            break
        except trio.TooSlowError:
            error, message = "timeout", f"no complete answer within {timeout_seconds} s"
        except ProbeFailure as exc:
            error, message = exc.code, exc.message
        except httpcore.TimeoutException as exc:
            error, message = "timeout", str(exc) or type(exc).__name__
        except (httpcore.NetworkError, httpcore.ProtocolError) as exc:
            error, message = _translate(exc)
        except httpcore.UnsupportedProtocol as exc:
            error, message = "protocol_error", str(exc)
        if error is None and status is not None and not 200 <= status < 300:
            error, message = "unexpected_status", f"answered {status}, not 2xx"
        duration_ms = (time.perf_counter() - started) * 1000.0
        return Answer(status=status, error=error, message=message, duration_ms=duration_ms)


def _translate(exc: httpcore.NetworkError | httpcore.ProtocolError) -> tuple[str, str]:
    """An httpcore error as (error code, message), by its cause where it has one."""
    cause = exc.__cause__
    while isinstance(cause, trio.BrokenResourceError) and cause.__cause__ is not None:
        cause = cause.__cause__
    if isinstance(cause, ssl.SSLError):
        return "tls_error", f"TLS failed: {getattr(cause, 'verify_message', None) or cause}"
    if isinstance(exc, httpcore.ConnectError) and "TLS" in str(exc):
        return "tls_error", str(exc)
    if isinstance(cause, OSError):
        failure = os_failure(cause, "the receiver")
        return failure.code, failure.message
    if isinstance(exc, httpcore.ProtocolError):
        return "protocol_error", str(exc) or type(exc).__name__
    return "connection_reset", str(exc) or type(exc).__name__


@asynccontextmanager
async def open_delivery_client(
    policy: TargetPolicy,
    *,
    max_connections: int,
    ssl_context: ssl.SSLContext | None = None,
) -> AsyncIterator[DeliveryClient]:
    """A :class:`DeliveryClient` whose pool holds at most ``max_connections``
    connections (idle ones kept :data:`KEEPALIVE_SECONDS`), closed on exit.
    ``ssl_context`` verifies https receivers (default: the system's CAs, host names
    checked); tests pass their own."""
    pool = httpcore.AsyncConnectionPool(
        ssl_context=ssl_context if ssl_context is not None else ssl.create_default_context(),
        max_connections=max_connections,
        max_keepalive_connections=max_connections,
        keepalive_expiry=KEEPALIVE_SECONDS,
        http1=True,
        http2=False,
        retries=0,
        network_backend=PolicyBackend(policy),
    )
    try:
        yield DeliveryClient(pool)
    finally:
        with trio.CancelScope(shield=True), trio.move_on_after(1):
            await pool.aclose()
