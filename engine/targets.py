"""What a monitor points at: `Target`, and the rules every probe type's ``url`` parser shares.

Pure parsing, no I/O: nothing here resolves a name or opens a socket. Each probe type
states the ``url`` forms it accepts in its own parser, registered with the type in
``engine.probes`` (`engine.probes.PROBE_TYPES`; the forms users read are in
docs/checks.md, "Monitor types"); `engine.probes.parse_target` picks the parser of a
monitor's ``type``. The API calls it to validate ``url`` (a failure is a 422 on ``url``;
``str(exc)`` is the message); the probes call it again on every check (cached) to learn
where to connect. The length limit on ``url`` (2,048 characters, docs/api.md) is checked
by the API, not here.

What every parser shares: `url_parser` (a url is non-empty text without spaces, control
characters or lone surrogates; results cached; a ``ValueError`` from a library becomes
`InvalidTarget`), `strip_scheme` (the optional ``type://`` prefix), `parse_port` and
`parse_host`.

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
from collections.abc import Callable
from dataclasses import dataclass

import idna

__all__ = [
    "InvalidTarget",
    "Target",
    "check_url_text",
    "is_ip",
    "parse_host",
    "parse_port",
    "strip_scheme",
    "url_parser",
]

_LABEL = re.compile(r"(?!-)[a-z0-9_-]{1,63}(?<!-)\Z")
_DIGITS = re.compile(r"[0-9]+\Z")
_FORBIDDEN = re.compile(r"[\x00-\x20\x7f]")
_CACHE_SIZE = 16_384


class InvalidTarget(ValueError):
    """A monitor's ``url`` is not valid for its ``type``.

    ``str(exc)`` is one sentence for an API client (it becomes the message of a 422 on
    ``url``), for example "a tcp monitor needs host:port, for example db.example.com:5432".
    """


@dataclass(frozen=True, slots=True, kw_only=True)
class Target:
    """Where a monitor's checks go, as parsed by its type's parser.

    Attributes:
        type: the monitor type, a name in `engine.probes.PROBE_TYPES` (``"http"``,
            ``"tcp"``, ``"dns"``, ``"ping"``).
        host: a lowercase ASCII host name (IDNA-encoded, a trailing dot kept if given)
            or an IP address literal without brackets (``"::1"``, ``"192.0.2.1"``).
        port: TCP port 1 to 65,535 where the type connects to one (http: the explicit
            port or 80 / 443 by scheme; tcp: the required port), else ``None``.
        url: the string the monitor was created with, unchanged.
        scheme: the URL scheme where the type has several (``"http"`` or ``"https"``),
            else ``None``.
    """

    type: str
    host: str
    port: int | None
    url: str
    scheme: str | None


def check_url_text(url: object) -> None:
    """Raise `InvalidTarget` unless ``url`` is a non-empty string without spaces, control
    characters or lone surrogates (the rules every type shares, checked first)."""
    if not isinstance(url, str) or not url:
        raise InvalidTarget("url must not be empty")
    if _FORBIDDEN.search(url):
        raise InvalidTarget("url must not contain spaces or control characters")
    try:
        url.encode("utf-8")
    except UnicodeError:
        raise InvalidTarget("url must be valid Unicode text (it holds a lone surrogate)") from None


def url_parser(parse: Callable[[str], Target]) -> Callable[[str], Target]:
    """Make ``parse`` (one type's rules: ``url`` to `Target`, raising `InvalidTarget`)
    a probe type's parser: `check_url_text` first, a ``ValueError`` from a library
    (urllib, idna) turned into `InvalidTarget`, so that no other exception escapes,
    whatever the input; results cached (the parse is pure and `Target` immutable, so
    the probes can parse on every check for the price of a dictionary look-up).
    """

    @functools.lru_cache(maxsize=_CACHE_SIZE)
    @functools.wraps(parse)
    def parse_url(url: str) -> Target:
        check_url_text(url)
        try:
            return parse(url)
        except InvalidTarget:
            raise
        except ValueError as exc:  # urllib and idna report bad input as ValueError subclasses
            raise InvalidTarget(f"url is not valid: {exc}") from None

    return parse_url


def strip_scheme(url: str, scheme: str, example: str) -> str:
    """Drop an optional ``scheme://`` prefix (any case); refuse any other scheme with
    ``example`` (the type's one-sentence form) as the message."""
    head, sep, rest = url.partition("://")
    if not sep:
        return url
    if head.lower() != scheme:
        raise InvalidTarget(example)
    return rest


def parse_port(text: str) -> int:
    """A TCP port written in decimal, 1 to 65,535."""
    if not _DIGITS.match(text) or len(text) > 5 or not 1 <= int(text) <= 65535:
        raise InvalidTarget("the port must be a number from 1 to 65535")
    return int(text)


def is_ip(text: str) -> bool:
    """Whether ``text`` is an IPv4 or IPv6 address literal (without brackets)."""
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def parse_host(raw: str, *, bracketed: bool, example: str) -> str:
    """Validate one host: an IP literal (IPv6 only in brackets where the form needs them)
    or a host name. Returns the normalised host (see the module docstring); ``example``
    (the type's one-sentence form) completes the messages."""
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
