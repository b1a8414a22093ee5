"""The addresses ``uptrio serve`` takes on its command line, each an ``argparse`` type
that refuses a bad value with a message naming it (exit status 2 before anything starts):
the DNS nameserver of checks, the public URL of links, the SMTP relay and the providers'
bases of notifications (docs/operations.md, docs/alerts.md).
"""

from __future__ import annotations

import argparse
import ipaddress
from urllib.parse import urlsplit

from engine import CHANNEL_TYPES

__all__ = ["parse_nameserver", "parse_provider_base", "parse_public_url", "parse_smtp_url"]


def _http_url(text: str) -> bool:
    """Whether ``text`` is an absolute http(s) URL without query or fragment."""
    parts = urlsplit(text)
    return (
        parts.scheme in ("http", "https")
        and bool(parts.netloc)
        and not parts.query
        and not parts.fragment
    )


def parse_nameserver(text: str) -> tuple[str, int]:
    """``IP[:PORT]`` (IPv6 as ``[IP]:PORT``) for ``--dns-nameserver``; port 53 by default.

    Raises:
        argparse.ArgumentTypeError: not an IP address with an optional port.
    """
    host, port = text, "53"
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port = rest.removeprefix(":") or "53"
    elif text.count(":") == 1:
        host, port = text.split(":")
    try:
        ipaddress.ip_address(host)
        number = int(port)
        if not 0 < number < 65536:
            raise ValueError(port)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not IP[:PORT]: {text!r}") from None
    return host, number


def parse_public_url(text: str) -> str:
    """An absolute http(s) URL without query or fragment for ``--public-url``; returned
    without a trailing slash.

    Raises:
        argparse.ArgumentTypeError: anything else.
    """
    if not _http_url(text):
        raise argparse.ArgumentTypeError(f"not an http(s) URL without query: {text!r}")
    return text.rstrip("/")


def parse_smtp_url(text: str) -> str:
    """``smtp://[user:password@]host[:port]`` (STARTTLS) or ``smtps://…`` (TLS from the
    start) for ``--smtp-url`` (docs/alerts.md).

    Raises:
        argparse.ArgumentTypeError: another scheme, no host, a bad port, or a path,
            query or fragment.
    """
    parts = urlsplit(text)
    try:
        port = parts.port
    except ValueError:
        port = -1
    if (
        parts.scheme not in ("smtp", "smtps")
        or not parts.hostname
        or port == -1
        or parts.path not in ("", "/")
        or parts.query
        or parts.fragment
    ):
        raise argparse.ArgumentTypeError(
            f"not smtp://[user:password@]host[:port] or smtps://...: {text!r}"
        )
    return text


def parse_provider_base(text: str) -> tuple[str, str]:
    """``NAME=URL`` for ``--provider-base`` (docs/alerts.md): NAME a channel type, URL an
    absolute http(s) URL (returned without a trailing slash).

    Raises:
        argparse.ArgumentTypeError: no ``=``, an unknown channel type, or not an
            http(s) URL.
    """
    name, sep, url = text.partition("=")
    if not sep:
        raise argparse.ArgumentTypeError(f"not NAME=URL: {text!r}")
    if name not in CHANNEL_TYPES:
        raise argparse.ArgumentTypeError(
            f"unknown channel type {name!r} (one of {', '.join(CHANNEL_TYPES)})"
        )
    if not _http_url(url):
        raise argparse.ArgumentTypeError(f"not an http(s) URL: {url!r}")
    return name, url.rstrip("/")
