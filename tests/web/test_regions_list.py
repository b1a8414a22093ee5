"""``GET /regions`` (docs/several-nodes.md, Regions): every region a node ever ran in, by
name, with its live nodes (stopped and expired ones left out), in one page; needs
``monitors.read``."""

from __future__ import annotations

from typing import Any

import trio

from store import Connection, Database, leases
from tests.api import Api
from tests.web.helpers import expect


async def _expire(connection: Connection, name: str) -> None:
    await connection.execute(
        "UPDATE nodes SET renewed_at = now() - interval '1 min' WHERE name = $1", name
    )


async def test_regions_list_their_live_nodes(api: Api, db: Database) -> None:
    with trio.fail_after(10):
        for name, region in (("b", "eu"), ("a", "eu"), ("c", "us"), ("d", "us")):
            await db.transaction(leases.register_node, name, 10.0, region)
        await db.run(_expire, "c")
        await db.transaction(leases.release_node, "d")
        body: dict[str, Any] = expect(await api.get("/regions"))
        assert body["object"] == "list" and body["has_more"] is False
        assert body["url"] == "/regions"
        # the default region of a node that never ran here does not appear
        assert [(r["object"], r["name"]) for r in body["data"]] == [
            ("region", "eu"),
            ("region", "us"),
        ]
        eu, us = body["data"]
        assert [n["name"] for n in eu["nodes"]] == ["a", "b"]
        assert set(eu["nodes"][0]) == {"name", "started", "renewed_at"}
        assert all(isinstance(n["started"], int) for n in eu["nodes"])
        assert us["nodes"] == []  # c expired, d stopped
