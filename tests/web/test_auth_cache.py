"""The app's cache of verified token claims (``web.http.auth.ClaimsCache``; docs/api.md,
Conventions and decisions: token): a token string's signature is checked once, while its
expiry, its revocation and its permissions count on every request.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import jwt
import pytest
import trio

from store import Database, accounts
from tests.api import SECRET, Api, MakeToken
from tests.web.helpers import assert_error
from web.http.auth import AUDIENCE, ClaimsCache, TokenClaims, verify_token
from web.http.deps import Dependencies
from web.http.errors import ApiError

if TYPE_CHECKING:
    from quart.typing import TestClientProtocol


def _token_id(token: str) -> str:
    return str(jwt.decode(token, options={"verify_signature": False})["sub"])


async def _set_permissions(connection: Any, token_id: str, permissions: list[str]) -> None:
    await connection.execute(
        "UPDATE api_tokens SET permissions = $2 WHERE id = $1", token_id, permissions
    )


async def test_a_token_is_verified_once_and_revoked_or_narrowed_at_once(
    client: TestClientProtocol, make_token: MakeToken, db: Database, deps: Dependencies
) -> None:
    with trio.fail_after(10):
        token = await make_token()
        api = Api(client, token)
        assert (await api.get("/monitors"))[0] == 200
        assert (await api.get("/monitors"))[0] == 200
        assert len(deps.token_claims) == 1  # the second request found the first's claims
        assert deps.token_claims.get(token) is not None
        # a permission taken away counts from the next request, cached claims or not
        await db.run(_set_permissions, _token_id(token), ["incidents.read"])
        assert_error(await api.get("/monitors"), 403, "missing_permission")
        assert (await api.get("/incidents"))[0] == 200
        await db.run(_set_permissions, _token_id(token), ["monitors.read"])
        assert (await api.get("/monitors"))[0] == 200
        # and so does a revocation
        await db.run(accounts.revoke_token, _token_id(token), int(time.time()))
        assert deps.token_claims.get(token) is not None
        assert_error(await api.get("/monitors"), 401, "token_revoked")


async def test_a_forged_token_is_not_kept_and_an_expired_one_fails_every_time(
    client: TestClientProtocol, make_token: MakeToken, deps: Dependencies
) -> None:
    with trio.fail_after(10):
        token = await make_token()
        forged = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")
        for _ in range(2):
            assert_error(await Api(client, forged).get("/monitors"), 401, "invalid_token")
        assert len(deps.token_claims) == 0
        expired = await make_token(expires_in=-120)
        for _ in range(2):  # its signature is good: kept, and refused by its exp each time
            assert_error(await Api(client, expired).get("/monitors"), 401, "token_expired")
        assert len(deps.token_claims) == 1


def test_cached_claims_still_expire_and_mature_by_the_clock() -> None:
    now = 1_800_000_000
    cache = ClaimsCache()
    claims = {"sub": "tok_abc", "aud": AUDIENCE, "iat": now, "nbf": now + 100, "exp": now + 600}
    token = jwt.encode(claims, SECRET, algorithm="HS256")
    with pytest.raises(ApiError) as early:  # nbf ahead, beyond the 30 s leeway
        verify_token(SECRET, token, now=now, cache=cache)
    assert early.value.code == "invalid_token" and len(cache) == 1  # the signature is good
    assert verify_token(SECRET, token, now=now + 100, cache=cache) == "tok_abc"
    assert verify_token(SECRET, token, now=now + 629, cache=cache) == "tok_abc"  # leeway
    with pytest.raises(ApiError) as late:
        verify_token(SECRET, token, now=now + 630, cache=cache)
    assert late.value.code == "token_expired"
    # another secret's cache is another cache: the same token fails its signature there
    with pytest.raises(ApiError) as other:
        verify_token(
            b"another-secret-0123456789abcdef-0123", token, now=now + 100, cache=ClaimsCache()
        )
    assert other.value.code == "invalid_token"


def test_the_cache_keeps_the_most_recently_used_tokens_only() -> None:
    cache = ClaimsCache(max_entries=2)
    for name in ("a", "b"):
        cache.put(name, TokenClaims(f"tok_{name}", 0, 0, None))
    assert cache.get("a") is not None  # "b" is now the least recently used
    cache.put("c", TokenClaims("tok_c", 0, 0, None))
    assert len(cache) == 2 and cache.get("b") is None
    assert cache.get("a") is not None and cache.get("c") is not None
    with pytest.raises(ValueError):
        ClaimsCache(max_entries=0)
