"""Escalation policies, who is told and when (docs/alerts.md; asyncio side: run them
through :class:`store.Database`): create, read, list, update, delete.

CRUD follows the other account-owned tables (:mod:`store.owned`): keyset pages by
``created``, ``updated`` or ``name``, PATCH as lock-diff-write, delete with a cursor
tombstone. Policies write no events.

- **One default per account** (docs/alerts.md): making a policy the default unsets the
  account's previous one in the same transaction, under a transaction-scoped advisory
  lock on the account, so two requests racing to set one never both win (the partial
  unique index ``escalation_policies_one_default`` of migration 0018 is the backstop).
- **In use** (docs/alerts.md): a policy named by a monitor, a heartbeat or an open alert
  is not deleted (:class:`PolicyInUse`); the check and the delete run under the same
  lock of the policy's row.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .database import Connection
from .errors import StoreError
from .events import EventCause
from .owned import delete_owned, foreign_ids, insert_owned, select_owned, write_changes
from .pagination import Page, PageRequest, fetch_page
from .records import EscalationPolicyRecord, column_names

__all__ = [
    "UPDATABLE",
    "PolicyInUse",
    "delete_policy",
    "get_policy",
    "insert_policy",
    "list_policies",
    "missing",
    "update_policy",
]

_COLUMNS = column_names(EscalationPolicyRecord)
_SELECT = ", ".join(f"t.{c}" for c in _COLUMNS)
UPDATABLE = frozenset({"name", "steps", "repeat", "is_default", "metadata"})
"""Columns :func:`update_policy` may change."""


class PolicyInUse(StoreError):
    """A policy still named by a monitor, a heartbeat or an open alert cannot be deleted
    (docs/alerts.md: 409 ``policy_in_use``).

    Attributes:
        users: the ids using it (``mon_``, ``hbt_``, ``alt_``), at most 5.
    """

    def __init__(self, policy_id: str, users: list[str]) -> None:
        super().__init__(f"escalation policy {policy_id} is used by {', '.join(users)}")
        self.users = users


async def _lock_defaults(connection: Connection, account_id: str) -> None:
    """Serialize the account's changes of its default policy until the transaction ends."""
    await connection.execute(
        "SELECT pg_advisory_xact_lock(hashtextextended('escalation_default:' || $1, 0))",
        account_id,
    )


async def _unset_default(connection: Connection, account_id: str, now: int) -> None:
    """The account's current default policy, if any, stops being it (``updated`` =
    ``now``)."""
    await connection.execute(
        "UPDATE escalation_policies SET is_default = false, updated = $2 "
        "WHERE account_id = $1 AND is_default",
        account_id,
        now,
    )


async def insert_policy(
    connection: Connection, values: Mapping[str, Any]
) -> EscalationPolicyRecord:
    """Insert a policy (``values``: every column of the record); an ``is_default`` one
    first unsets the account's previous default. Must run in a transaction."""
    if values["is_default"]:
        await _lock_defaults(connection, values["account_id"])
        await _unset_default(connection, values["account_id"], values["created"])
    row = await insert_owned(
        connection, table="escalation_policies", columns=_COLUMNS, select=_SELECT, values=values
    )
    return EscalationPolicyRecord.from_row(row)


async def get_policy(
    connection: Connection, account_id: str, policy_id: str, *, for_update: bool = False
) -> EscalationPolicyRecord | None:
    """The account's policy, or None. ``for_update`` locks it."""
    row = await select_owned(
        connection,
        table="escalation_policies",
        select=_SELECT,
        account_id=account_id,
        row_id=policy_id,
        for_update=for_update,
    )
    return None if row is None else EscalationPolicyRecord.from_row(row)


async def list_policies(
    connection: Connection, account_id: str, page: PageRequest
) -> Page[EscalationPolicyRecord]:
    """One page of the account's policies (``page.sort``: ``created``, ``updated`` or
    ``name``).

    Raises:
        CursorNotFound: the cursor names no policy of the account.
    """
    rows, has_more = await fetch_page(
        connection,
        table="escalation_policies",
        select=_SELECT,
        account_id=account_id,
        filters=[],
        page=page,
    )
    return Page([EscalationPolicyRecord.from_row(r) for r in rows], has_more)


async def update_policy(
    connection: Connection,
    account_id: str,
    policy_id: str,
    apply: Callable[[EscalationPolicyRecord], dict[str, Any]],
    now: int,
) -> EscalationPolicyRecord | None:
    """Lock the policy, compute changes with ``apply(current)`` (a subset of
    :data:`UPDATABLE`; it may raise to refuse) and write them, ``updated`` = ``now``
    (epoch seconds) when something changed; a move of ``is_default`` to true first
    unsets the account's previous default (so the lock-diff-write of
    :func:`store.owned.update_owned` is spelled out here: the unset must come between
    the diff and the write). Must run in a transaction. None when the
    account has no such policy."""

    await _lock_defaults(connection, account_id)
    current = await get_policy(connection, account_id, policy_id, for_update=True)
    if current is None:
        return None
    changes = apply(current)
    if not changes:
        return current
    if changes.get("is_default") is True:
        await _unset_default(connection, account_id, now)
    await write_changes(
        connection,
        table="escalation_policies",
        account_id=account_id,
        row_id=policy_id,
        changes=changes,
        updatable=UPDATABLE,
        now=now,
    )
    return await get_policy(connection, account_id, policy_id)


async def policy_users(connection: Connection, account_id: str, policy_id: str) -> list[str]:
    """The monitors, heartbeats and open alerts of the account naming the policy (at
    most 5 ids)."""
    rows = await connection.fetch(
        "(SELECT id FROM monitors WHERE account_id = $1 AND escalation_policy = $2 LIMIT 5) "
        "UNION ALL (SELECT id FROM heartbeats WHERE account_id = $1 "
        "AND escalation_policy = $2 LIMIT 5) "
        "UNION ALL (SELECT id FROM alerts WHERE account_id = $1 AND escalation_policy = $2 "
        "AND status <> 'resolved' LIMIT 5) LIMIT 5",
        account_id,
        policy_id,
    )
    return [r["id"] for r in rows]


async def delete_policy(
    connection: Connection,
    account_id: str,
    policy_id: str,
    now: int,
    cause: EventCause | None = None,
) -> bool:
    """Delete the account's policy (no event: ``cause`` is unused). Must run in a
    transaction. False when the account has no such policy.

    Raises:
        PolicyInUse: a monitor, heartbeat or open alert names it.
    """
    if await get_policy(connection, account_id, policy_id, for_update=True) is None:
        return False
    users = await policy_users(connection, account_id, policy_id)
    if users:
        raise PolicyInUse(policy_id, users)
    return await delete_owned(
        connection, table="escalation_policies", account_id=account_id, row_id=policy_id, now=now
    )


async def missing(connection: Connection, account_id: str, ids: Sequence[str]) -> list[str]:
    """The ids of ``ids`` that are no policy of the account, in their order."""
    return await foreign_ids(
        connection, table="escalation_policies", account_id=account_id, ids=ids
    )
