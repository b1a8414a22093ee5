"""Request counts shared between nodes for the rate limits (spec part 8; extensions part
6: "rate limits hold for the whole service"; issue 14, item 4).

Table ``rate_limit_counts`` (migration 0010): one row per ``(limit window name, key,
slice, node)`` holding that node's count of requests in that slice and when the slice
stops counting (``expires_at``, epoch seconds). The caller (the web layer's sync actor)
decides what the names, keys and slices mean; this module only stores and sums them.

Query functions (asyncio side); run :func:`sync_counts` with :meth:`store.Database.run`
(one statement, committed on its own).
"""

from __future__ import annotations

from collections.abc import Sequence

from .database import Connection

__all__ = ["sync_counts"]

_SYNC = (
    "WITH mine AS ("
    " INSERT INTO rate_limit_counts AS r (limit_name, key, slice, node, count, expires_at)"
    " SELECT n, k, s, $1, c, e FROM unnest($2::text[], $3::text[], $4::bigint[],"
    " $5::integer[], $6::float8[]) AS u(n, k, s, c, e) WHERE e >= $7"
    " ON CONFLICT (limit_name, key, slice, node)"
    " DO UPDATE SET count = GREATEST(r.count, EXCLUDED.count)),"
    " gone AS (DELETE FROM rate_limit_counts WHERE expires_at < $7) "
    "SELECT r.limit_name, r.key, r.slice, sum(r.count)::integer AS count"
    " FROM rate_limit_counts r"
    " JOIN unnest($8::text[], $9::text[]) AS w(n, k) ON r.limit_name = w.n AND r.key = w.k"
    " WHERE r.node <> $1 AND r.expires_at >= $7"
    " GROUP BY r.limit_name, r.key, r.slice"
)


async def sync_counts(
    connection: Connection,
    node: str,
    counts: Sequence[tuple[str, str, int, int, float]],
    keys: Sequence[tuple[str, str]],
    now: float,
) -> list[tuple[str, str, int, int]]:
    """One sync of node ``node``, in one statement: store its ``counts`` (``(name, key,
    slice, count, expires_at)``, counts in full, not increments: a count already stored
    is raised, never lowered, so a sync repeated after a lost answer adds nothing), delete
    every row expired at ``now`` (epoch seconds), and return the other nodes' counts of
    ``keys`` (``(name, key)`` pairs) still counting: ``(name, key, slice, sum of the
    other nodes' counts)``.

    Raises:
        store.StoreError: as :meth:`store.Database.run` does.
    """
    rows = await connection.fetch(
        _SYNC,
        node,
        [c[0] for c in counts],
        [c[1] for c in counts],
        [c[2] for c in counts],
        [c[3] for c in counts],
        [c[4] for c in counts],
        now,
        [k[0] for k in keys],
        [k[1] for k in keys],
    )
    return [(r["limit_name"], r["key"], r["slice"], r["count"]) for r in rows]
