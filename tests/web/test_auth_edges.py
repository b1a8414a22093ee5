"""Rough edges of authentication, each refused or fixed (docs/api.md, Conventions and
decisions: token, repeated header):

- the token record's expiry has the same 30 s leeway as the JWT's ``exp``;
- ``exp`` and ``nbf`` must be JSON numbers (RFC 7519 NumericDate), not numeric strings;
- two ``Authorization`` headers (or two ``Idempotency-Key``, two ``Service-Version``)
  are a 400 ``duplicate_header``, not "the first one wins";
- error messages are Uptrio's own words, not pyjwt's (``Not enough segments``,
  ``Invalid crypto padding``);
- ``uptrio tokens create --expires-in`` takes only a positive number of seconds.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import jwt
import pytest
import trio
from werkzeug.datastructures import Headers

from store import Database
from tests.api import SECRET, Api, MakeToken
from tests.web.helpers import assert_error, sql
from tests.web.test_token_attacks import forged_tokens
from web.http.auth import AUDIENCE, LEEWAY_SECONDS
from web.http.deps import Dependencies, WebSettings
from web.process.app import create_app
from web.process.cli import build_parser

if TYPE_CHECKING:
    from quart.typing import TestClientProtocol


def _token_id(token: str) -> str:
    return str(jwt.decode(token, options={"verify_signature": False})["sub"])


def _sign(claims: dict[str, Any]) -> str:
    return jwt.encode(claims, SECRET, algorithm="HS256")


async def test_the_record_expiry_has_the_30_second_leeway_too(
    client: TestClientProtocol, make_token: MakeToken, db: Database
) -> None:
    with trio.fail_after(10):
        # exp 5 s ago, in the JWT and in the record: within the leeway, accepted
        recent = await make_token(expires_in=-5)
        assert (await Api(client, recent).get("/monitors"))[0] == 200
        # past the leeway: refused (by the JWT's exp and by the record alike)
        old = await make_token(expires_in=-(LEEWAY_SECONDS + 30))
        assert_error(await Api(client, old).get("/monitors"), 401, "token_expired")
        # a JWT without exp: the record alone decides, with the same leeway
        token_id = _token_id(await make_token(expires_in=3600))
        api = Api(client, _sign({"sub": token_id, "aud": AUDIENCE, "iat": int(time.time())}))
        now = int(time.time())
        await sql(db, "UPDATE api_tokens SET expires_at = $2 WHERE id = $1", token_id, now - 5)
        assert (await api.get("/monitors"))[0] == 200
        await sql(
            db,
            "UPDATE api_tokens SET expires_at = $2 WHERE id = $1",
            token_id,
            now - LEEWAY_SECONDS - 30,
        )
        assert_error(await api.get("/monitors"), 401, "token_expired")


async def test_exp_and_nbf_must_be_numbers(
    client: TestClientProtocol, make_token: MakeToken
) -> None:
    with trio.fail_after(10):
        token_id = _token_id(await make_token())
        now = int(time.time())
        claims = {"sub": token_id, "aud": AUDIENCE, "iat": now}
        for extra in (
            {"exp": str(now + 3600)},
            {"exp": "9999999999"},
            {"exp": f"{now + 3600}.5"},
            {"nbf": str(now - 10)},
            {"exp": [now + 3600]},
            {"exp": True},
        ):
            response = await Api(client, _sign({**claims, **extra})).get("/monitors")
            error = assert_error(response, 401, "invalid_token")
            assert "number" in error["message"], (extra, error)
        # numbers (integers or not) are fine
        for extra in ({"exp": now + 3600}, {"exp": now + 3600.5}, {"nbf": now - 10}):
            assert (await Api(client, _sign({**claims, **extra})).get("/monitors"))[0] == 200


async def test_a_header_the_api_reads_may_be_sent_once(
    client: TestClientProtocol, make_token: MakeToken
) -> None:
    with trio.fail_after(10):
        token = await make_token()
        other = await make_token(account="globex")
        for pairs in (
            [("Authorization", f"Bearer {token}"), ("Authorization", f"Bearer {other}")],
            [("Authorization", f"Bearer {token}"), ("Authorization", f"Bearer {token}")],
            [("Authorization", f"Bearer {token}"), ("Authorization", "Bearer forged")],
        ):
            response = await client.get("/monitors", headers=Headers(pairs))
            body = await response.get_json()
            assert_error(
                (response.status_code, body, response.headers),
                400,
                "duplicate_header",
                param="Authorization",
            )
        auth = ("Authorization", f"Bearer {token}")
        for name, values in (
            ("Service-Version", ["2026-11-20", "2026-11-20"]),
            ("Idempotency-Key", ["a", "b"]),
        ):
            pairs = [auth, ("Content-Type", "application/json")]
            pairs += [(name, value) for value in values]
            response = await client.post(
                "/incidents", headers=Headers(pairs), data=b'{"title": "t"}'
            )
            body = await response.get_json()
            assert_error(
                (response.status_code, body, response.headers), 400, "duplicate_header", param=name
            )
        # once is fine
        assert (await client.get("/monitors", headers=Headers([auth]))).status_code == 200


@pytest.fixture
async def relaxed_client(deps: Dependencies) -> AsyncIterator[TestClientProtocol]:
    """The app with the failed-login limit out of the way."""
    settings = dataclasses.replace(WebSettings(), auth_failures_per_minute=10_000)
    app = create_app(dataclasses.replace(deps, settings=settings))
    async with app.test_app() as test_app:
        yield test_app.test_client()


def _pyjwt_message(token: str) -> str | None:
    try:
        jwt.decode(token, SECRET, algorithms=["HS256"], audience=AUDIENCE)
    except jwt.PyJWTError as exc:
        return str(exc)
    return None


async def test_token_errors_are_worded_by_uptrio_not_by_pyjwt(
    relaxed_client: TestClientProtocol, make_token: MakeToken
) -> None:
    with trio.fail_after(30):
        genuine = await make_token()
        other = _token_id(await make_token(account="globex"))
        cases = {
            **forged_tokens(_token_id(genuine), other, genuine),
            "not enough segments": ("abc", "invalid_token"),
            "crypto padding": (genuine[:-1], "invalid_token"),
        }
        leaked = []
        for name, (token, _) in cases.items():
            if not token:
                continue
            status, body, _ = await Api(relaxed_client, token).get("/monitors")
            assert status == 401, (name, body)
            message = body["error"]["message"]
            library = _pyjwt_message(token)
            if library and library in message:
                leaked.append((name, message))
            for phrase in ("Not enough segments", "padding", "Invalid payload", "Signature"):
                if phrase in message:
                    leaked.append((name, message))
        assert not leaked


@pytest.mark.parametrize("value", ["-5", "0", "-0", "abc", "1.5"])
def test_tokens_create_refuses_a_lifetime_that_is_not_a_positive_integer(value: str) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(
            ["tokens", "create", "--account", "a", "--permissions", "all", "--expires-in", value]
        )
    assert exited.value.code == 2
    args = build_parser().parse_args(
        ["tokens", "create", "--account", "a", "--permissions", "all", "--expires-in", "60"]
    )
    assert args.expires_in == 60
