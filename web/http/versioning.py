"""Date-based API versions (docs/api.md, Conventions and decisions: ``Service-Version``).

An account is pinned to :data:`CURRENT_VERSION` when its first token is created; a request
may ask for another known version with ``Service-Version: YYYY-MM-DD``; every response
names the version used in ``Service-Version``. Only one version exists so far, so a
version changes nothing yet but is validated, pinned and echoed, ready for the first
breaking change.
"""

from __future__ import annotations

import re

from .errors import ApiError

CURRENT_VERSION = "2026-11-20"
"""The version new accounts are pinned to (docs/api.md, Conventions and decisions)."""

KNOWN_VERSIONS = frozenset({CURRENT_VERSION})
"""Every version this server can answer in."""

HEADER = "Service-Version"
_DATE = re.compile(r"^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])$")


def resolve_version(requested: str | None, pinned: str | None) -> str:
    """The version of a request: the header's when sent, else the account's pin, else the
    current version.

    Raises:
        ApiError: ``invalid_version`` (400) when the header is not ``YYYY-MM-DD``;
            ``unknown_version`` (400) when it names no version of this API.
    """
    if requested is None:
        return pinned if pinned in KNOWN_VERSIONS else CURRENT_VERSION
    value = requested.strip()
    if not _DATE.match(value):
        raise ApiError(
            "invalid_version",
            f"{HEADER} must be a date of the form YYYY-MM-DD, got {requested[:40]!r}",
            param=HEADER,
        )
    if value not in KNOWN_VERSIONS:
        raise ApiError(
            "unknown_version",
            f"{HEADER} {value} is not a version of this API; known: "
            + ", ".join(sorted(KNOWN_VERSIONS)),
            param=HEADER,
        )
    return value
