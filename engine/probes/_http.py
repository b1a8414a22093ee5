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
(``_http_response``, which reads what comes back).

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
import socket
import ssl
import time
from collections.abc import Sequence
from urllib.parse import urljoin

import h11
import trio

from engine.targets import Target

from . import _assertions as rules
from ._assertions import BODY, HEAD_ONLY, Assertion, Response
from ._http_response import read_response
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
from ._source import SourceAddress
from ._tcp import Address, AddressPolicy, connect, describe, os_failure, resolve, stream_failure
from ._tls import peer_expiry

__all__ = [
    "HTTP",
    "MAX_REDIRECTS",
    "USER_AGENT",
    "probe_http",
]

MAX_REDIRECTS = 10
"""Redirects followed in one check; the next one fails it with ``too_many_redirects``."""

_REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})


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
    source: SourceAddress | None = None,
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
        source: the address every hop's connection leaves from (``_source``), or
            ``None`` for the system's choice.

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
        addresses = await resolve(plan.host, plan.port, policy, source=source)
        if started is None:
            started = time.perf_counter()
        capture = None if need == HEAD_ONLY else Response(keep_body=need == BODY)
        status, location, expires_at = await _exchange(
            plan, addresses, ssl_context, capture, source
        )
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
        source=context.source,
    )


HTTP = ProbeType(name="http", parse=parse_http_url, check=_check, http_fields=True)
"""The ``http`` probe type (``_registry``)."""


async def _exchange(
    plan: Prepared,
    addresses: list[Address],
    ctx: ssl.SSLContext,
    capture: Response | None,
    source: SourceAddress | None,
) -> tuple[int, str | None, int | None]:
    """One request and response on a new connection: (status, Location or None, the
    certificate's notAfter in epoch seconds or None for plain http).

    Plain http to a single address (an IP literal, most hosts) takes `_exchange_plain`;
    plain http racing several addresses talks to the trio socket directly (a
    `trio.SocketStream` around it costs CPU the check does not need); https goes through
    `trio.SSLStream`. ``capture`` is filled with the final head (and body) when given.
    Every connection is bound to ``source`` first when one is given.
    """
    if not plan.https and len(addresses) == 1:
        status, location = await _exchange_plain(plan, addresses[0], capture, source)
        return status, location, None
    sock = await connect(addresses, source)
    where = describe(addresses[0]) if len(addresses) == 1 else plan.host
    if not plan.https:
        try:
            await _send_all(sock, plan.wire)
            status, location = await read_response(sock.recv, plan.request, where, capture)
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
            status, location = await read_response(
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
    plan: Prepared, address: Address, capture: Response | None, source: SourceAddress | None
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
        if source is not None:  # a numeric address: bind never blocks nor resolves
            sock.bind(source.sockaddr)
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

        return await read_response(receive, plan.request, where, capture)
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
