"""Reading the response of an http check: its head by a fast path where h11 would agree,
h11 for everything else, and the body up to its limit (docs/checks.md, "How a check is
made": the body is read up to 64 KiB, or up to 1 MiB for ``body`` and ``json_body``
assertions).

``_http`` sends the request and hands `read_response` the connection's ``receive``;
this module owns what comes back: `read_response` (status and ``Location``), the fast
path `_simple_head` for the common head, `_read_with_h11` for everything else and for
a monitor whose assertions need the head or the body (it fills their `Response`).

Error handling: ``protocol_error`` as a `ProbeFailure` for a response h11 refuses or
one cut short; ``OSError`` and `trio.BrokenResourceError` from ``receive`` pass through
for the caller to translate; `trio.Cancelled` passes untouched.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable

import h11

from ._assertions import Response
from ._result import ProbeFailure

__all__ = ["ASSERTION_BODY_BYTES", "BODY_LIMIT_BYTES", "Receive", "read_response"]

BODY_LIMIT_BYTES = 64 * 1024
"""Bytes of response body read at most; the connection is closed after that."""

ASSERTION_BODY_BYTES = 1024 * 1024
"""Bytes of response body read and kept at most for ``body`` and ``json_body``
assertions (docs/checks.md: "the body's first 1 MiB")."""

_RECEIVE_BYTES = 64 * 1024
_MAX_HEAD_BYTES = 64 * 1024
_END = h11.EndOfMessage()


Receive = Callable[[int], Awaitable[bytes | bytearray]]
"""Reads up to n bytes; empty at the end of the stream (a socket's ``recv``)."""


async def read_response(
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
    """`read_response` by h11, starting with ``data`` (already read; empty at the end of
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
