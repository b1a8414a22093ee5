"""Hypercorn as Uptrio runs it: its settings, and its HTTP/1.1 and HTTP/2 protocols
answering in the API's error shape (docs/api.md, What the HTTP server refuses before the
API).

:func:`hypercorn_config` is the one place the web server's settings are made (the
service's tree passes the binds and its graceful-stop deadline). Beside them:

- ``keep_alive_timeout`` = :data:`KEEP_ALIVE_TIMEOUT_SECONDS` (Hypercorn's default,
  stated): a connection must deliver a complete request head within 5 s of opening or of
  its previous response, else it is closed without an answer (a head trickled byte by
  byte, slowloris, is cut off there);
- ``h11_max_incomplete_size`` = :data:`MAX_HEAD_BYTES` (16 KiB, h11's default through
  Hypercorn, stated): a longer request line and headers still incomplete is a 431. h11
  parses a head that arrived whole in one read whatever its size, and HTTP/2 heads do
  not pass through h11, so the app refuses the rest the same way (:func:`head_bytes`,
  checked by ``web.http.app`` before routing): 431 ``headers_too_large`` above 16 KiB,
  whichever protocol and however the head arrived;
- the time to read a body is bounded by the app, not the server: Quart's
  ``BODY_TIMEOUT`` (``--body-timeout-seconds``, :class:`web.http.deps.WebSettings`),
  because Hypercorn's ``read_timeout`` bounds each read, not the whole body, and would
  also close connections whose handler merely takes a while.

Some requests never reach the app: h11, the HTTP/1.1 parser under Hypercorn, refuses
what is not valid HTTP/1.1 (a NUL or other control character in a header, a malformed
or repeated Content-Length, Content-Length with chunked, an unknown Transfer-Encoding, a
byte beyond ASCII in the target, a request line that is no request line, bytes after a
body that do not form a request, a head over 16 KiB), and Hypercorn then answers by
itself with an empty body and closes. :class:`ApiH11Protocol` is Hypercorn's
``H11Protocol`` with that answer in the API's error shape, with a ``Request-Id`` (logged,
so support can find it) and ``Service-Version``: 400 ``malformed_request``, or 431
``headers_too_large``. It also refuses a method that is not in upper case (400
``invalid_method``) before the app sees it, because Hypercorn upper-cases the method it
hands to the app (``get`` would otherwise be served as ``GET``, though methods are
case-sensitive, RFC 9110, 9.1). :class:`ApiH2Protocol` does the same for HTTP/2 (h2c,
prior knowledge or ``Upgrade: h2c``), answering on the stream and resetting it, so both
protocols answer ``get`` alike.

Hypercorn has no setting for its protocol classes: :func:`install_api_protocol` puts
:class:`ApiH11Protocol` and :class:`ApiH2Protocol` where Hypercorn's ``ProtocolWrapper``
looks them up (``hypercorn.protocol.H11Protocol``, ``.H2Protocol``), for every Hypercorn
server of this process. They override private methods (``_send_error_response``,
``_create_stream``, ``_flush``) of Hypercorn 0.18; ``tests/web/test_http_layer.py``
checks the result on a live socket over both protocols, so an upgrade that moves them
fails there.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import h2.errors
import h2.events
import h11
import hypercorn.protocol
import structlog
from hypercorn.config import Config as HypercornConfig
from hypercorn.events import Closed
from hypercorn.protocol.h2 import H2Protocol
from hypercorn.protocol.h11 import H11Protocol

from store import new_id

from .errors import ApiError, error_body
from .versioning import CURRENT_VERSION
from .versioning import HEADER as VERSION_HEADER

__all__ = [
    "KEEP_ALIVE_TIMEOUT_SECONDS",
    "MAX_HEAD_BYTES",
    "ApiH2Protocol",
    "ApiH11Protocol",
    "head_bytes",
    "hypercorn_config",
    "install_api_protocol",
    "refusal",
]

log = structlog.get_logger("uptrio.web")

KEEP_ALIVE_TIMEOUT_SECONDS = 5.0
"""Longest wait for a complete request head on an idle connection, in seconds."""

MAX_HEAD_BYTES = 16 * 1024
"""Largest request line and headers h11 reads, in bytes (past it: 431)."""


def hypercorn_config(bind: Sequence[str], *, graceful_seconds: float) -> HypercornConfig:
    """The Hypercorn configuration of ``uptrio serve`` (module docstring), with
    :class:`ApiH11Protocol` installed.

    Args:
        bind: Hypercorn binds, e.g. ``["127.0.0.1:8080"]`` (port 0: the OS picks).
        graceful_seconds: how long a stopping server lets requests in flight finish,
            in seconds.
    """
    install_api_protocol()
    config = HypercornConfig()
    config.bind = list(bind)
    config.accesslog = None  # the app logs every request itself (web.process.ops)
    config.errorlog = None
    config.graceful_timeout = graceful_seconds
    config.keep_alive_timeout = KEEP_ALIVE_TIMEOUT_SECONDS
    config.h11_max_incomplete_size = MAX_HEAD_BYTES
    return config


def install_api_protocol() -> None:
    """Make Hypercorn serve HTTP/1.1 with :class:`ApiH11Protocol` and HTTP/2 with
    :class:`ApiH2Protocol`, process-wide (idempotent; see the module docstring for why
    it is done this way)."""
    hypercorn.protocol.H11Protocol = ApiH11Protocol  # type: ignore[attr-defined]
    hypercorn.protocol.H2Protocol = ApiH2Protocol  # type: ignore[attr-defined]


def head_bytes(scope: Mapping[str, Any]) -> int:
    """The size of a request's line and headers as HTTP/1.1 writes them, in bytes,
    computed from its ASGI ``scope``: h11 bounds a head only while it is incomplete (one
    that arrives whole in one read is parsed whatever its size), and HTTP/2 heads are
    not bounded by it at all, so the app measures every request the same way
    (:data:`MAX_HEAD_BYTES`)."""
    query = scope.get("query_string") or b""
    target = len(scope.get("raw_path") or b"") + (1 + len(query) if query else 0)
    line = len(scope.get("method", "")) + 1 + target + len(" HTTP/1.1\r\n")
    return line + sum(len(k) + len(v) + 4 for k, v in scope.get("headers", ())) + 2


def refusal(status_hint: int) -> ApiError:
    """The API error for a request h11 refused with ``status_hint`` (its
    ``error_status_hint``: 431 for a head too large, 501 for an unknown
    Transfer-Encoding, 400 otherwise): 431 ``headers_too_large``, else 400
    ``malformed_request`` (an unknown transfer coding is the client's error here: the
    API takes JSON bodies with a length or chunked, nothing else)."""
    if status_hint == 431:
        return ApiError(
            "headers_too_large",
            f"the request line and headers are larger than {MAX_HEAD_BYTES // 1024} KiB",
        )
    return ApiError(
        "malformed_request",
        "the request is not valid HTTP/1.1 (request line, headers, Content-Length or "
        "Transfer-Encoding); the connection is closed",
    )


class ApiH11Protocol(H11Protocol):
    """Hypercorn's HTTP/1.1 protocol whose own refusals are in the API's error shape, and
    which refuses methods that are not in upper case (module docstring)."""

    async def _send_error_response(self, status_code: int) -> None:
        """Hypercorn's hook for a request h11 refused: answer in the error shape."""
        await self._refuse(refusal(status_code))

    async def _create_stream(self, request: h11.Request) -> None:
        """Hand a parsed request to the app, unless its method is not in upper case."""
        if request.method != request.method.upper():
            await self._refuse(invalid_method(request.method, "the connection is closed"))
            await self.send(Closed())
            return
        await super()._create_stream(request)

    async def _refuse(self, error: ApiError) -> None:
        """Send ``error`` as a complete response that closes the connection."""
        headers, body = refusal_response(error, self.client)
        headers.append((b"connection", b"close"))
        headers.extend(self.config.response_headers("h11"))
        await self._send_h11_event(h11.Response(status_code=error.status, headers=headers))
        await self._send_h11_event(h11.Data(data=body))
        await self._send_h11_event(h11.EndOfMessage())


class ApiH2Protocol(H2Protocol):
    """Hypercorn's HTTP/2 protocol refusing a method that is not in upper case, as
    :class:`ApiH11Protocol` does (module docstring): Hypercorn's own would upper-case
    it for the app."""

    async def _create_stream(self, request: h2.events.RequestReceived) -> None:
        """Hand a request to the app, unless its ``:method`` is not in upper case: then
        answer it in the error shape and reset the stream if the client is still sending
        (RFC 9113, 8.1: a complete response before the request ends), so its frames are
        dropped; the connection and its other streams go on."""
        method = next((v for k, v in request.headers if k == b":method"), b"")
        if method == method.upper():
            await super()._create_stream(request)
            return
        error = invalid_method(method, "the stream is closed")
        headers, body = refusal_response(error, self.client)
        status = [(b":status", str(error.status).encode())]
        self.connection.send_headers(
            request.stream_id, status + headers + self.config.response_headers("h2")
        )
        self.connection.send_data(request.stream_id, body, end_stream=True)
        if request.stream_ended is None:
            self.connection.reset_stream(request.stream_id, h2.errors.ErrorCodes.NO_ERROR)
        await self._flush()


def invalid_method(method: bytes, then: str) -> ApiError:
    """400 ``invalid_method`` for a method that is not in upper case (RFC 9110, 9.1);
    ``then`` says what happens to the connection or stream."""
    shown = method.decode("ascii", "replace")[:20]
    return ApiError(
        "invalid_method",
        f"methods are case-sensitive (RFC 9110): {shown} is not {shown.upper()}; {then}",
    )


def refusal_response(
    error: ApiError, client: tuple[str, int] | None
) -> tuple[list[tuple[bytes, bytes]], bytes]:
    """The headers (lowercase names, no status) and body of ``error``'s answer by the
    protocol layer, with a new ``Request-Id`` that is logged (``request refused before
    the app``) so support can find it."""
    request_id = new_id("req")
    body = json.dumps(error_body(error, request_id), separators=(",", ":")).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"request-id", request_id.encode()),
        (VERSION_HEADER.lower().encode(), CURRENT_VERSION.encode()),
    ]
    log.info(
        "request refused before the app",
        request_id=request_id,
        status=error.status,
        code=error.code,
        client=client[0] if client else None,
    )
    return headers, body
