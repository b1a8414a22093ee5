"""Tokens under attack (docs/api.md, Conventions and decisions: token; web/http/auth.py):
every forged, tampered, malformed, stale or unknown token is a 401 ``authentication_error``,
never a 500 and never a 200.

Tokens are built by hand (base64url segments and HMACs), so the cases cover what a JWT
library would refuse to produce: ``alg: none``, other algorithms, swapped payloads and
signatures, claims of the wrong JSON type, NaN and Infinity, NUL and lone surrogates in
``sub``, bad base64, wrong segment counts. Several are signed with the real secret to
prove each claim check stands on its own, not only the signature.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import hmac
import json
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import jwt
import pytest
import trio

from store import Database, accounts
from tests.api import SECRET, Api, MakeToken
from tests.web.helpers import assert_error
from web.http.auth import AUDIENCE, LEEWAY_SECONDS
from web.http.deps import Dependencies, WebSettings
from web.process.app import create_app

if TYPE_CHECKING:
    from quart.typing import TestClientProtocol


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def segment(value: Any) -> str:
    """A JSON value as a base64url segment; a str is taken as raw JSON text."""
    text = value if isinstance(value, str) else json.dumps(value)
    return b64(text.encode("utf-8", "surrogatepass"))


def sign(header: Any, claims: Any, *, key: bytes = SECRET, digest: Any = hashlib.sha256) -> str:
    """A compact JWS over ``header`` and ``claims`` with an HMAC of ``digest``."""
    signing_input = f"{segment(header)}.{segment(claims)}"
    mac = hmac.new(key, signing_input.encode(), digest).digest()
    return f"{signing_input}.{b64(mac)}"


HS256 = {"alg": "HS256", "typ": "JWT"}


@pytest.fixture
async def attack_client(deps: Dependencies) -> AsyncIterator[TestClientProtocol]:
    """The app with the failed-login limit out of the way (tested in test_rate_limits)."""
    relaxed = dataclasses.replace(
        deps, settings=dataclasses.replace(WebSettings(), auth_failures_per_minute=10_000)
    )
    app = create_app(relaxed)
    async with app.test_app() as test_app:
        yield test_app.test_client()


def forged_tokens(token_id: str, other_token_id: str, genuine: str) -> dict[str, tuple[str, str]]:
    """Every attack: name -> (token, expected 401 code)."""
    now = int(time.time())
    claims = {"sub": token_id, "aud": AUDIENCE, "iat": now}
    head, body, sig = genuine.split(".")
    raw = f'{{"sub":"{token_id}","aud":"{AUDIENCE}","iat":{now}'
    bad = "invalid_token"
    return {
        # algorithm
        "alg none, no signature": (f"{segment({'alg': 'none'})}.{segment(claims)}.", bad),
        "alg none, with signature": (
            f"{segment({'alg': 'none'})}.{segment(claims)}.{sig}",
            bad,
        ),
        "alg None spelled otherwise": (f"{segment({'alg': 'nOnE'})}.{segment(claims)}.", bad),
        "alg HS512 with the real secret": (
            sign({"alg": "HS512"}, claims, digest=hashlib.sha512),
            bad,
        ),
        "alg HS384 with the real secret": (
            sign({"alg": "HS384"}, claims, digest=hashlib.sha384),
            bad,
        ),
        "alg RS256 signed with the secret as HMAC key": (sign({"alg": "RS256"}, claims), bad),
        "alg as a list": (sign({"alg": ["HS256"]}, claims), bad),
        "no alg": (sign({"typ": "JWT"}, claims), bad),
        # tampering
        "payload swapped to another token": (
            f"{head}.{segment({**claims, 'sub': other_token_id})}.{sig}",
            bad,
        ),
        "payload with a later exp": (
            f"{head}.{segment({**claims, 'exp': now + 10**6})}.{sig}",
            bad,
        ),
        "one signature character changed": (
            f"{head}.{body}.{sig[:-2]}{'A' if sig[-2] != 'A' else 'B'}{sig[-1]}",
            bad,
        ),
        "signature truncated": (f"{head}.{body}.{sig[:-6]}", bad),
        "signature empty": (f"{head}.{body}.", bad),
        "signature of another secret": (sign(HS256, claims, key=b"x" * 48), bad),
        "empty secret": (sign(HS256, claims, key=b""), bad),
        # missing or wrong claims, signed with the real secret
        "missing sub": (sign(HS256, {"aud": AUDIENCE, "iat": now}), bad),
        "missing iat": (sign(HS256, {"sub": token_id, "aud": AUDIENCE}), bad),
        "missing aud": (sign(HS256, {"sub": token_id, "iat": now}), bad),
        "wrong aud": (sign(HS256, {**claims, "aud": "another-service"}), bad),
        "aud list without ours": (sign(HS256, {**claims, "aud": ["a", "b"]}), bad),
        "aud not a string": (sign(HS256, {**claims, "aud": 7}), bad),
        "sub not a string": (sign(HS256, {**claims, "sub": 12}), bad),
        "sub null": (sign(HS256, {**claims, "sub": None}), bad),
        "sub of another kind": (sign(HS256, {**claims, "sub": "acct_abc"}), bad),
        "sub with a NUL": (sign(HS256, {**claims, "sub": "tok_abc\u0000"}), bad),
        "sub with a lone surrogate": (sign(HS256, raw.replace(token_id, "tok_\\ud800") + "}"), bad),
        "sub with SQL": (sign(HS256, {**claims, "sub": "tok_x' OR '1'='1"}), bad),
        "sub very long": (sign(HS256, {**claims, "sub": "tok_" + "a" * 5000}), bad),
        "iat a string": (sign(HS256, {**claims, "iat": str(now)}), bad),
        "iat a boolean": (sign(HS256, {**claims, "iat": True}), bad),
        "iat NaN": (sign(HS256, raw.replace(f'"iat":{now}', '"iat":NaN') + "}"), bad),
        "iat Infinity": (sign(HS256, raw.replace(f'"iat":{now}', '"iat":Infinity') + "}"), bad),
        "iat beyond the leeway": (sign(HS256, {**claims, "iat": now + LEEWAY_SECONDS + 60}), bad),
        "iat huge": (sign(HS256, {**claims, "iat": 10**400}), bad),
        "nbf beyond the leeway": (sign(HS256, {**claims, "nbf": now + LEEWAY_SECONDS + 60}), bad),
        "nbf a string": (sign(HS256, {**claims, "nbf": "soon"}), bad),
        "exp passed": (sign(HS256, {**claims, "exp": now - LEEWAY_SECONDS - 60}), "token_expired"),
        "exp Infinity": (sign(HS256, raw + ',"exp":Infinity}'), bad),
        "exp NaN": (sign(HS256, raw + ',"exp":NaN}'), bad),
        "exp -huge": (sign(HS256, {**claims, "exp": -(10**30)}), "token_expired"),
        "exp a string": (sign(HS256, {**claims, "exp": "never"}), bad),
        "crit header": (sign({**HS256, "crit": ["exp"]}, claims), bad),
        "kid an object": (sign({**HS256, "kid": {"a": 1}}, claims), bad),
        "b64 false header": (sign({**HS256, "b64": False}, claims), bad),
        "unknown token id": (sign(HS256, {**claims, "sub": "tok_" + "z" * 24}), bad),
        # structure and encoding
        "empty": ("", "missing_token"),
        "one segment": ("abc", bad),
        "two segments": (f"{head}.{body}", bad),
        "four segments": (f"{genuine}.{sig}", bad),
        "five segments (a JWE)": (f"{head}.{body}.{sig}.{sig}.{sig}", bad),
        "bad base64 header": (f"@@@.{body}.{sig}", bad),
        "bad base64 payload": (f"{head}.!!!.{sig}", bad),
        "bad base64 signature": (f"{head}.{body}.***", bad),
        "padding in segments": (f"{head}==.{body}.{sig}", bad),
        "header not JSON": (f"{b64(b'not json')}.{body}.{sig}", bad),
        "header not UTF-8": (b64(bytes([0xFF, 0xFE])) + f".{body}.{sig}", bad),
        "header a JSON list": (sign([1, 2], claims), bad),
        "payload a JSON list": (sign(HS256, [claims]), bad),
        "payload not JSON": (sign(HS256, "sub=tok"), bad),
        "deeply nested header": (sign("[" * 5000 + "]" * 5000, claims), bad),
        "huge number in header": (sign('{"alg":"HS256","x":' + "9" * 5000 + "}", claims), bad),
        "non-ASCII token": ("é.é.é", bad),
        "a forged token of 8 KiB": (sign(HS256, {**claims, "pad": "p" * 8000}, key=b"k"), bad),
    }


async def test_every_forged_or_malformed_token_is_401(
    attack_client: TestClientProtocol, make_token: MakeToken
) -> None:
    with trio.fail_after(30):
        genuine = await make_token()
        token_id = str(jwt.decode(genuine, options={"verify_signature": False})["sub"])
        other = str(
            jwt.decode(await make_token(account="globex"), options={"verify_signature": False})[
                "sub"
            ]
        )
        cases = forged_tokens(token_id, other, genuine)
        for name, (token, code) in cases.items():
            response = await Api(attack_client, token).get("/monitors")
            assert response[0] == 401, (name, response[1])
            assert_error(response, 401, code, type="authentication_error")
        assert len(cases) >= 60
        # the genuine token, and the same claims signed by hand, do work
        assert (await Api(attack_client, genuine).get("/monitors"))[0] == 200
        now = int(time.time())
        by_hand = sign(HS256, {"sub": token_id, "aud": AUDIENCE, "iat": now})
        assert (await Api(attack_client, by_hand).get("/monitors"))[0] == 200
        within_leeway = sign(HS256, {"sub": token_id, "aud": AUDIENCE, "iat": now + 10})
        assert (await Api(attack_client, within_leeway).get("/monitors"))[0] == 200


async def test_revoked_and_record_expired_tokens_are_401_on_every_method(
    attack_client: TestClientProtocol, make_token: MakeToken, db: Database
) -> None:
    with trio.fail_after(15):
        revoked = await make_token()
        revoked_id = str(jwt.decode(revoked, options={"verify_signature": False})["sub"])
        await db.run(accounts.revoke_token, revoked_id, int(time.time()))
        # a JWT without exp whose record expired (past the leeway): the database decides
        expired_id = str(
            jwt.decode(await make_token(expires_in=3600), options={"verify_signature": False})[
                "sub"
            ]
        )
        await db.run(_expire, expired_id)
        now = int(time.time())
        expired = sign(HS256, {"sub": expired_id, "aud": AUDIENCE, "iat": now})
        for method in ("GET", "POST", "PATCH", "DELETE"):
            path = "/monitors" if method in ("GET", "POST") else "/monitors/mon_abc"
            headers = {"Idempotency-Key": "k"} if method == "POST" else None
            assert_error(
                await Api(attack_client, revoked).request(method, path, json={}, headers=headers),
                401,
                "token_revoked",
                type="authentication_error",
            )
            assert_error(
                await Api(attack_client, expired).request(method, path, json={}, headers=headers),
                401,
                "token_expired",
                type="authentication_error",
            )


async def _expire(connection: Any, token_id: str) -> None:
    await connection.execute("UPDATE api_tokens SET expires_at = 1 WHERE id = $1", token_id)


async def test_odd_authorization_headers_are_401(attack_client: TestClientProtocol) -> None:
    with trio.fail_after(10):
        for value in (
            "Bearer",
            "Bearer a b c",
            "Token abc",
            "Basic dXNlcjpwYXNz",
            "Bearer\tabc",
            "bearer " + "x" * 6000,
            "Bearer " + "é" * 10,
        ):
            response = await attack_client.get("/monitors", headers={"Authorization": value})
            assert response.status_code == 401, value
            body = await response.get_json()
            assert body["error"]["type"] == "authentication_error"
