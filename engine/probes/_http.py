"""The ``http`` probe: a lean HTTP/1.1 client, h11 on trio sockets and trio.SSLStream.

Why not httpx: httpx costs about 0.5 CPU ms per GET, and the engine's budget is
0.3 CPU ms per check for the whole service at 1,000 checks/s (DESIGN.md, "Facts
measured"); ``bench/probe_micro.py`` compares the two (about 0.15 against 0.57 CPU ms
per check on loopback, before the fast path below). A check needs little of a general
client: one request on a fresh connection, the status, a bounded body read. What keeps
it cheap: the parsed URL and the request bytes (serialised by h11) are cached per (url,
method), IP literals skip getaddrinfo, plain http to one address is spoken on a
non-blocking socket with `trio.lowlevel` waits (`_exchange_plain`), https goes through
`trio.SSLStream`, and the common response head is parsed without h11, which stays the
judge of everything else (`_read_response`).

One check, hop by hop:

1. The URL is parsed (`engine.targets.parse_target`) and the host resolved and
   checked against the address policy (`._tcp.resolve`); the connection goes to exactly
   the address that was checked, so a second DNS answer cannot redirect it.
2. A new TCP connection (never reused between checks; the request says
   ``Connection: close``), then for https a TLS handshake verified by the shared
   `ssl.SSLContext` with the URL's host as server name (SNI and certificate check).
3. One request: the monitor's method, ``Host``, ``User-Agent``, ``Accept: */*``,
   ``Connection: close``, and ``Content-Length: 0`` for POST, PUT and PATCH. No body.
4. The response head, then the body up to `BODY_LIMIT_BYTES` (read and dropped, so the
   target sees a normal client); the connection is closed without waiting for the peer.
5. A 301, 302, 303, 307 or 308 with a ``Location`` is followed, relative locations
   resolved against the current URL, at most `MAX_REDIRECTS` times (one more redirect
   is ``too_many_redirects``). 303, and 302 except for HEAD, continue with GET; 301
   turns POST into GET (what browsers and httpx do). A redirect is not followed when
   its status *is* ``expected_status_code``: the monitor then checks the redirect.

Up: the final status equals ``expected_status_code``, or is 2xx when that is ``None``.

Response time: from just before the first connection attempt (after the first name
resolution) to the end of reading the final response, in milliseconds; later redirect
hops, their resolution included, count in full.

Error handling: returns a `ProbeResult` for every final response (ok,
``unexpected_status``, ``too_many_redirects``); raises `ProbeFailure` for everything
else (``tls_error``, ``protocol_error``, connection errors, ``dns_failure``,
``target_denied``, ``invalid_target``); lets `trio.Cancelled` through untouched.
"""

from __future__ import annotations

import errno
import functools
import os
import re
import socket
import ssl
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from urllib.parse import quote, urljoin, urlsplit

import h11
import trio

from engine.targets import parse_target

from ._result import ProbeFailure, ProbeResult
from ._tcp import Address, AddressPolicy, connect, describe, os_failure, resolve

__all__ = ["BODY_LIMIT_BYTES", "MAX_REDIRECTS", "USER_AGENT", "probe_http"]

MAX_REDIRECTS = 10
"""Redirects followed in one check; the next one fails it with ``too_many_redirects``."""

BODY_LIMIT_BYTES = 64 * 1024
"""Bytes of response body read at most; the connection is closed after that."""

USER_AGENT = "Uptrio/0.1 (uptime monitor)"
"""The ``User-Agent`` every http check sends."""

_RECEIVE_BYTES = 64 * 1024
_MAX_HEAD_BYTES = 64 * 1024
_REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
_PATH_SAFE = "/%:@!$&'()*+,;=-._~"
_QUERY_SAFE = _PATH_SAFE + "?"


@dataclass(frozen=True, slots=True)
class _Prepared:
    """What one (URL, method) needs on the wire, computed once (`_prepare` is cached)."""

    host: str
    port: int
    https: bool
    request: h11.Request
    wire: bytes
    """The request as sent: ``request`` serialised by h11, once."""


_END = h11.EndOfMessage()


@functools.lru_cache(maxsize=16_384)
def _prepare(url: str, method: str) -> _Prepared:
    """Parse ``url`` and build its validated h11 request (events are immutable, so the
    request is built once and sent by every check).

    Raises:
        InvalidTarget: ``url`` is not an http(s) URL.
        UnicodeError: the path holds characters UTF-8 cannot encode (lone surrogates).
        h11.LocalProtocolError: ``method`` is not a valid HTTP method token.
    """
    target = parse_target("http", url)
    assert target.port is not None
    parts = urlsplit(url)
    request_target = quote(parts.path or "/", safe=_PATH_SAFE)
    if parts.query:
        request_target += "?" + quote(parts.query, safe=_QUERY_SAFE)
    https = target.scheme == "https"
    host_header = f"[{target.host}]" if ":" in target.host else target.host
    if target.port != (443 if https else 80):
        host_header += f":{target.port}"
    headers = [
        (b"Host", host_header.encode("ascii")),
        (b"User-Agent", USER_AGENT.encode("ascii")),
        (b"Accept", b"*/*"),
        (b"Connection", b"close"),
    ]
    if method in _BODY_METHODS:
        headers.append((b"Content-Length", b"0"))
    request = h11.Request(method=method, target=request_target.encode("ascii"), headers=headers)
    return _Prepared(
        host=target.host, port=target.port, https=https, request=request, wire=_serialise(request)
    )


def _serialise(request: h11.Request) -> bytes:
    """``request`` and its end, as h11 puts them on the wire."""
    conn = h11.Connection(h11.CLIENT)
    head, end = conn.send(request), conn.send(_END)
    assert head is not None and end is not None
    return head + end


async def probe_http(
    url: str,
    *,
    method: str | None,
    expected_status_code: int | None,
    ssl_context: ssl.SSLContext,
    policy: AddressPolicy | None,
) -> ProbeResult:
    """Run one http check of ``url`` (see the module docstring for the rules).

    Args:
        url: an http(s) URL as `engine.targets.parse_target` accepts it.
        method: the request method; ``None`` means GET.
        expected_status_code: the status that counts as up; ``None`` means any 2xx.
        ssl_context: verifies https servers; shared by every check.
        policy: the address policy applied to every hop, or ``None``.

    Returns:
        A `ProbeResult` for the final response: ok, ``unexpected_status`` or
        ``too_many_redirects``, with ``status_code`` and ``response_time_ms``.

    Raises:
        ProbeFailure: when no usable final response arrives (module docstring).
    """
    method = method or "GET"
    started: float | None = None
    for hops in range(MAX_REDIRECTS + 1):
        try:
            plan = _prepare(url, method)
        except ValueError as exc:  # InvalidTarget, or a path that cannot be encoded
            if hops == 0:
                raise ProbeFailure("invalid_target", str(exc)) from None
            raise ProbeFailure("protocol_error", f"redirect to an unusable URL: {exc}") from None
        except h11.LocalProtocolError as exc:
            raise ProbeFailure("invalid_target", f"cannot send this request: {exc}") from None
        addresses = await resolve(plan.host, plan.port, policy)
        if started is None:
            started = time.perf_counter()
        status, location = await _exchange(plan, addresses, ssl_context)
        if status in _REDIRECT_STATUSES and location is not None and status != expected_status_code:
            if hops == MAX_REDIRECTS:
                return ProbeResult(
                    ok=False,
                    response_time_ms=(time.perf_counter() - started) * 1000.0,
                    status_code=status,
                    error_code="too_many_redirects",
                    error_message=f"more than {MAX_REDIRECTS} redirects (the last to {location})",
                )
            url = urljoin(url, location)
            if (status in (302, 303) and method != "HEAD") or (status == 301 and method == "POST"):
                method = "GET"
            continue
        elapsed_ms = (time.perf_counter() - started) * 1000.0
        if expected_status_code is None:
            ok = 200 <= status < 300
            wanted = "a 2xx status"
        else:
            ok = status == expected_status_code
            wanted = f"status {expected_status_code}"
        if ok:
            return ProbeResult(
                ok=True,
                response_time_ms=elapsed_ms,
                status_code=status,
                error_code=None,
                error_message=None,
            )
        return ProbeResult(
            ok=False,
            response_time_ms=elapsed_ms,
            status_code=status,
            error_code="unexpected_status",
            error_message=f"expected {wanted}, got {status}",
        )
    raise AssertionError("unreachable: the loop returns on its last hop")


async def _exchange(
    plan: _Prepared, addresses: list[Address], ctx: ssl.SSLContext
) -> tuple[int, str | None]:
    """One request and response on a new connection: (status, Location or None).

    Plain http to a single address (an IP literal, most hosts) takes `_exchange_plain`;
    plain http racing several addresses talks to the trio socket directly (a
    `trio.SocketStream` around it costs CPU the check does not need); https goes through
    `trio.SSLStream`.
    """
    if not plan.https and len(addresses) == 1:
        return await _exchange_plain(plan, addresses[0])
    sock = await connect(addresses)
    where = describe(addresses[0]) if len(addresses) == 1 else plan.host
    if not plan.https:
        try:
            await _send_all(sock, plan.wire)
            return await _read_response(sock.recv, plan.request, where)
        except OSError as exc:
            raise os_failure(exc, where) from None
        finally:
            sock.close()
    stream = trio.SSLStream(
        trio.SocketStream(sock), ctx, server_hostname=plan.host, https_compatible=True
    )
    try:
        try:
            await stream.do_handshake()
        except trio.BrokenResourceError as exc:
            raise _broken(exc, where, handshake=True) from None
        try:
            await stream.send_all(plan.wire)
            return await _read_response(stream.receive_some, plan.request, where)
        except trio.BrokenResourceError as exc:
            raise _broken(exc, where, handshake=False) from None
    finally:
        await trio.aclose_forcefully(stream)


async def _exchange_plain(plan: _Prepared, address: Address) -> tuple[int, str | None]:
    """Plain http to one address on a non-blocking stdlib socket, waiting through
    `trio.lowlevel` only where the kernel would block (the connect, the response).

    Why not a trio socket: its methods go round the scheduler once more after every call
    that succeeds at once (the send), raise and catch ``BlockingIOError`` for every call
    that must wait (the connect, the first read), and re-check the address on connect.
    The socket is the same: same address, same errors (`os_failure`), closed on every
    exit, cancellation included.
    """
    where = describe(address)
    family, sockaddr = address
    try:  # created non-blocking: one system call fewer than setblocking(False)
        sock = socket.socket(family, socket.SOCK_STREAM | socket.SOCK_NONBLOCK)
    except OSError as exc:  # out of file descriptors, address family unsupported
        raise os_failure(exc, where) from None
    try:
        await trio.lowlevel.checkpoint_if_cancelled()
        error = sock.connect_ex(sockaddr)
        if error not in (0, errno.EINPROGRESS):
            raise OSError(error, os.strerror(error))  # the errno's own OSError subclass
        # Send at once: a connection that is already up (on loopback the kernel finishes
        # the handshake inside connect) takes the request without a wait for writability;
        # one still connecting says EAGAIN, and a refused one its error, as connect would.
        view = memoryview(plan.wire)
        while view:
            try:
                view = view[sock.send(view) :]
            except BlockingIOError:
                await trio.lowlevel.wait_writable(sock)
                error = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if error:
                    raise OSError(error, os.strerror(error)) from None
        first = True

        async def receive(size: int) -> bytes:
            nonlocal first
            if first:  # the answer takes a moment: wait before the first read
                first = False
                await trio.lowlevel.wait_readable(sock)
            while True:
                try:
                    return sock.recv(size)
                except BlockingIOError:
                    await trio.lowlevel.wait_readable(sock)

        return await _read_response(receive, plan.request, where)
    except OSError as exc:
        raise os_failure(exc, where) from None
    finally:
        trio.lowlevel.notify_closing(sock)
        sock.close()


async def _send_all(sock: trio.socket.SocketType, data: bytes) -> None:
    view = memoryview(data)
    while view:
        sent = await sock.send(view)
        view = view[sent:]


Receive = Callable[[int], Awaitable[bytes | bytearray]]
"""Reads up to n bytes; empty at the end of the stream (a socket's ``recv``)."""


async def _read_response(
    receive: Receive, request: h11.Request, where: str
) -> tuple[int, str | None]:
    """Read the response to ``request`` from ``receive``: its head, then up to
    `BODY_LIMIT_BYTES` of body (read and dropped). Returns (status, Location or None).

    The common response (a complete head in the first read, no ``Transfer-Encoding``,
    nothing unusual) is parsed by `_simple_head`; everything else, or anything it does
    not recognise, goes to h11 with the bytes read so far (`_read_with_h11`). h11 stays
    the judge of HTTP/1.1: `_simple_head` only answers where h11 gives the same answer
    (tests/engine/test_http_head.py checks this on generated responses), and is there
    because h11 cost about 0.06 CPU ms of a 0.45 ms check at 1,000 checks/s (its
    connection, state machine and events for every check; bench/RESULTS.md).

    Raises:
        ProbeFailure: ``protocol_error`` for a response h11 refuses, a connection closed
            before a complete response, or a body shorter than its ``Content-Length``.
        OSError, trio.BrokenResourceError: from ``receive``.
    """
    data = bytes(await receive(_RECEIVE_BYTES))
    head = _simple_head(data, request.method)
    if head is None:
        return await _read_with_h11(receive, request, data, where)
    status, location, length, body_bytes = head
    while body_bytes < BODY_LIMIT_BYTES and (length is None or body_bytes < length):
        chunk = await receive(_RECEIVE_BYTES)
        if not chunk:
            if length is None:  # a body delimited by the end of the connection
                break
            raise ProbeFailure(
                "protocol_error",
                f"invalid HTTP response from {where}: the connection closed "
                f"{length - body_bytes} bytes before the end of the body",
                status_code=status,
            )
        body_bytes += len(chunk)
    return status, location


_STATUS_LINE = re.compile(rb"HTTP/1\.[01] ([2-5][0-9][0-9])(?: [\t \x21-\x7e\x80-\xff]*)?")
"""h11's status line (RFC 9112 section 4), narrowed to HTTP/1.0 and 1.1 and to final
statuses 200 to 599; anything else goes to h11."""

_HEADER_LINE = re.compile(
    rb"([!#$%&'*+.^_`|~0-9A-Za-z-]+):[ \t]*"
    rb"((?:[\x21-\x7e\x80-\xff]+(?:[ \t]+[\x21-\x7e\x80-\xff]+)*)?)[ \t]*"
)
"""h11's header field line (RFC 9110 section 5: token, colon, optional whitespace, field
value); an obsolete line folding or a stray CR or LF does not match and goes to h11."""

_NO_BODY_STATUSES = frozenset({204, 304})


def _simple_head(data: bytes, method: bytes) -> tuple[int, str | None, int | None, int] | None:
    """Parse a response whose whole head is in ``data`` and whose body framing is plain
    (RFC 9112 section 6.3): (status, Location or None, body length in bytes or None when
    the body ends with the connection, body bytes already in ``data``). None when h11
    must decide: no complete head yet, a 1xx or unusual status line, a header line h11
    might read otherwise, ``Transfer-Encoding``, several ``Content-Length`` fields, or a
    CONNECT request.
    """
    end = data.find(b"\r\n\r\n")
    if end < 0 or method == b"CONNECT":
        return None
    lines = data[:end].split(b"\r\n")
    status_line = _STATUS_LINE.fullmatch(lines[0])
    if status_line is None:
        return None
    status = int(status_line[1])
    location: str | None = None
    length: int | None = None
    for line in lines[1:]:
        field = _HEADER_LINE.fullmatch(line)
        if field is None:
            return None
        name = field[1].lower()
        if name == b"content-length":
            if length is not None or not field[2].isdigit():
                return None
            length = int(field[2])
        elif name == b"location":
            location = field[2].decode("latin-1") or None
        elif name == b"transfer-encoding":
            return None
    if status in _NO_BODY_STATUSES or method == b"HEAD":
        length = 0
    return status, location, length, len(data) - end - 4


async def _read_with_h11(
    receive: Receive, request: h11.Request, data: bytes, where: str
) -> tuple[int, str | None]:
    """`_read_response` by h11, starting with ``data`` (already read; empty at the end of
    the stream)."""
    conn = h11.Connection(h11.CLIENT, max_incomplete_event_size=_MAX_HEAD_BYTES)
    conn.send(request)  # only to move h11's state on: these bytes were sent already
    conn.send(_END)
    conn.receive_data(data)
    status: int | None = None
    location: str | None = None
    body_bytes = 0
    while True:
        try:
            event = conn.next_event()
        except h11.RemoteProtocolError as exc:
            raise ProbeFailure(
                "protocol_error", f"invalid HTTP response from {where}: {exc}", status_code=status
            ) from None
        if event is h11.NEED_DATA:
            conn.receive_data(bytes(await receive(_RECEIVE_BYTES)))
        elif type(event) is h11.Response:
            status = event.status_code
            for name, value in event.headers:
                if name == b"location":
                    location = value.decode("latin-1").strip() or None
        elif type(event) is h11.Data:
            body_bytes += len(event.data)
            if body_bytes >= BODY_LIMIT_BYTES:
                break
        elif type(event) is h11.EndOfMessage:
            break
        elif type(event) is h11.InformationalResponse:
            continue
        else:  # ConnectionClosed before a response, or PAUSED after a protocol switch
            raise ProbeFailure(
                "protocol_error",
                f"{where} closed the connection before a complete response",
                status_code=status,
            )
    assert status is not None
    return status, location


def _broken(exc: trio.BrokenResourceError, where: str, *, handshake: bool) -> ProbeFailure:
    """Translate a broken stream (trio wraps the OS or TLS error as ``__cause__``)."""
    cause = exc.__cause__
    if isinstance(cause, ssl.SSLCertVerificationError):
        return ProbeFailure(
            "tls_error", f"TLS certificate of {where} not accepted: {cause.verify_message}"
        )
    if isinstance(cause, ssl.SSLError):
        return ProbeFailure("tls_error", f"TLS with {where} failed: {cause.reason or cause}")
    if isinstance(cause, OSError):
        return os_failure(cause, where)
    if handshake:
        return ProbeFailure("tls_error", f"{where} closed the connection during the TLS handshake")
    return ProbeFailure("connection_reset", f"connection to {where} broken: {cause or exc}")
