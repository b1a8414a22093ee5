"""The graph of monitor dependencies (docs/incidents.md, "Dependencies"): a monitor's
``depends_on`` names at most :data:`MAX_DEPENDENCIES` monitors of its own account, and the
graph of every account has no cycle.

Both rules are checked in the writing transaction, after the write, under a
transaction-scoped advisory lock on the account's graph (:func:`lock_graph`): two
transactions that would close a cycle together (A on B in one, B on A in the other) are
serialized, and the second's check, whose statement starts after the first committed
(READ COMMITTED), sees both edges and refuses. Deleting a monitor takes the same lock
before it removes the monitor's id from the others' ``depends_on``, so a concurrent write
cannot leave a dangling id behind.

How a dependency suppresses a dependent's incident and alert is the batch's
(:mod:`store.alerting`).
"""

from __future__ import annotations

from collections.abc import Sequence

from .database import Connection
from .errors import StoreError
from .owned import foreign_ids

__all__ = [
    "MAX_DEPENDENCIES",
    "DependencyCycle",
    "UnknownDependency",
    "check_dependencies",
    "dependents",
    "lock_graph",
]

MAX_DEPENDENCIES = 10
"""The most monitors one monitor may depend on (docs/incidents.md, "Dependencies")."""


class UnknownDependency(StoreError):
    """``depends_on[index]`` is no monitor of the account (a heartbeat, another account's
    monitor, a deleted one): the API's 422 ``unknown_monitor``.

    Attributes:
        index: its position in ``depends_on``.
        monitor_id: the id.
    """

    def __init__(self, index: int, monitor_id: str) -> None:
        super().__init__(f"depends_on[{index}] is no monitor of the account: {monitor_id}")
        self.index = index
        self.monitor_id = monitor_id


class DependencyCycle(StoreError):
    """The write would make a monitor depend on itself, directly or through others: the
    API's 422 ``dependency_cycle``.

    Attributes:
        monitor_id: the monitor written.
        index: the position in its ``depends_on`` of the first parent through which it
            would depend on itself (the parent is the monitor itself for a cycle of 1).
        parent: that parent's id.
    """

    def __init__(self, monitor_id: str, index: int, parent: str) -> None:
        super().__init__(
            f"{monitor_id} would depend on itself through depends_on[{index}] ({parent})"
        )
        self.monitor_id = monitor_id
        self.index = index
        self.parent = parent


async def lock_graph(connection: Connection, account_id: str) -> None:
    """Take the account's dependency-graph lock until the transaction ends (a
    transaction-scoped advisory lock on a 64-bit hash of the account id)."""
    await connection.execute(
        "SELECT pg_advisory_xact_lock(hashtextextended('depends_on:' || $1, 0))", account_id
    )


# From each of the monitor's parents (root: its position in depends_on), the monitors it
# reaches through depends_on; UNION keeps each (root, monitor) once, so the walk is linear
# in the account's graph and ends even where other cycles exist (none should).
_CYCLE = """
WITH RECURSIVE walk (root, id) AS (
    SELECT d.n, d.id FROM unnest($3::text[]) WITH ORDINALITY AS d(id, n)
    UNION
    SELECT w.root, p
    FROM walk w JOIN monitors m ON m.id = w.id AND m.account_id = $1,
         unnest(m.depends_on) AS p
    WHERE w.id <> $2
)
SELECT min(root) FROM walk WHERE id = $2
"""


async def check_dependencies(
    connection: Connection, account_id: str, monitor_id: str, depends_on: Sequence[str]
) -> None:
    """Check the ``depends_on`` just written for ``monitor_id`` (module docstring): take
    the account's graph lock, then require every id to be a monitor of the account and no
    cycle through ``monitor_id``. Must run inside the writing transaction, after the
    write; raising rolls it back.

    Raises:
        UnknownDependency: the first id that is no monitor of the account.
        DependencyCycle: ``monitor_id`` would depend on itself.
    """
    await lock_graph(connection, account_id)
    if not depends_on:
        return
    foreign = await foreign_ids(connection, table="monitors", account_id=account_id, ids=depends_on)
    if foreign:
        raise UnknownDependency(list(depends_on).index(foreign[0]), foreign[0])
    root = await connection.fetchval(_CYCLE, account_id, monitor_id, list(depends_on))
    if root is not None:
        raise DependencyCycle(monitor_id, root - 1, depends_on[root - 1])


async def dependents(connection: Connection, account_id: str, monitor_id: str) -> list[str]:
    """The monitors of the account that depend on ``monitor_id``, in creation order;
    takes the account's graph lock first (a monitor being deleted: module docstring)."""
    await lock_graph(connection, account_id)
    rows = await connection.fetch(
        "SELECT id FROM monitors WHERE account_id = $1 AND $2 = ANY(depends_on) ORDER BY seq",
        account_id,
        monitor_id,
    )
    return [r["id"] for r in rows]
