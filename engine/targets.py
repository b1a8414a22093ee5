"""What a monitor points at: parse and validate a monitor's ``url`` for its ``type``.

Pure parsing, no I/O: nothing here resolves a name or opens a socket. The API calls
`parse_target` to validate ``url`` (a failure is a 422 on ``url``; ``str(exc)`` is the
message); the probes call it again on every check (cached) to learn where to connect.
The length limit on ``url`` (2,048 characters, DESIGN.md) is checked by the API, not here.

Accepted forms (``type``: examples):

======  ==========================================================================
http    an absolute ``http://`` or ``https://`` URL with a host:
        ``https://example.com/health?x=1``, ``http://[::1]:8080/``.
        No user name or password in the URL; the fragment is ignored.
tcp     ``host:port`` or ``tcp://host:port``, port 1 to 65,535 required:
        ``db.example.com:5432``, ``tcp://10.0.0.5:6379``, ``[2001:db8::1]:22``.
dns     a host name, or ``dns://name``: ``example.com``, ``dns://example.com.``.
        IP addresses are refused: a dns monitor checks that a *name* resolves, and
        an IP literal has nothing to resolve (use a ping or tcp monitor for it).
ping    a host name or an IP address, optionally ``ping://host``: ``example.com``,
        ``192.0.2.10``, ``2001:db8::1``, ``[2001:db8::1]``, ``ping://example.com``.
======  ==========================================================================

Host names follow RFC 1123 (letters, digits and hyphens, labels of 1 to 63 characters,
no leading or trailing hyphen, at most 253 characters) with two relaxations seen in the
wild: underscores are allowed (``_dmarc``-style labels, some internal hosts) and one
trailing dot is allowed (a fully qualified name). A name whose last label is all digits
is refused unless it is a complete IP address, because resolvers read ``1.2.3`` as the
IPv4 address ``1.2.0.3``. Internationalised names are converted to their ASCII
(punycode) form with IDNA 2008 / UTS #46, the same encoding trio uses to resolve them.
Host names are lowercased; the original string is kept in `Target.url`.
"""

from __future__ import annotations

import functools
import ipaddress
import re
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

import idna

__all__ = ["InvalidTarget", "Target", "TargetType", "parse_target"]

TargetType = Literal["http", "tcp", "dns", "ping"]

_LABEL = re.compile(r"(?!-)[a-z0-9_-]{1,63}(?<!-)\Z")
_DIGITS = re.compile(r"[0-9]+\Z")
_FORBIDDEN = re.compile(r"[\x00-\x20\x7f]")

_TCP_EXAMPLE = "a tcp monitor needs host:port, for example db.example.com:5432"
_HTTP_EXAMPLE = (
    "an http monitor needs an http:// or https:// URL, for example https://example.com/health"
)
_DNS_EXAMPLE = "a dns monitor needs a host name, for example example.com"
_PING_EXAMPLE = "a ping monitor needs a host name or an IP address, for example example.com"


class InvalidTarget(ValueError):
    """A monitor's ``url`` is not valid for its ``type``.

    ``str(exc)`` is one sentence for an API client (it becomes the message of a 422 on
    ``url``), for example "a tcp monitor needs host:port, for example db.example.com:5432".
    """


@dataclass(frozen=True, slots=True, kw_only=True)
class Target:
    """Where a monitor's checks go, as parsed by `parse_target`.

    Attributes:
        type: the monitor type: ``"http"``, ``"tcp"``, ``"dns"`` or ``"ping"``.
        host: a lowercase ASCII host name (IDNA-encoded, a trailing dot kept if given)
            or an IP address literal without brackets (``"::1"``, ``"192.0.2.1"``).
        port: TCP port 1 to 65,535. http: the explicit port or 80 / 443 by scheme;
            tcp: the required port; dns and ping: ``None``.
        url: the string the monitor was created with, unchanged.
        scheme: ``"http"`` or ``"https"`` for http monitors, ``None`` otherwise.
    """

    type: TargetType
    host: str
    port: int | None
    url: str
    scheme: str | None


def parse_target(type: str, url: str) -> Target:
    """Validate ``url`` for a monitor of ``type`` and split it into a `Target`.

    Args:
        type: ``"http"``, ``"tcp"``, ``"dns"`` or ``"ping"``.
        url: the monitor's ``url`` (see the module docstring for the accepted forms).

    Returns:
        The parsed `Target`; ``Target.url`` is ``url`` unchanged.

    Raises:
        InvalidTarget: ``url`` is not valid for ``type``, or ``type`` is unknown. No other
            exception escapes, whatever the input.

    Results are cached (the function is pure and `Target` is immutable), so the probes
    can call it on every check for the price of a dictionary look-up.
    """
    return _parse_cached(type, url)


@functools.lru_cache(maxsize=16_384)
def _parse_cached(type: str, url: str) -> Target:
    if not isinstance(url, str) or not url:
        raise InvalidTarget("url must not be empty")
    if _FORBIDDEN.search(url):
        raise InvalidTarget("url must not contain spaces or control characters")
    try:
        url.encode("utf-8")
    except UnicodeError:
        raise InvalidTarget("url must be valid Unicode text (it holds a lone surrogate)") from None
    try:
        if type == "http":
            return _parse_http(url)
        if type == "tcp":
            return _parse_tcp(url)
        if type == "dns":
            return _parse_dns(url)
        if type == "ping":
            return _parse_ping(url)
    except InvalidTarget:
        raise
    except ValueError as exc:  # urllib and idna report bad input as ValueError subclasses
        raise InvalidTarget(f"url is not valid: {exc}") from None
    raise InvalidTarget("type must be one of http, tcp, dns, ping")


def _parse_http(url: str) -> Target:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not parts.netloc:
        raise InvalidTarget(_HTTP_EXAMPLE)
    if "@" in parts.netloc:
        raise InvalidTarget("a user name or password in the URL is not supported")
    raw_host = parts.hostname
    if not raw_host:
        raise InvalidTarget(f"{_HTTP_EXAMPLE}; this URL has no host")
    try:
        port = parts.port
    except ValueError:
        raise InvalidTarget("the port in the URL must be a number from 1 to 65535") from None
    if port is None:
        if parts.netloc.endswith(":"):
            raise InvalidTarget("the port in the URL must be a number from 1 to 65535")
        port = 443 if scheme == "https" else 80
    elif port == 0:
        raise InvalidTarget("the port in the URL must be a number from 1 to 65535")
    bracketed = parts.netloc.rsplit("@", 1)[-1].startswith("[")
    host = _host(raw_host, bracketed=bracketed, example=_HTTP_EXAMPLE)
    return Target(type="http", host=host, port=port, url=url, scheme=scheme)


def _parse_tcp(url: str) -> Target:
    rest = _strip_scheme(url, "tcp", _TCP_EXAMPLE)
    if rest.endswith("/"):
        rest = rest[:-1]
    if "/" in rest or "?" in rest or "#" in rest or "@" in rest:
        raise InvalidTarget(_TCP_EXAMPLE)
    if rest.startswith("["):
        end = rest.find("]")
        if end == -1 or rest[end + 1 : end + 2] != ":":
            raise InvalidTarget(f"{_TCP_EXAMPLE} (an IPv6 address goes in brackets: [::1]:5432)")
        raw_host, port_text, bracketed = rest[1:end], rest[end + 2 :], True
    else:
        if rest.count(":") > 1:
            raise InvalidTarget(f"{_TCP_EXAMPLE} (an IPv6 address goes in brackets: [::1]:5432)")
        raw_host, sep, port_text = rest.partition(":")
        bracketed = False
        if not sep:
            raise InvalidTarget(f"{_TCP_EXAMPLE}; the port is missing")
    if not raw_host:
        raise InvalidTarget(f"{_TCP_EXAMPLE}; the host is missing")
    port = _port(port_text)
    host = _host(raw_host, bracketed=bracketed, example=_TCP_EXAMPLE)
    return Target(type="tcp", host=host, port=port, url=url, scheme=None)


def _parse_dns(url: str) -> Target:
    rest = _strip_scheme(url, "dns", _DNS_EXAMPLE)
    if any(c in rest for c in "/?#@[]") or (":" in rest and not _is_ip(rest)):
        raise InvalidTarget(f"{_DNS_EXAMPLE} (no port, path or scheme other than dns://)")
    if _is_ip(rest):
        raise InvalidTarget(
            "a dns monitor checks that a host name resolves; give a name such as "
            "example.com, not an IP address (use a ping or tcp monitor for an address)"
        )
    host = _host(rest, bracketed=False, example=_DNS_EXAMPLE)
    return Target(type="dns", host=host, port=None, url=url, scheme=None)


def _parse_ping(url: str) -> Target:
    rest = _strip_scheme(url, "ping", _PING_EXAMPLE)
    bracketed = rest.startswith("[") and rest.endswith("]")
    if bracketed:
        rest = rest[1:-1]
    if any(c in rest for c in "/?#@[]") or (":" in rest and not _is_ip(rest)):
        raise InvalidTarget(f"{_PING_EXAMPLE} (no port or path)")
    host = _host(rest, bracketed=bracketed, example=_PING_EXAMPLE)
    return Target(type="ping", host=host, port=None, url=url, scheme=None)


def _strip_scheme(url: str, scheme: str, example: str) -> str:
    """Drop an optional ``scheme://`` prefix; refuse any other scheme."""
    head, sep, rest = url.partition("://")
    if not sep:
        return url
    if head.lower() != scheme:
        raise InvalidTarget(example)
    return rest


def _port(text: str) -> int:
    if not _DIGITS.match(text) or len(text) > 5 or not 1 <= int(text) <= 65535:
        raise InvalidTarget("the port must be a number from 1 to 65535")
    return int(text)


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _host(raw: str, *, bracketed: bool, example: str) -> str:
    """Validate one host: an IP literal (IPv6 only in brackets where the form needs them)
    or a host name. Returns the normalised host (see the module docstring)."""
    if not raw:
        raise InvalidTarget(f"{example}; the host is missing")
    if "%" in raw:
        raise InvalidTarget("IPv6 zone identifiers (the part after %) are not supported")
    try:
        ip = ipaddress.ip_address(raw)
    except ValueError:
        ip = None
    if ip is not None:
        if bracketed and ip.version != 6:
            raise InvalidTarget("only an IPv6 address goes in brackets")
        return ip.compressed
    if bracketed:
        raise InvalidTarget(f"{raw!r} in brackets is not an IPv6 address")
    return _host_name(raw, example)


def _host_name(raw: str, example: str) -> str:
    name = raw
    if not name.isascii():
        try:
            name = idna.encode(name, uts46=True).decode("ascii")
        except (idna.IDNAError, UnicodeError, ValueError):
            raise InvalidTarget(f"{raw!r} is not a valid host name") from None
    name = name.lower()
    bare = name[:-1] if name.endswith(".") else name
    if not bare or len(bare) > 253:
        raise InvalidTarget(f"{raw!r} is not a valid host name ({example})")
    labels = bare.split(".")
    if not all(_LABEL.match(label) for label in labels):
        raise InvalidTarget(f"{raw!r} is not a valid host name ({example})")
    if _DIGITS.match(labels[-1]):
        raise InvalidTarget(f"{raw!r} is neither a valid host name nor an IP address")
    return name
