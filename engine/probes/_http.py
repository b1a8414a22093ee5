"""The ``http`` probe: a lean HTTP/1.1 client, h11 on trio sockets and trio.SSLStream.

Why not httpx: httpx costs about 0.5 CPU ms per GET, and the engine's budget is 0.3 CPU ms
per check for the whole service at 1,000 checks/s (bench/RESULTS.md);
``bench/probe_micro.py`` compares the two (about 0.15 against 0.57 CPU ms per check on
loopback, before the fast path below). A check needs little of a general client: one request
on a fresh connection, the status, a bounded body read. What keeps it cheap: the parsed URL
and the request bytes (serialised by h11) are cached per request (``_request``), IP literals
skip getaddrinfo, plain http to one address is spoken on a non-blocking socket with
`trio.lowlevel` waits (`_exchange_plain`), https goes through `trio.SSLStream`, and the
common response head is parsed without h11, which stays the judge of everything else
(`_read_response`).

One check, hop by hop:

1. The URL is parsed (``_request.parse_http_url``) and the host resolved and
   checked against the address policy (`._tcp.resolve`); the connection goes to exactly
   the address that was checked, so a second DNS answer cannot redirect it.
2. A new TCP connection (never reused between checks; the request says
   ``Connection: close``), then for https a TLS handshake with the URL's host as server
   name (SNI), verified by the monitor's `ssl.SSLContext` (``_tls``: the system's CAs,
   the monitor's ``tls_ca_bundle``, or none at all with ``tls_verify`` false).
3. One request: the monitor's method, ``Host``, ``User-Agent``, ``Accept: */*``,
   ``Connection: close``, the monitor's ``request_headers``, and its ``request_body``
   with its ``Content-Length`` (``0`` for POST, PUT and PATCH without one): ``_request``.
4. The response head, then the body up to `BODY_LIMIT_BYTES` (read and dropped, so the
   target sees a normal client); the connection is closed without waiting for the peer.
   Only a monitor with ``body`` or ``json_body`` assertions keeps the body, up to
   `ASSERTION_BODY_BYTES` (``header`` assertions keep the head); the others take the
   fast path that reads the head alone.
5. A 301, 302, 303, 307 or 308 with a ``Location`` is followed, relative locations
   resolved against the current URL, at most `MAX_REDIRECTS` times (one more redirect
   is ``too_many_redirects``). 303, and 302 except for HEAD, continue with GET and
   without the body; 301 turns POST into GET (what browsers and httpx do). Redirects to
   another origin drop ``Authorization``, ``Proxy-Authorization`` and ``Cookie``. A
   redirect is not followed when its status *is* ``expected_status_code``: the monitor
   then checks the redirect (with assertions too).

Up (``_assertions``): every assertion holds (``assertion_failed``), or without
any, the status is ``expected_status_code`` (2xx when ``None``; ``unexpected_status``);
then over TLS the certificate's notAfter (``tls_expires_at``) is more than
``tls_expiry_days`` away (``tls_expiring``; an expired one fails the handshake, unless
``tls_verify`` is false: then ``tls_expiring`` says it expired).

Response time: from just before the first connection attempt (after the first name
resolution) to the end of reading the final response, in milliseconds; later redirect
hops, their resolution included, count in full.

Error handling: returns a `ProbeResult` for every final response (ok,
``unexpected_status``, ``assertion_failed``, ``tls_expiring``, ``too_many_redirects``);
raises `ProbeFailure` for everything else (``tls_error``, ``protocol_error``, connection
errors, ``dns_failure``, ``target_denied``, ``invalid_target``); lets `trio.Cancelled`
through untouched.
"""

from __future__ import annotations

import errno
import os
import re
import socket
import ssl
import time
from collections.abc import Awaitable, Callable, Sequence
from urllib.parse import urljoin

import h11
import trio

from engine.targets import Target

from . import _assertions as rules
from ._assertions import BODY, HEAD_ONLY, Assertion, Response
from ._probe_type import ProbeContext, ProbeType
from ._request import (
    USER_AGENT,
    Headers,
    Prepared,
    parse_http_url,
    prepare,
    same_origin,
    without_credentials,
)
from ._result import ProbeFailure, ProbeResult, ProbeSpec
from ._tcp import Address, AddressPolicy, connect, describe, os_failure, resolve, stream_failure
from ._tls import peer_expiry

__all__ = [
    "ASSERTION_BODY_BYTES",
    "BODY_LIMIT_BYTES",
    "HTTP",
    "MAX_REDIRECTS",
    "USER_AGENT",
    "probe_http",
]

MAX_REDIRECTS = 10
"""Redirects followed in one check; the next one fails it with ``too_many_redirects``."""

BODY_LIMIT_BYTES = 64 * 1024
"""Bytes of response body read at most; the connection is closed after that."""

ASSERTION_BODY_BYTES = 1024 * 1024
"""Bytes of response body read and kept at most for ``body`` and ``json_body``
assertions (docs/checks.md: "the body's first 1 MiB")."""

_RECEIVE_BYTES = 64 * 1024
_MAX_HEAD_BYTES = 64 * 1024
_REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
_END = h11.EndOfMessage()


async def probe_http(
    url: str,
    *,
    method: str | None,
    expected_status_code: int | None,
    ssl_context: ssl.SSLContext,
    policy: AddressPolicy | None,
    headers: Headers = (),
    body: str | None = None,
    assertions: Sequence[Assertion] = (),
    tls_expiry_days: int | None = None,
) -> ProbeResult:
    """Run one http check of ``url`` (see the module docstring for the rules).

    Args:
        url: an http(s) URL as `parse_http_url` accepts it.
        method: the request method; ``None`` means GET.
        expected_status_code: the status that counts as up without ``assertions``;
            ``None`` means any 2xx.
        ssl_context: verifies https servers (``_tls``); shared by every check of the
            same TLS setting.
        policy: the address policy applied to every hop, or ``None``.
        headers: request headers the monitor adds, checked by `check_request_headers`.
        body: the request body (sent as UTF-8), or ``None``.
        assertions: compiled by `compile_assertions`; when there are any, they decide.
        tls_expiry_days: fail with ``tls_expiring`` within this many days of the final
            certificate's expiry; ``None``: never.

    Returns:
        A `ProbeResult` for the final response: ok, ``unexpected_status``,
        ``assertion_failed``, ``tls_expiring`` or ``too_many_redirects``, with
        ``status_code``, ``response_time_ms`` and ``tls_expires_at``.

    Raises:
        ProbeFailure: when no usable final response arrives (module docstring).
    """
    method = method or "GET"
    need = rules.needs(assertions) if assertions else HEAD_ONLY
    started: float | None = None
    for hops in range(MAX_REDIRECTS + 1):
        try:
            plan = prepare(url, method, headers, body)
        except ValueError as exc:  # InvalidTarget, or a path that cannot be encoded
            if hops == 0:
                raise ProbeFailure("invalid_target", str(exc)) from None
            raise ProbeFailure("protocol_error", f"redirect to an unusable URL: {exc}") from None
        except h11.LocalProtocolError as exc:
            raise ProbeFailure("invalid_target", f"cannot send this request: {exc}") from None
        addresses = await resolve(plan.host, plan.port, policy)
        if started is None:
            started = time.perf_counter()
        capture = None if need == HEAD_ONLY else Response(keep_body=need == BODY)
        status, location, expires_at = await _exchange(plan, addresses, ssl_context, capture)
        if status in _REDIRECT_STATUSES and location is not None and status != expected_status_code:
            if hops == MAX_REDIRECTS:
                return ProbeResult(
                    ok=False,
                    response_time_ms=(time.perf_counter() - started) * 1000.0,
                    status_code=status,
                    error_code="too_many_redirects",
                    error_message=f"more than {MAX_REDIRECTS} redirects (the last to {location})",
                    tls_expires_at=expires_at,
                )
            following = urljoin(url, location)
            if headers and not same_origin(url, following):
                headers = without_credentials(headers)
            url = following
            if (status in (302, 303) and method != "HEAD") or (status == 301 and method == "POST"):
                method, body = "GET", None
            continue
        elapsed_ms = (time.perf_counter() - started) * 1000.0
        if assertions:
            code, message = await rules.assertion_verdict(assertions, status, elapsed_ms, capture)
        else:
            code, message = rules.status_verdict(status, expected_status_code)
        if code is None and expires_at is not None and tls_expiry_days is not None:
            code, message = rules.tls_expiring(plan.host, expires_at, tls_expiry_days)
        return ProbeResult(
            ok=code is None,
            response_time_ms=elapsed_ms,
            status_code=status,
            error_code=code,
            error_message=message,
            tls_expires_at=expires_at,
        )
    raise AssertionError("unreachable: the loop returns on its last hop")


async def _check(context: ProbeContext, spec: ProbeSpec, target: Target) -> ProbeResult:
    """The http type's check: `probe_http` with the spec's http fields."""
    return await probe_http(
        target.url,
        method=spec.method,
        expected_status_code=spec.expected_status_code,
        ssl_context=context.ssl_context if spec.ssl_context is None else spec.ssl_context,
        policy=context.policy,
        headers=spec.request_headers,
        body=spec.request_body,
        assertions=spec.assertions,
        tls_expiry_days=spec.tls_expiry_days,
    )


HTTP = ProbeType(name="http", parse=parse_http_url, check=_check, http_fields=True)
"""The ``http`` probe type (``_registry``)."""


async def _exchange(
    plan: Prepared, addresses: list[Address], ctx: ssl.SSLContext, capture: Response | None
) -> tuple[int, str | None, int | None]:
    """One request and response on a new connection: (status, Location or None, the
    certificate's notAfter in epoch seconds or None for plain http).

    Plain http to a single address (an IP literal, most hosts) takes `_exchange_plain`;
    plain http racing several addresses talks to the trio socket directly (a
    `trio.SocketStream` around it costs CPU the check does not need); https goes through
    `trio.SSLStream`. ``capture`` is filled with the final head (and body) when given.
    """
    if not plan.https and len(addresses) == 1:
        status, location = await _exchange_plain(plan, addresses[0], capture)
        return status, location, None
    sock = await connect(addresses)
    where = describe(addresses[0]) if len(addresses) == 1 else plan.host
    if not plan.https:
        try:
            await _send_all(sock, plan.wire)
            status, location = await _read_response(sock.recv, plan.request, where, capture)
            return status, location, None
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
            raise stream_failure(exc, where, handshake=True) from None
        expires_at = peer_expiry(stream)
        try:
            await stream.send_all(plan.wire)
            status, location = await _read_response(
                stream.receive_some, plan.request, where, capture
            )
            return status, location, expires_at
        except trio.BrokenResourceError as exc:
            raise stream_failure(exc, where, handshake=False) from None
        except ProbeFailure as failure:
            failure.tls_expires_at = expires_at
            raise
    finally:
        await trio.aclose_forcefully(stream)


async def _exchange_plain(
    plan: Prepared, address: Address, capture: Response | None
) -> tuple[int, str | None]:
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

        return await _read_response(receive, plan.request, where, capture)
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
    receive: Receive, request: h11.Request, where: str, capture: Response | None = None
) -> tuple[int, str | None]:
    """Read the response to ``request`` from ``receive``: its head, then up to
    `BODY_LIMIT_BYTES` of body (read and dropped). Returns (status, Location or None).
    With ``capture`` (assertions need the head or the body) h11 reads it and fills it.

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
    head = None if capture is not None else _simple_head(data, request.method)
    if head is None:
        return await _read_with_h11(receive, request, data, where, capture)
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
    receive: Receive,
    request: h11.Request,
    data: bytes,
    where: str,
    capture: Response | None = None,
) -> tuple[int, str | None]:
    """`_read_response` by h11, starting with ``data`` (already read; empty at the end of
    the stream); fills ``capture`` when given."""
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
            if capture is not None:
                capture.headers = event.headers
        elif type(event) is h11.Data:
            body_bytes += len(event.data)
            if capture is not None and capture.keep_body:
                if body_bytes > ASSERTION_BODY_BYTES:  # keep the first MiB, then stop
                    capture.body += event.data[: ASSERTION_BODY_BYTES - len(capture.body)]
                    capture.truncated = True
                    break
                capture.body += event.data
            elif body_bytes >= BODY_LIMIT_BYTES:
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
