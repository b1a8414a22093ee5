"""Accounts and API token records (asyncio side; run through :class:`store.Database`).

Tokens are created and revoked from the command line (docs/operations.md, Command line). The
JWT is never stored: only its ``tok_`` id (the JWT's ``sub``), an optional name,
permissions, expiry and revocation, so a database leak yields no usable token and revocation
takes effect on the next request. Nor is the signing secret: only its fingerprint
(:func:`recorded_fingerprint`), so that every node signs with the same one
(docs/several-nodes.md, One secret per database).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from .database import Connection
from .ids import new_id
from .records import AccountRecord, TokenContext, TokenRecord

T = TypeVar("T")

_TOKEN = "id, account_id, name, permissions, created, expires_at, revoked_at"


async def ensure_account(connection: Connection, name: str, now: int) -> AccountRecord:
    """The account called ``name``, created when missing (concurrency-safe)."""
    await connection.execute(
        "INSERT INTO accounts (id, name, created) VALUES ($1, $2, $3) "
        "ON CONFLICT (name) DO NOTHING",
        new_id("acct"),
        name,
        now,
    )
    row = await connection.fetchrow("SELECT * FROM accounts WHERE name = $1", name)
    return AccountRecord.from_row(row)


async def get_account(connection: Connection, name: str) -> AccountRecord | None:
    """The account called ``name``, or None."""
    row = await connection.fetchrow("SELECT * FROM accounts WHERE name = $1", name)
    return None if row is None else AccountRecord.from_row(row)


async def create_token(
    connection: Connection,
    account_name: str,
    permissions: list[str],
    *,
    now: int,
    expires_at: int | None,
    current_version: str,
    name: str | None = None,
) -> tuple[AccountRecord, TokenRecord]:
    """Create a token record for ``account_name`` (creating the account if needed) and pin
    the account to ``current_version`` if this is its first token (docs/api.md, Conventions:
    versions). ``name``: the token's optional name, 1 to 100 characters (the caller checks
    it; the database refuses others). Must run in a transaction."""
    account = await ensure_account(connection, account_name, now)
    if account.api_version is None:
        await connection.execute(
            "UPDATE accounts SET api_version = $2 WHERE id = $1 AND api_version IS NULL",
            account.id,
            current_version,
        )
        account = AccountRecord.from_row(
            await connection.fetchrow("SELECT * FROM accounts WHERE id = $1", account.id)
        )
    row = await connection.fetchrow(
        f"INSERT INTO api_tokens ({_TOKEN}) VALUES ($1, $2, $3, $4, $5, $6, NULL) "
        f"RETURNING {_TOKEN}",
        new_id("tok"),
        account.id,
        name,
        permissions,
        now,
        expires_at,
    )
    return account, TokenRecord.from_row(row)


async def create_first_token(
    connection: Connection,
    account_name: str,
    permissions: list[str],
    *,
    now: int,
    current_version: str,
) -> TokenRecord | None:
    """On a database with no account yet (the very first start of ``uptrio serve``):
    create ``account_name`` and a token that never expires, as :func:`create_token`;
    otherwise nothing, and None. Must run in a transaction; a transaction-scoped advisory
    lock makes two services starting at once on one database create one account."""
    await connection.execute("SELECT pg_advisory_xact_lock(hashtext('uptrio.first_token'))")
    if await connection.fetchval("SELECT EXISTS (SELECT 1 FROM accounts)"):
        return None
    _, token = await create_token(
        connection,
        account_name,
        permissions,
        now=now,
        expires_at=None,
        current_version=current_version,
    )
    return token


async def list_tokens(
    connection: Connection, account_name: str | None
) -> list[tuple[str, TokenRecord]]:
    """Every token as ``(account name, record)``, oldest first; one account's when named."""
    rows = await connection.fetch(
        f"SELECT a.name AS account_name, {', '.join('t.' + c for c in _TOKEN.split(', '))} "
        "FROM api_tokens t JOIN accounts a ON a.id = t.account_id "
        "WHERE $1::text IS NULL OR a.name = $1 ORDER BY t.created, t.id",
        account_name,
    )
    return [(r["account_name"], TokenRecord.from_row(r)) for r in rows]


async def revoke_token(connection: Connection, token_id: str, now: int) -> TokenRecord | None:
    """Revoke a token from now on (idempotent: an earlier revocation time is kept).
    None when no such token exists."""
    row = await connection.fetchrow(
        "UPDATE api_tokens SET revoked_at = coalesce(revoked_at, $2) WHERE id = $1 "
        f"RETURNING {_TOKEN}",
        token_id,
        now,
    )
    return None if row is None else TokenRecord.from_row(row)


async def token_context(connection: Connection, token_id: str) -> TokenContext | None:
    """The token with its account's name and pinned version, in one query; None when
    unknown. Revocation and expiry are reported, not filtered: the caller decides."""
    row = await connection.fetchrow(
        "SELECT t.id, t.account_id, a.name AS account_name, a.api_version, t.permissions, "
        "t.expires_at, t.revoked_at FROM api_tokens t JOIN accounts a ON a.id = t.account_id "
        "WHERE t.id = $1",
        token_id,
    )
    return None if row is None else TokenContext.from_row(row)


_TOKEN_COLUMNS = (
    ("tk.id", "id"),
    ("tk.account_id", "account_id"),
    ("a.name", "account_name"),
    ("a.api_version", "api_version"),
    ("tk.permissions", "permissions"),
    ("tk.expires_at", "expires_at"),
    ("tk.revoked_at", "revoked_at"),
)


def with_token_sql(resource_select: str, *, once: str | None = None) -> str:
    """One statement reading the token ``$1`` as :func:`token_context` does, its columns
    named ``token_<field>``, beside the row(s) ``resource_select`` reads (a ``SELECT``
    that may name the token's account as ``tk.account_id``; its own parameters from
    ``$2`` on), one row of NULLs when it reads none: the token and an authenticated
    GET's resource in one round trip. No row when the token is unknown. Read the token
    with :func:`token_of_row`.

    ``once``: for several rows, an SQL condition on the resource's row ``r`` true on one
    of them (or on the row of NULLs): only that row carries the token, the others NULLs
    (its permissions are not sent and decoded a hundred times for a page).
    """
    columns = ", ".join(
        f"{expression if once is None else f'CASE WHEN {once} THEN {expression} END'}"
        f" AS token_{name}"
        for expression, name in _TOKEN_COLUMNS
    )
    return (
        f"SELECT {columns}, r.* FROM api_tokens tk JOIN accounts a ON a.id = tk.account_id "
        f"LEFT JOIN LATERAL ({resource_select}) r ON true WHERE tk.id = $1"
    )


def token_of_row(row: Any) -> TokenContext:
    """The token of a row read with :func:`with_token_sql`."""
    return TokenContext(**{name: row[f"token_{name}"] for _, name in _TOKEN_COLUMNS})


async def token_context_then(
    connection: Connection,
    token_id: str,
    then: Callable[[Connection, TokenContext], Awaitable[T]],
) -> tuple[TokenContext | None, T | None]:
    """:func:`token_context`, then ``then(connection, token)`` on the same connection when
    the token is known: two reads in one unit of work (one crossing of the bridge, one
    pooled connection), the token's read first, so a revocation committed before it
    counts. ``then`` decides from the token whether to read anything (the web layer's
    read of an authenticated GET: ``web.http.middleware.authenticate``). Returns the
    token (None when unknown, and then ``then`` is not called) and what ``then``
    returned."""
    token = await token_context(connection, token_id)
    if token is None:
        return None, None
    return token, await then(connection, token)


async def recorded_fingerprint(connection: Connection, secret: str, fingerprint: str) -> str:
    """The fingerprint recorded for the secret called ``secret`` (``jwt``); when none is
    yet, ``fingerprint`` is recorded and returned (the first process on the database).
    Two processes recording at once: one wins, and both get the winner's."""
    await connection.execute(
        "INSERT INTO secret_fingerprints (name, fingerprint) VALUES ($1, $2) "
        "ON CONFLICT (name) DO NOTHING",
        secret,
        fingerprint,
    )
    recorded: str = await connection.fetchval(
        "SELECT fingerprint FROM secret_fingerprints WHERE name = $1", secret
    )
    return recorded


async def reset_fingerprint(connection: Connection, secret: str, fingerprint: str, now: int) -> int:
    """Make ``fingerprint`` the one recorded for the secret called ``secret`` and revoke,
    at ``now`` (epoch seconds), every token not yet revoked: they were signed with the
    previous secret, so none of them can be used any more (``uptrio tokens
    reset-secret``). Returns the tokens revoked. Must run in a transaction."""
    await connection.execute(
        "INSERT INTO secret_fingerprints (name, fingerprint) VALUES ($1, $2) "
        "ON CONFLICT (name) DO UPDATE SET fingerprint = $2, recorded_at = now()",
        secret,
        fingerprint,
    )
    status = await connection.execute(
        "UPDATE api_tokens SET revoked_at = $1 WHERE revoked_at IS NULL", now
    )
    return int(status.rsplit(" ", 1)[-1])
