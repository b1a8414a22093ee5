"""The http probe's fast path for response heads agrees with h11 (engine/probes/_http_response.py).

`read_response` parses the common response itself and hands everything else to h11;
these tests generate responses (valid, odd and broken heads, every body framing, split
into arbitrary reads) and check that the outcome, (status, Location) or the failure's
error code and status, is what h11 alone makes of the same bytes. The reads never wait,
so the coroutines are driven by hand, without a trio loop.
"""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any

import h11
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from engine.probes._http_response import (
    _RECEIVE_BYTES,
    BODY_LIMIT_BYTES,
    _read_with_h11,
    _simple_head,
    read_response,
)
from engine.probes._result import ProbeFailure

Outcome = tuple[str, Any, Any]


def _drive(coroutine: Coroutine[Any, Any, tuple[int, str | None]]) -> Outcome:
    """Run a coroutine that never waits; its result or its ProbeFailure as an outcome."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        status, location = done.value
        return ("response", status, location)
    except ProbeFailure as failure:
        return ("failure", failure.code, failure.status_code)
    raise AssertionError("the coroutine waited")


def _reader(reads: list[bytes]) -> Any:
    """A ``receive`` that returns ``reads`` one by one (split to the size asked for),
    then the end of the stream."""
    pending = list(reads)

    async def receive(size: int) -> bytes:
        while pending:
            chunk = pending.pop(0)
            if chunk:
                if len(chunk) > size:
                    pending.insert(0, chunk[size:])
                return chunk[:size]
        return b""

    return receive


def _outcomes(method: str, reads: list[bytes]) -> tuple[Outcome, Outcome]:
    """(the probe's outcome, h11's alone) for the same reads."""
    request = h11.Request(method=method, target="/", headers=[("Host", "a")])
    probe = _drive(read_response(_reader(reads), request, "target"))

    async def by_h11() -> tuple[int, str | None]:
        receive = _reader(reads)
        return await _read_with_h11(receive, request, await receive(_RECEIVE_BYTES), "target")

    return probe, _drive(by_h11())


_VALUE_CHARS = st.sampled_from(
    [b"a", b"Z", b"0", b"/", b":", b" ", b"\t", b"\x80", b"\xff", b"\r", b"\n", b"\x00", b","]
)
_NAMES = st.sampled_from(
    [
        b"Content-Length",
        b"content-length",
        b"Transfer-Encoding",
        b"Location",
        b"LOCATION",
        b"Server",
        b"Connection",
        b"X-A",
        b"Bad Name",
        b"",
        b" Server",
    ]
)
_VALUES = st.one_of(
    st.sampled_from([b"0", b"5", b"007", b"70000", b"5, 5", b"-1", b"chunked", b"gzip", b"/x"]),
    st.lists(_VALUE_CHARS, max_size=8).map(b"".join),
)
_STATUS_LINES = st.one_of(
    st.sampled_from(
        [
            b"HTTP/1.1 200 OK",
            b"HTTP/1.1 204 No Content",
            b"HTTP/1.1 304 Not Modified",
            b"HTTP/1.0 302 Found",
            b"HTTP/1.1 301",
            b"HTTP/1.1 404 ",
            b"HTTP/1.1 500 Internal\tError \x80",
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK",
            b"HTTP/1.1 101 Switching",
            b"HTTP/2 200 OK",
            b"HTTP/1.1 20 OK",
            b"HTTP/1.1 099 Low",
            b"HTTP/1.1 600 High",
            b"http/1.1 200 OK",
            b"HTTP/1.1  200 OK",
            b"ICY 200 OK",
            b"",
        ]
    ),
    st.builds(lambda n: b"HTTP/1.1 %d X" % n, st.integers(0, 999)),
)
_BODIES = st.one_of(
    st.binary(max_size=40),
    st.sampled_from([b"5\r\nhello\r\n0\r\n\r\n", b"zz\r\n", b"0\r\n\r\n"]),
    st.integers(1, 3).map(lambda n: b"x" * (BODY_LIMIT_BYTES * n // 2 + 7)),
)


@st.composite
def _responses(draw: st.DrawFn) -> tuple[str, list[bytes]]:
    """A method and the reads of a response to it."""
    method = draw(st.sampled_from(["GET", "HEAD", "POST"]))
    head = draw(_STATUS_LINES)
    for name, value in draw(st.lists(st.tuples(_NAMES, _VALUES), max_size=6)):
        head += b"\r\n" + name + b":" + draw(st.sampled_from([b"", b" ", b"\t "])) + value
        head += draw(st.sampled_from([b"", b"", b" ", b"\r\n folded"]))
    data = head + draw(st.sampled_from([b"\r\n\r\n", b"\r\n\r\n", b"\n\n", b"\r\n"]))
    data += draw(_BODIES)
    data = data[: draw(st.integers(0, len(data)))] if draw(st.booleans()) else data
    cuts = sorted(draw(st.lists(st.integers(0, len(data)), max_size=4)))
    reads = [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]
    return method, reads


@settings(max_examples=1500, deadline=None)
@given(_responses())
@example(("GET", [b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"]))
@example(("GET", [b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhel"]))
@example(("GET", [b"HTTP/1.1 302 Found\r\nLocation:  /next \r\n\r\n"]))
@example(("HEAD", [b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n"]))
@example(("GET", [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"]))
@example(("GET", [b"HTTP/1.1 200 OK\r\nX: a\r\n b\r\n\r\n"]))
@example(("GET", [b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No\r\n\r\n"]))
@example(("GET", [b"HTTP/1.1 200 OK\r\n", b"Content-Length: 2\r\n\r\nok"]))
@example(("GET", []))
def test_the_fast_path_answers_as_h11(response: tuple[str, list[bytes]]) -> None:
    method, reads = response
    probe, h11_alone = _outcomes(method, reads)
    assert probe == h11_alone


@pytest.mark.parametrize(
    "data",
    [
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nServer: nginx\r\n\r\nhello",
        b"HTTP/1.0 301 Moved\r\nLocation: /x\r\n\r\n",
        b"HTTP/1.1 204 No Content\r\n\r\n",
    ],
)
def test_the_common_responses_take_the_fast_path(data: bytes) -> None:
    # Not only agreement: the common case must not fall back to h11, or the fast path
    # would be dead code that the test above cannot tell from a working one.
    assert _simple_head(data, b"GET") is not None


@pytest.mark.parametrize(
    "data",
    [
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
        b"HTTP/1.1 100 Continue\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nX: a\r\n b\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n",
        b"HTTP/1.1 200 OK\r\n",
    ],
)
def test_the_unusual_responses_go_to_h11(data: bytes) -> None:
    assert _simple_head(data, b"GET") is None
