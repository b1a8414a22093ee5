"""Quota leases for the rate limits across nodes (docs/api.md, Rate limits;
docs/several-nodes.md, Rate limits across nodes: they hold for the whole service).

Table ``rate_limit_quota`` (migration 0011): one row per ``(limit window name, key)``
holding what is charged to each slice of the window that still counts. A node leases a
part of what is left (:func:`take_quota`, one statement: the function
``take_rate_limit_quota``), admits from it without asking, gives back what it did not
use once the lease's slice ended, and charges what it admitted while it could not reach
the database. The caller (the web layer's :mod:`web.quota`) decides what the names, keys
and slices mean; this module only stores and sums them.

Query functions (asyncio side); run them with :meth:`store.Database.run` (each is one
statement, committed on its own).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .database import Connection

__all__ = ["QuotaAnswer", "QuotaItem", "delete_expired_quota", "take_quota"]


@dataclass(frozen=True, slots=True, kw_only=True)
class QuotaItem:
    """One window of one key in an exchange (:func:`take_quota`).

    Attributes:
        name: the window's name (``"token/minute"``).
        key: what it counts (a token id, an account id, an address).
        limit: requests allowed in the window (a request of slice ``s`` counts until the
            end of slice ``s + 60``).
        slice: the current slice number, ``floor(epoch seconds / slice_seconds)``.
        slice_seconds: a slice's length (the window's period / 60), seconds.
        lease: take a lease at ``slice`` (after the charge).
        need: requests waiting for the lease on the node: the lease is at least that
            (the room permitting), so one statement serves them all.
        charge_slice: the slice ``charge`` goes to (ignored when it no longer counts).
        charge: requests added there: a debt (admitted without a lease), or, negative,
            a lease's unused part given back (never below 0).
    """

    name: str
    key: str
    limit: int
    slice: int
    slice_seconds: float
    lease: bool
    need: int = 1
    charge_slice: int = 0
    charge: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class QuotaAnswer:
    """What the table said about one :class:`QuotaItem`.

    Attributes:
        granted: the lease (0 without one, or when the window is full): requests the
            node may admit in the item's slice.
        counted: what the window counts after the item (the lease included).
        oldest_slice: the oldest slice that counts something, or None.
        retry_slice: when the window is full, the slice whose end leaves room for one
            more request; None when there is room.
        live_nodes: nodes renewing their leases (at least 1), as ``uptrio nodes list``
            counts them.
    """

    granted: int
    counted: int
    oldest_slice: int | None
    retry_slice: int | None
    live_nodes: int


async def take_quota(connection: Connection, items: Sequence[QuotaItem]) -> list[QuotaAnswer]:
    """One exchange, in one statement: each item's charge, then its lease (migration
    0011's ``take_rate_limit_quota``: a lease is ``least(greatest(room / (2 * live
    nodes), 1), room)``, so leases shrink with what is left and the window never counts
    more than its limit, debts apart; at least ``need``, the room permitting). Rows are
    locked in (name, key) order.

    Returns:
        One answer per item, in the order of ``items``.

    Raises:
        store.StoreError: as :meth:`store.Database.run` does.
    """
    if not items:
        return []
    rows = await connection.fetch(
        "SELECT * FROM take_rate_limit_quota($1::text[], $2::text[], $3::integer[],"
        " $4::bigint[], $5::float8[], $6::boolean[], $7::integer[], $8::bigint[],"
        " $9::integer[])",
        [i.name for i in items],
        [i.key for i in items],
        [i.limit for i in items],
        [i.slice for i in items],
        [i.slice_seconds for i in items],
        [i.lease for i in items],
        [i.need for i in items],
        [i.charge_slice for i in items],
        [i.charge for i in items],
    )
    answers: list[QuotaAnswer | None] = [None] * len(items)
    for row in rows:
        answers[row["item"] - 1] = QuotaAnswer(
            granted=row["granted"],
            counted=row["counted"],
            oldest_slice=row["oldest_slice"],
            retry_slice=row["retry_slice"],
            live_nodes=row["live_nodes"],
        )
    return [a for a in answers if a is not None]


async def delete_expired_quota(connection: Connection, now: float) -> int:
    """Delete the rows whose every slice stopped counting by ``now`` (epoch seconds),
    skipping rows an exchange holds (they are in use); how many went."""
    deleted = await connection.fetchval(
        "WITH gone AS (DELETE FROM rate_limit_quota WHERE (limit_name, key) IN ("
        " SELECT limit_name, key FROM rate_limit_quota WHERE expires_at < $1"
        " FOR UPDATE SKIP LOCKED) RETURNING 1) SELECT count(*) FROM gone",
        now,
    )
    return int(deleted)
