"""What an http check sends: where (`parse_http_url`), its request, built and serialised
once (`prepare`), and the rules on the headers a monitor may add (`check_request_headers`,
also the API's 422s).

Where: an http monitor's ``url`` is an absolute ``http://`` or ``https://`` URL with a
host (``https://example.com/health?x=1``, ``http://[::1]:8080/``); no user name or
password in the URL; the fragment is ignored; the port is the explicit one, else 80 or
443 by scheme (the host rules: ``engine.targets``).

The request (module docstring of ``_http``, step 3): the monitor's method and path,
``Host``, ``User-Agent`` (`USER_AGENT`), ``Accept: */*`` and ``Connection: close``, then
the monitor's ``request_headers`` (docs/checks.md; one of them named ``User-Agent``
or ``Accept`` replaces Uptrio's), then ``Content-Length``: the body's length in UTF-8
bytes when the monitor has a ``request_body``, ``0`` for POST, PUT and PATCH without
one, absent otherwise. No ``Content-Type`` is added: a monitor sending JSON says so in
its headers.

Header rules (RFC 9110 section 5; docs/checks.md): at most `MAX_REQUEST_HEADERS`; a
name is a token of at most 100 characters, unique regardless of case; a value is at most
4,096 characters of visible ASCII, spaces and tabs, without leading or trailing
whitespace (so no CR, LF or NUL can smuggle a second header or request); ``Host``,
``Content-Length``, ``Transfer-Encoding`` and ``Connection`` are refused, whatever their
case, because the probe owns the connection and the message's framing.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final
from urllib.parse import quote, urlsplit

import h11

from engine.targets import InvalidTarget, Target, parse_host, url_parser

__all__ = [
    "CREDENTIAL_HEADERS",
    "MAX_REQUEST_BODY_CHARS",
    "MAX_REQUEST_HEADERS",
    "REFUSED_HEADERS",
    "USER_AGENT",
    "InvalidRequestHeaders",
    "Prepared",
    "check_request_headers",
    "parse_http_url",
    "prepare",
    "same_origin",
    "without_credentials",
]

USER_AGENT = "Uptrio/0.1 (uptime monitor)"
"""The ``User-Agent`` every http check sends unless its monitor sets its own."""

MAX_REQUEST_HEADERS: Final = 20
"""Headers a monitor may add (docs/checks.md)."""

MAX_REQUEST_BODY_CHARS: Final = 10_000
"""Characters of ``request_body`` at most (docs/checks.md)."""

REFUSED_HEADERS: Final = frozenset({"host", "content-length", "transfer-encoding", "connection"})
"""Header names (lower case) a monitor may not set (docs/checks.md)."""

CREDENTIAL_HEADERS: Final = frozenset({"authorization", "proxy-authorization", "cookie"})
"""Headers dropped when a redirect leaves the monitor's origin (scheme, host, port), as
browsers and httpx drop ``Authorization``: credentials go only where the user sent them."""

_MAX_NAME_CHARS = 100
_MAX_VALUE_CHARS = 4096
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_FIELD_VALUE = re.compile(r"(?:[\x21-\x7e](?:[\x20\x09]*[\x21-\x7e])*)?")
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
_DEFAULTS_REPLACEABLE = frozenset({"user-agent", "accept"})
_PATH_SAFE = "/%:@!$&'()*+,;=-._~"
_QUERY_SAFE = _PATH_SAFE + "?"
_END = h11.EndOfMessage()
_DEFAULT_PORTS = {"http": 80, "https": 443}
_HTTP_EXAMPLE = (
    "an http monitor needs an http:// or https:// URL, for example https://example.com/health"
)
_BAD_PORT = "the port in the URL must be a number from 1 to 65535"

Headers = tuple[tuple[str, str], ...]
"""A monitor's request headers as the probe takes them: (name, value) pairs, in order."""


@url_parser
def parse_http_url(url: str) -> Target:
    """The ``http`` type's ``url`` rules (module docstring): ``url`` to a `Target` with its
    scheme (``"http"`` or ``"https"``) and port.

    Raises:
        InvalidTarget: ``url`` is not such a URL; nothing else escapes (`url_parser`).
    """
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.netloc:
        raise InvalidTarget(_HTTP_EXAMPLE)
    if "@" in parts.netloc:
        raise InvalidTarget("a user name or password in the URL is not supported")
    raw_host = parts.hostname
    if not raw_host:
        raise InvalidTarget(f"{_HTTP_EXAMPLE}; this URL has no host")
    try:
        port = parts.port
    except ValueError:
        raise InvalidTarget(_BAD_PORT) from None
    if port is None:
        if parts.netloc.endswith(":"):
            raise InvalidTarget(_BAD_PORT)
        port = _DEFAULT_PORTS[scheme]
    elif port == 0:
        raise InvalidTarget(_BAD_PORT)
    bracketed = parts.netloc.rsplit("@", 1)[-1].startswith("[")
    host = parse_host(raw_host, bracketed=bracketed, example=_HTTP_EXAMPLE)
    return Target(type="http", host=host, port=port, url=url, scheme=scheme)


class InvalidRequestHeaders(ValueError):
    """``request_headers`` breaks a rule of the module docstring.

    Attributes:
        code: the API's error code: ``value_too_long`` (more than 20 headers),
            ``request_header_not_allowed`` (a refused name) or ``invalid_request_header``
            (a malformed name or value, or a name given twice).
        message: one sentence naming the header.
    """

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def check_request_headers(headers: Mapping[str, str]) -> None:
    """Check a monitor's ``request_headers`` (a name-to-value mapping) against the rules
    of the module docstring; the API answers 422 with the error's code.

    Raises:
        InvalidRequestHeaders: the first rule broken.
    """
    if len(headers) > MAX_REQUEST_HEADERS:
        raise InvalidRequestHeaders(
            "value_too_long",
            f"request_headers may hold at most {MAX_REQUEST_HEADERS} headers, got {len(headers)}",
        )
    seen: set[str] = set()
    for name, value in headers.items():
        lowered = name.lower()
        if len(name) > _MAX_NAME_CHARS or not _TOKEN.fullmatch(name):
            raise InvalidRequestHeaders(
                "invalid_request_header",
                f"request_headers: {name[:100]!r} is not a header name (RFC 9110: 1 to "
                f"{_MAX_NAME_CHARS} letters, digits and !#$%&'*+-.^_`|~)",
            )
        if lowered in REFUSED_HEADERS:
            raise InvalidRequestHeaders(
                "request_header_not_allowed",
                f"request_headers may not set {name}: Host, Content-Length, "
                "Transfer-Encoding and Connection belong to the probe",
            )
        if lowered in seen:
            raise InvalidRequestHeaders(
                "invalid_request_header",
                f"request_headers names {name} twice (header names ignore case)",
            )
        seen.add(lowered)
        if len(value) > _MAX_VALUE_CHARS or not _FIELD_VALUE.fullmatch(value):
            raise InvalidRequestHeaders(
                "invalid_request_header",
                f"request_headers: the value of {name} must be at most {_MAX_VALUE_CHARS} "
                "characters of visible ASCII, spaces and tabs, with no leading or trailing "
                "whitespace (no CR, LF or other control characters; RFC 9110 section 5.5)",
            )


@dataclass(frozen=True, slots=True)
class Prepared:
    """What one request needs on the wire, computed once (`prepare` is cached)."""

    host: str
    port: int
    https: bool
    request: h11.Request
    """The request as an h11 client reading the response must have sent it: the head,
    less the ``Content-Length`` of a body (sent already, as part of ``wire``)."""
    wire: bytes
    """The request as sent: the head serialised by h11, and the body."""


@functools.lru_cache(maxsize=16_384)
def prepare(url: str, method: str, headers: Headers = (), body: str | None = None) -> Prepared:
    """Parse ``url`` and build its validated h11 request with ``headers`` and ``body``
    (module docstring); events are immutable, so the request is built once and sent by
    every check.

    Raises:
        InvalidTarget: ``url`` is not an http(s) URL.
        UnicodeError: the path holds characters UTF-8 cannot encode (lone surrogates).
        h11.LocalProtocolError: ``method`` is not a valid HTTP method token, or a header
            is malformed (the API refuses both before they are stored).
    """
    target = parse_http_url(url)
    assert target.port is not None
    parts = urlsplit(url)
    request_target = quote(parts.path or "/", safe=_PATH_SAFE)
    if parts.query:
        request_target += "?" + quote(parts.query, safe=_QUERY_SAFE)
    https = target.scheme == "https"
    host_header = f"[{target.host}]" if ":" in target.host else target.host
    if target.port != (443 if https else 80):
        host_header += f":{target.port}"
    own = {name.lower() for name, _ in headers}
    wire_headers = [(b"Host", host_header.encode("ascii"))]
    if "user-agent" not in own:
        wire_headers.append((b"User-Agent", USER_AGENT.encode("ascii")))
    if "accept" not in own:
        wire_headers.append((b"Accept", b"*/*"))
    wire_headers.append((b"Connection", b"close"))
    wire_headers += [(name.encode("ascii"), value.encode("ascii")) for name, value in headers]
    payload = b"" if body is None else body.encode("utf-8")
    if body is not None or method in _BODY_METHODS:
        wire_headers.append((b"Content-Length", str(len(payload)).encode("ascii")))
    request = h11.Request(
        method=method, target=request_target.encode("ascii"), headers=wire_headers
    )
    wire = _serialise(request, payload)
    if payload:  # what h11 is shown to read the response: the head without the body
        request = h11.Request(method=method, target=request.target, headers=wire_headers[:-1])
    return Prepared(host=target.host, port=target.port, https=https, request=request, wire=wire)


def _serialise(request: h11.Request, payload: bytes) -> bytes:
    """``request``, its body and its end, as h11 puts them on the wire."""
    conn = h11.Connection(h11.CLIENT)
    head = conn.send(request)
    data = conn.send(h11.Data(data=payload)) if payload else b""
    end = conn.send(_END)
    assert head is not None and data is not None and end is not None
    return head + data + end


def same_origin(url: str, other: str) -> bool:
    """True when the two http(s) URLs share scheme, host and port (RFC 6454)."""
    a, b = urlsplit(url), urlsplit(other)
    a_scheme, b_scheme = a.scheme.lower(), b.scheme.lower()
    a_port, b_port = a.port or _DEFAULT_PORTS.get(a_scheme), b.port or _DEFAULT_PORTS.get(b_scheme)
    return (a_scheme, a.hostname, a_port) == (b_scheme, b.hostname, b_port)


def without_credentials(headers: Headers) -> Headers:
    """``headers`` less `CREDENTIAL_HEADERS` (for a redirect to another origin)."""
    return tuple((n, v) for n, v in headers if n.lower() not in CREDENTIAL_HEADERS)
