"""Prefixed random identifiers (spec 2.4: "Identifiers: prefixed strings").

An id is ``<prefix>_`` followed by 24 characters of lowercase base32 (120 random bits from
``os.urandom``), for example ``mon_4kq2x7c3nd5b6h2rj7w3zt4yp``. Ids carry no order and no
meaning: keyset pagination orders by a separate sequence column (see
:mod:`store._pagination`).
"""

from __future__ import annotations

import base64
import os

PREFIXES = frozenset({"acct", "mon", "inc", "chk", "tok", "req", "alt", "stp"})


def new_id(prefix: str) -> str:
    """Return a new random id with ``prefix`` (one of :data:`PREFIXES`), e.g. ``new_id("mon")``.

    Raises:
        ValueError: ``prefix`` is not a known prefix.
    """
    if prefix not in PREFIXES:
        raise ValueError(f"unknown id prefix {prefix!r}")
    return f"{prefix}_{base64.b32encode(os.urandom(15)).decode('ascii').lower()}"


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
