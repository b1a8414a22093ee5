"""Rate limits across two real ``uptrio serve`` processes on one Postgres (docs/api.md, Rate
limits; docs/several-nodes.md, Rate limits across nodes): one token's requests sent through
both nodes, the 429s counted. A node refuses as soon as the other used the budget, and
requests spread over both are admitted up to the limit and not one more (the quota is
leased, not synced).

The two-node fixture is tests/ops/test_nodes.py's; the per-token limit is lowered with
``--token-requests-per-minute`` so few requests reach it.
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest
import trio

from store import Database, accounts
from tests.ops.test_nodes import _BASES, _two_nodes
from web.http.auth import issue_token
from web.http.versioning import CURRENT_VERSION

LIMIT = 30


async def _token(db: Database) -> str:
    now = int(time.time())
    _, token = await db.transaction(
        accounts.create_token,
        "acme",
        ["monitors.read"],
        now=now,
        expires_at=None,
        current_version=CURRENT_VERSION,
    )
    return issue_token(b"nodes-test-secret", token.id, now=now, expires_at=None)


async def _send(http: httpx.AsyncClient, node: str, n: int) -> list[int]:
    statuses = []
    for _ in range(n):
        response = await http.get(f"{_BASES[node]}/monitors", params={"limit": 1})
        statuses.append(response.status_code)
    return statuses


@pytest.mark.filterwarnings("ignore::jwt.warnings.InsecureKeyLengthWarning")  # the nodes' secret
async def test_one_token_through_two_nodes_is_limited_as_a_whole(
    tmp_path: Path, database_url: str, db: Database
) -> None:
    flags = ("--token-requests-per-minute", str(LIMIT))
    async with _two_nodes(tmp_path, database_url, db, *flags):
        first, second = await _token(db), await _token(db)
        with trio.fail_after(60):
            async with httpx.AsyncClient(timeout=10) as http:
                http.headers["Authorization"] = f"Bearer {first}"
                assert await _send(http, "a", 1) + await _send(http, "b", 1) == [200, 200]
                await trio.sleep(1.5)  # b's lease of its slice goes back once it ended
                sent_a = await _send(http, "a", 40)
                assert sent_a.count(200) == LIMIT - 2, sent_a
                assert set(sent_a[LIMIT - 2 :]) == {429}
                assert set(await _send(http, "b", 10)) == {429}  # a used the budget

                # spread over both, 20 requests a second: the limit, not one more
                http.headers["Authorization"] = f"Bearer {second}"
                statuses: list[int] = []
                for i in range(100):
                    statuses += await _send(http, "ab"[i % 2], 1)
                    await trio.sleep(0.05)
                assert statuses.count(200) == LIMIT, statuses
                assert statuses[-20:] == [429] * 20
