"""Idempotency key records (asyncio side; run through :class:`store.Database`).

The web layer's :mod:`web.idempotency` owns the rules (docs/api.md, Idempotency keys); this
module owns the table ``idempotency_keys`` and the lock that tells a request still running
from one that finished.

A key is *claimed* with a transaction-scoped advisory lock on a 64-bit hash of
``(account, key)`` (``pg_try_advisory_xact_lock``): taken without waiting, held until the
claiming transaction commits or rolls back, released by Postgres even if the process dies.
While one transaction holds it, every other claim of the same key answers
:data:`IN_USE`. Once it committed, the stored row is visible to the next claimant (locks
are released after the commit is visible), which replays it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final, Literal

from .database import Connection

__all__ = ["IN_USE", "StoredResponse", "claim_key", "purge_keys", "save_key"]

IN_USE: Final = "in_use"
"""What :func:`claim_key` answers while another transaction holds the key."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredResponse:
    """The stored outcome of a key: the request's fingerprint and the response (status,
    the body's JSON text or None, extra headers), stored at ``created`` (epoch seconds)."""

    fingerprint: str
    status: int
    body: str | None
    headers: dict[str, str]
    created: int


async def claim_key(
    connection: Connection, account_id: str, key: str, *, expired_before: int
) -> StoredResponse | Literal["in_use"] | None:
    """Claim ``key`` of ``account_id`` for the rest of the current transaction.

    Must run inside a transaction. A stored response created before ``expired_before``
    (epoch seconds) has expired: it is deleted and the key is claimed afresh.

    Returns:
        :data:`IN_USE` when another transaction holds the key (nothing was locked); the
        :class:`StoredResponse` when the key was used before and has not expired (the lock
        is held but nothing will be written); None when the key is free and now claimed.
    """
    locked = await connection.fetchval(
        "SELECT pg_try_advisory_xact_lock(hashtextextended($1 || ':' || $2, 0))",
        account_id,
        key,
    )
    if not locked:
        return IN_USE
    row = await connection.fetchrow(
        "SELECT fingerprint, status, body, headers, created FROM idempotency_keys "
        "WHERE account_id = $1 AND key = $2",
        account_id,
        key,
    )
    if row is None:
        return None
    if row["created"] < expired_before:
        await connection.execute(
            "DELETE FROM idempotency_keys WHERE account_id = $1 AND key = $2", account_id, key
        )
        return None
    return StoredResponse(
        fingerprint=row["fingerprint"],
        status=row["status"],
        body=row["body"],
        headers=dict(row["headers"]),
        created=row["created"],
    )


async def save_key(
    connection: Connection,
    account_id: str,
    key: str,
    *,
    fingerprint: str,
    status: int,
    body: Any,
    headers: dict[str, str],
    created: int,
) -> None:
    """Store the response of a claimed key (``body`` JSON-able, or None). Must run in the
    transaction that claimed it, so the response is stored exactly when the request's own
    writes commit."""
    await connection.execute(
        "INSERT INTO idempotency_keys (account_id, key, fingerprint, status, body, headers,"
        " created) VALUES ($1, $2, $3, $4, $5, $6, $7)",
        account_id,
        key,
        fingerprint,
        status,
        None if body is None else json.dumps(body, separators=(",", ":")),
        headers,
        created,
    )


async def purge_keys(connection: Connection, expired_before: int) -> int:
    """Delete every key stored before ``expired_before`` (epoch seconds); the number
    deleted."""
    result: str = await connection.execute(
        "DELETE FROM idempotency_keys WHERE created < $1", expired_before
    )
    return int(result.rsplit(" ", 1)[-1])
