"""Prefixed random identifiers (docs/api.md, Conventions: "Identifiers: prefixed strings").

An id is ``<prefix>_`` followed by 24 characters of lowercase base32 (120 random bits from
``os.urandom``), for example ``mon_4kq2x7c3nd5b6h2rj7w3zt4yp``. Ids carry no order and no
meaning: keyset pagination orders by a separate sequence column (see
:mod:`store._pagination`).
"""

from __future__ import annotations

import base64
import os

PREFIXES = frozenset(
    {
        "acct",
        "mon",
        "inc",
        "inu",
        "chk",
        "tok",
        "req",
        "alt",
        "stp",
        "evt",
        "we",
        "whd",
        "hbt",
        "png",
        "hbm",
        "mbr",
        "nch",
        "esc",
        "ntf",
        "mnt",
        "sch",
        "ovr",
        "sub",
    }
)


def new_id(prefix: str) -> str:
    """Return a new random id with ``prefix`` (one of :data:`PREFIXES`), e.g. ``new_id("mon")``.

    Raises:
        ValueError: ``prefix`` is not a known prefix.
    """
    if prefix not in PREFIXES:
        raise ValueError(f"unknown id prefix {prefix!r}")
    return f"{prefix}_{base64.b32encode(os.urandom(15)).decode('ascii').lower()}"


_PAIRS = tuple(
    a + b for a in "abcdefghijklmnopqrstuvwxyz234567" for b in "abcdefghijklmnopqrstuvwxyz234567"
)
"""Every pair of lowercase base32 characters (RFC 4648's alphabet), by the 10 bits they
encode: a check id is 12 of them."""


def new_check_id(created: int) -> str:
    """A check id that carries the check's ``created`` (epoch seconds, below 2**40): ``chk_``,
    8 base32 characters of ``created`` (40 bits, big-endian), 16 of randomness (80 bits).
    Same alphabet and length as :func:`new_id`, and the same text as
    ``base64.b32encode`` of those 15 bytes, lowercased (RFC 4648), built from
    :data:`_PAIRS` instead: one is made per check, and this takes 2.3 µs where
    ``b32encode`` takes 5.3 (bench/RESULTS.md, the performance campaign). The checks
    table's key is ``(monitor_id, created, id)``, and :func:`check_created` lets a cursor
    find its row without an index on ``id`` alone (migration 0003)."""
    n = (created << 80) | int.from_bytes(os.urandom(10), "big")
    p = _PAIRS
    return (
        f"chk_{p[n >> 110]}{p[(n >> 100) & 1023]}{p[(n >> 90) & 1023]}{p[(n >> 80) & 1023]}"
        f"{p[(n >> 70) & 1023]}{p[(n >> 60) & 1023]}{p[(n >> 50) & 1023]}"
        f"{p[(n >> 40) & 1023]}{p[(n >> 30) & 1023]}{p[(n >> 20) & 1023]}"
        f"{p[(n >> 10) & 1023]}{p[n & 1023]}"
    )


def check_created(check_id: str) -> int | None:
    """The ``created`` a check id of :func:`new_check_id` carries (epoch seconds), or None
    when ``check_id`` cannot be one. Ids made before migration 0003 are random: what they
    decode to is not their ``created``, so callers fall back to a search by id."""
    body = check_id.removeprefix("chk_")
    if len(body) != 24 or body == check_id:
        return None
    try:
        raw = base64.b32decode(body.upper())
    except ValueError:
        return None
    return int.from_bytes(raw[:5], "big")


def has_prefix(value: str, prefix: str) -> bool:
    """True when ``value`` looks like an id of ``prefix``: the prefix, ``_`` and 1-64 more
    characters of ``[a-z0-9]``. Used to reject malformed ids before a query."""
    body = value[len(prefix) + 1 :]
    return (
        value.startswith(prefix + "_")
        and 0 < len(body) <= 64
        and body.isascii()
        and body.isalnum()
        and body.lower() == body
    )
