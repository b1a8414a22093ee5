"""Authentication (docs/api.md, Conventions and decisions: token): HS256 JWTs whose ``sub``
is a ``tok_`` record; every failure is a 401 ``authentication_error`` with a precise code.
Tokens are forged with pyjwt.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import jwt
import trio

from store import Database, accounts
from tests.api import SECRET, Api, MakeToken
from tests.web.helpers import assert_error, create_monitor, expect
from web.http.auth import AUDIENCE

if TYPE_CHECKING:
    from quart.typing import TestClientProtocol


def _forge(claims: dict[str, Any], *, key: bytes | str | None = SECRET, alg: str = "HS256") -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pyjwt warns of a short HS512 key: it is the point
        return jwt.encode(claims, key, algorithm=alg)


def _token_id(token: str) -> str:
    return str(jwt.decode(token, options={"verify_signature": False})["sub"])


async def test_missing_or_non_bearer_authorization_is_missing_token(
    client: TestClientProtocol, make_token: MakeToken
) -> None:
    with trio.fail_after(10):
        token = await make_token()
        for headers in (
            {},
            {"Authorization": ""},
            {"Authorization": "Bearer"},
            {"Authorization": "Bearer    "},
            {"Authorization": f"Basic {token}"},
            {"Authorization": token},
        ):
            response = await client.get("/monitors", headers=headers)
            body = await response.get_json()
            assert_error(
                (response.status_code, body, response.headers),
                401,
                "missing_token",
                type="authentication_error",
            )
        # the scheme is case-insensitive
        response = await client.get("/monitors", headers={"Authorization": f"bearer {token}"})
        assert response.status_code == 200


async def test_bad_tokens_are_401_invalid_token(
    client: TestClientProtocol, make_token: MakeToken
) -> None:
    with trio.fail_after(15):
        good = await make_token()
        token_id = _token_id(good)
        now = int(time.time())
        claims = {"sub": token_id, "aud": AUDIENCE, "iat": now}
        forged = {
            "garbage": "not-a-jwt",
            "three garbage segments": "a.b.c",
            "truncated signature": good[:-4],
            "wrong secret": _forge(claims, key=b"another-secret-another-secret-0123"),
            "wrong audience": _forge({**claims, "aud": "someone-else"}),
            "no audience": _forge({"sub": token_id, "iat": now}),
            "no subject": _forge({"aud": AUDIENCE, "iat": now}),
            "no issued-at": _forge({"sub": token_id, "aud": AUDIENCE}),
            "alg none": _forge(claims, key=None, alg="none"),
            "alg HS512": _forge(claims, alg="HS512"),
            "unknown token id": _forge({**claims, "sub": "tok_" + "z" * 24}),
            "sub not a token id": _forge({**claims, "sub": "acct_abc"}),
            "sub not a string": _forge({**claims, "sub": 5}),
            "issued in the future": _forge({**claims, "iat": now + 3600}),
            "not yet valid": _forge({**claims, "nbf": now + 3600}),
        }
        for name, token in forged.items():
            response = await Api(client, token).get("/monitors")
            error = assert_error(response, 401, "invalid_token", type="authentication_error")
            assert token not in error["message"], name
        assert jwt.get_unverified_header(good)["alg"] == "HS256"
        # the genuine claims with the genuine key do work
        assert (await Api(client, _forge(claims)).get("/monitors"))[0] == 200


async def test_expired_tokens_are_401_token_expired(
    client: TestClientProtocol, make_token: MakeToken, db: Database
) -> None:
    with trio.fail_after(10):
        # exp in the JWT, past the 30 s leeway
        expired = await make_token(expires_in=-120)
        assert_error(await Api(client, expired).get("/monitors"), 401, "token_expired")
        # exp within the 30 s leeway: accepted by the JWT layer and the record alike
        # (docs/api.md, Conventions and decisions: token; tests/web/test_auth_edges.py has
        # the cases)
        recent = await make_token(expires_in=-5)
        assert (await Api(client, recent).get("/monitors"))[0] == 200
        # a JWT without exp whose record has expired
        token = await make_token(expires_in=3600)
        token_id = _token_id(token)
        api = Api(client, _forge({"sub": token_id, "aud": AUDIENCE, "iat": int(time.time())}))
        assert (await api.get("/monitors"))[0] == 200
        await db.run(_expire, token_id)
        assert_error(await api.get("/monitors"), 401, "token_expired")
        # a token that has not expired yet works
        assert (await Api(client, await make_token(expires_in=60)).get("/monitors"))[0] == 200


async def _expire(connection: Any, token_id: str) -> None:
    await connection.execute("UPDATE api_tokens SET expires_at = 1 WHERE id = $1", token_id)


async def test_a_revoked_token_is_refused_from_the_next_request(
    client: TestClientProtocol, make_token: MakeToken, db: Database
) -> None:
    with trio.fail_after(10):
        token = await make_token()
        other = Api(client, await make_token())
        api = Api(client, token)
        monitor = await create_monitor(api)
        token_id = _token_id(token)
        record = await db.run(accounts.revoke_token, token_id, int(time.time()))
        assert record is not None and record.revoked_at is not None
        for method, path in (("GET", "/monitors"), ("DELETE", f"/monitors/{monitor['id']}")):
            assert_error(await api.request(method, path), 401, "token_revoked")
        # revoking again keeps it revoked; the account's other tokens still work
        await db.run(accounts.revoke_token, token_id, int(time.time()))
        assert_error(await api.get("/monitors"), 401, "token_revoked")
        assert expect(await other.get(f"/monitors/{monitor['id']}"))["id"] == monitor["id"]


async def test_authentication_comes_before_everything_else(
    client: TestClientProtocol, api_for: Callable[..., Awaitable[Api]]
) -> None:
    with trio.fail_after(10):
        anonymous = Api(client, "")
        # a 401 wins over a bad body, bad query, bad version or a missing object
        for method, path, kwargs in (
            ("POST", "/monitors", {"data": b"{", "headers": {"Content-Type": "application/json"}}),
            ("GET", "/monitors?limit=0", {}),
            ("GET", "/monitors", {"headers": {"Service-Version": "bad"}}),
            ("GET", "/incidents/inc_missing", {}),
            ("DELETE", "/monitors/mon_missing", {}),
        ):
            assert_error(await anonymous.request(method, path, **kwargs), 401, "missing_token")
        # and a 403 wins over a 404 and a 422
        reader = await api_for(permissions=["incidents.read"])
        assert_error(await reader.get("/monitors/mon_missing"), 403, "missing_permission")
        assert_error(await reader.post("/monitors", json={}), 403, "missing_permission")
