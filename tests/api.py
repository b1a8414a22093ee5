"""The API client tests use: a test client of the real app bound to one token."""

from __future__ import annotations

import json as json_module
import time
from collections.abc import Awaitable, Callable
from typing import Any

from quart.typing import TestClientProtocol

from engine import Engine, EngineHandle
from store import AccountRecord, Database, accounts
from web.http.auth import issue_token
from web.http.deps import Dependencies, WebSettings, apply_nothing, no_pings
from web.http.versioning import CURRENT_VERSION
from web.routes import PERMISSIONS

SECRET = b"test-secret-not-for-production-0123456789"
"""The JWT secret of the app in tests."""

MakeToken = Callable[..., Awaitable[str]]


async def mint_token(
    db: Database,
    account: str = "acme",
    permissions: list[str] | None = None,
    expires_in: int | None = None,
) -> tuple[AccountRecord, str]:
    """A new token record of ``account`` (created, and pinned on its first token) with
    ``permissions`` (default all), expiring ``expires_in`` seconds from now (None: never);
    returns the account and the token's JWT signed with :data:`SECRET`."""
    now = int(time.time())
    expires_at = now + expires_in if expires_in is not None else None
    record, token = await db.transaction(
        accounts.create_token,
        account,
        list(PERMISSIONS) if permissions is None else permissions,
        now=now,
        expires_at=expires_at,
        current_version=CURRENT_VERSION,
    )
    return record, issue_token(SECRET, token.id, now=now, expires_at=expires_at)


class Api:
    """A client bound to one token: ``await api.post("/monitors", json={...})`` returns
    ``(status, body, headers)`` with the body decoded (None when empty)."""

    def __init__(self, client: TestClientProtocol, token: str) -> None:
        self.client = client
        self.token = token

    async def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        data: bytes | None = None,
        headers: dict[str, str] | None = None,
        query: dict[str, Any] | None = None,
    ) -> tuple[int, Any, Any]:
        all_headers = {"Authorization": f"Bearer {self.token}"}
        all_headers.update(headers or {})
        kwargs: dict[str, Any] = {"headers": all_headers}
        if json is not None:
            kwargs["json"] = json
        if data is not None:
            kwargs["data"] = data
        if query is not None:
            kwargs["query_string"] = query
        response = await self.client.open(path, method=method, **kwargs)
        raw = await response.get_data()
        body = None
        if raw:
            body = json_module.loads(raw)
        return response.status_code, body, response.headers

    async def get(self, path: str, **kw: Any) -> tuple[int, Any, Any]:
        return await self.request("GET", path, **kw)

    async def post(self, path: str, **kw: Any) -> tuple[int, Any, Any]:
        return await self.request("POST", path, **kw)

    async def patch(self, path: str, **kw: Any) -> tuple[int, Any, Any]:
        return await self.request("PATCH", path, **kw)

    async def delete(self, path: str, **kw: Any) -> tuple[int, Any, Any]:
        return await self.request("DELETE", path, **kw)


EngineLike = Engine | EngineHandle | Callable[[str, Any], Awaitable[None]] | None
"""What a test gives the app as its engine: nothing, a running incarnation, a handle, or
an ``apply`` verb of its own (a recorder)."""


def web_deps(db: Database, engine: EngineLike = None, **fields: Any) -> Dependencies:
    """The app's dependencies on ``db`` with the engine's two verbs taken from ``engine``
    (None: no engine: changes are stored and nothing runs them) and the test secret;
    ``fields`` set any other field."""
    verbs: dict[str, Any]
    if engine is None:
        verbs = {"apply": apply_nothing, "ping": no_pings}
    elif isinstance(engine, Engine | EngineHandle):
        handle = engine if isinstance(engine, EngineHandle) else EngineHandle.running(engine)
        verbs = {"apply": handle.apply, "ping": handle.ping}
    else:
        verbs = {"apply": engine, "ping": no_pings}
    fields.setdefault("settings", WebSettings())
    return Dependencies(db=db, jwt_secret=SECRET, **verbs, **fields)
