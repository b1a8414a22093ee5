"""An authenticated GET whose route plans its read (``Route.prefetch``) reads the token and
the resource in one unit of work: one crossing of the bridge to the database instead of
two (``web.http.middleware.authenticate``), with every answer the same as a read in the
handler gives (docs/architecture.md, The request path).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import jwt
import pytest
import trio

from store import Database, accounts
from store.bridge import Bridge
from tests.api import Api, MakeToken
from tests.web.helpers import assert_error, create_monitor

if TYPE_CHECKING:
    from quart.typing import TestClientProtocol


@pytest.fixture
def crossings(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the bridge's crossings to the database (one element per crossing)."""
    counted: list[int] = []
    cross = Bridge.cross

    async def counting(self: Bridge, fn: Callable[[Any], Awaitable[Any]], deadline: Any) -> Any:
        counted.append(1)
        return await cross(self, fn, deadline)

    monkeypatch.setattr(Bridge, "cross", counting)
    return counted


async def test_a_get_of_a_monitor_or_a_page_crosses_once(
    client: TestClientProtocol, make_token: MakeToken, crossings: list[int]
) -> None:
    with trio.fail_after(10):
        api = Api(client, await make_token())
        monitor = await create_monitor(api)
        for path in (f"/monitors/{monitor['id']}", "/monitors?limit=100", "/monitors"):
            crossings.clear()
            status, body, _ = await api.get(path)
            assert status == 200, body
            assert len(crossings) == 1, path
        assert body["data"][0]["id"] == monitor["id"]


async def test_answers_stay_those_of_a_read_in_the_handler(
    client: TestClientProtocol, make_token: MakeToken, db: Database, crossings: list[int]
) -> None:
    with trio.fail_after(10):
        token = await make_token()
        api = Api(client, token)
        monitor = await create_monitor(api)
        other = Api(client, await make_token(account="other"))
        # another account's monitor, a malformed id: 404s; an unknown cursor: a 400
        assert_error(await other.get(f"/monitors/{monitor['id']}"), 404, "resource_missing")
        assert_error(await api.get("/monitors/inc_nope"), 404, "resource_missing")
        assert_error(await api.get("/monitors?starting_after=mon_nope"), 400, "cursor_not_found")
        # a refusal earlier in the chain comes first, though the read failed ahead of it
        assert_error(
            await api.get("/monitors?starting_after=mon_nope&color=red"),
            400,
            "unknown_parameter",
        )
        assert_error(await api.get("/monitors?limit=500"), 400, "invalid_parameter")
        # a value the database refuses is refused first by the chain, as before
        assert_error(await api.get("/monitors?search=a%00b"), 400, "invalid_parameter")
        # a page after a cursor, and a page of another account's monitors
        created = [monitor, await create_monitor(api, name="second")]
        status, page, _ = await api.get("/monitors?limit=1")
        assert status == 200 and page["has_more"] and page["data"][0]["id"] == created[1]["id"]
        status, page, _ = await api.get(f"/monitors?limit=1&starting_after={created[1]['id']}")
        assert status == 200 and [m["id"] for m in page["data"]] == [monitor["id"]]
        assert not page["has_more"]
        status, page, _ = await other.get("/monitors")
        assert status == 200 and page["data"] == [] and not page["has_more"]
        # a token without the permission reads nothing ahead: a 403, in one crossing
        narrow = Api(client, await make_token(permissions=["incidents.read"]))
        crossings.clear()
        assert_error(await narrow.get(f"/monitors/{monitor['id']}"), 403, "missing_permission")
        assert len(crossings) == 1
        # a revocation counts from the very next request, and reads nothing
        token_id = str(jwt.decode(token, options={"verify_signature": False})["sub"])
        await db.run(accounts.revoke_token, token_id, int(time.time()))
        crossings.clear()
        assert_error(await api.get(f"/monitors/{monitor['id']}"), 401, "token_revoked")
        assert_error(await api.get("/monitors"), 401, "token_revoked")
        assert len(crossings) == 2
