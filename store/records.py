"""Rows as the store hands them out: frozen dataclasses, one per table.

Field names are the column names; timestamps are integer epoch seconds (spec 2.4). These
are storage records, not API objects: the web layer shapes them into responses.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Self


class _FromRow:
    """Build a record from an asyncpg row (or mapping), ignoring extra columns."""

    @classmethod
    def from_row(cls, row: Any) -> Self:
        names = cls.__dataclass_fields__  # type: ignore[attr-defined]
        return cls(**{k: row[k] for k in names})


@dataclass(frozen=True, slots=True, kw_only=True)
class AccountRecord(_FromRow):
    """An account: ``acct_`` id, unique name, pinned API version (None before its first token)."""

    id: str
    name: str
    api_version: str | None
    created: int


@dataclass(frozen=True, slots=True, kw_only=True)
class TokenRecord(_FromRow):
    """An API token's record (the JWT itself is never stored; its ``sub`` is ``id``).

    ``expires_at`` and ``revoked_at`` are epoch seconds or None.
    """

    id: str
    account_id: str
    permissions: list[str]
    created: int
    expires_at: int | None
    revoked_at: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class TokenContext(_FromRow):
    """What authentication needs about a token, read in one query: the token and its
    account's name and pinned version."""

    id: str
    account_id: str
    account_name: str
    api_version: str | None
    permissions: list[str]
    expires_at: int | None
    revoked_at: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class MonitorRecord(_FromRow):
    """A monitor row plus ``last_checked_at`` (epoch seconds of its newest check, or None).

    ``run_epoch`` grows with every create, pause and resume; the engine writes a status
    only for the epoch it runs (see :func:`store.checks.write_check_batch`).
    """

    id: str
    account_id: str
    name: str
    url: str
    type: str
    status: str
    interval_seconds: int
    timeout_seconds: int
    method: str | None
    expected_status_code: int | None
    failure_threshold: int
    success_threshold: int
    run_epoch: int
    created: int
    updated: int
    metadata: dict[str, str]
    last_checked_at: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class IncidentRecord(_FromRow):
    """An incident row; ``resolved_at`` is epoch seconds or None while open."""

    id: str
    account_id: str
    title: str
    description: str | None
    status: str
    severity: str
    resolved_at: int | None
    resolution_message: str | None
    created: int
    updated: int
    metadata: dict[str, str]


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckRecord(_FromRow):
    """One check result (DESIGN's check object). ``response_time_ms`` in milliseconds."""

    id: str
    monitor_id: str
    status: str
    response_time_ms: float
    status_code: int | None
    error_code: str | None
    error_message: str | None
    created: int


def column_names(record: type[_FromRow]) -> list[str]:
    """The field names of a record class, in order."""
    return [f.name for f in fields(record)]  # type: ignore[arg-type]
