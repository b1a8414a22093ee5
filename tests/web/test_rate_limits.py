"""Rate limits (docs/api.md, Rate limits; web/http/limits/rolling.py,
web/http/limits/throttle.py): the rolling windows' exact boundaries with an injected clock,
a burst across a window boundary, the hourly limit after ten full minutes, the account limit
shared by tokens, isolation between accounts, the headers on every authenticated response,
and failed authentication limited per client address.

The limiter's clock is injected (a list holding "now", in seconds) so nothing waits; the
API tests use small limits where the default ones would need thousands of requests,
except one test that walks the real 1,000-per-minute boundary through the API.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import pytest
import trio

from tests.api import Api, MakeToken
from tests.web.helpers import assert_error, expect
from web.http.deps import Dependencies, WebSettings
from web.http.limits.quota import QuotaLimiter
from web.http.limits.rolling import PRUNE_EVERY, RateLimiter, Window
from web.process.app import create_app

if TYPE_CHECKING:
    from quart.typing import TestClientProtocol

MINUTE = Window("token/minute", 1000, 60.0)
HOUR = Window("token/hour", 10_000, 3600.0)
ACCOUNT = Window("account/minute", 5000, 60.0)


class Clock:
    """A hand-moved monotonic clock, in seconds."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now


def checks(token: str = "tok_a", account: str = "acct_a") -> list[tuple[Window, str]]:
    return [(MINUTE, token), (HOUR, token), (ACCOUNT, account)]


# ---- the limiter alone --------------------------------------------------------------


def test_the_1000th_request_in_a_minute_passes_and_the_1001st_is_refused() -> None:
    clock = Clock()
    limiter = RateLimiter(clock=clock)
    for n in range(1, 1001):
        decision = limiter.admit(checks())
        assert decision.allowed, n
        assert decision.remaining == 1000 - n
        clock.now += 0.01
    assert decision.limit == 1000 and decision.window == "token/minute"
    refused = limiter.admit(checks())
    assert not refused.allowed
    assert refused.remaining == 0 and refused.limit == 1000
    # the first requests (slice of t=1000) stop counting 60 to 61 s after they were made
    assert 50 < refused.retry_after_seconds <= 61


def test_a_refused_request_uses_no_quota() -> None:
    clock = Clock()
    limiter = RateLimiter(clock=clock)
    minute, hour = Window("m", 2, 60.0), Window("h", 3, 3600.0)
    pair = [(minute, "t"), (hour, "t")]
    assert limiter.admit(pair).allowed and limiter.admit(pair).allowed
    for _ in range(5):  # refused by the minute: must not count in the hour
        assert not limiter.admit(pair).allowed
    clock.now += 62
    third = limiter.admit(pair)
    assert third.allowed and third.window == "h" and third.remaining == 0
    refused = limiter.admit(pair)
    assert not refused.allowed and refused.window == "h" and refused.limit == 3


def test_a_burst_across_a_window_boundary_is_refused() -> None:
    """A fixed window would let 1,000 through at 0:59.5 and 1,000 more at 1:00.5."""
    clock = Clock(59.5)
    limiter = RateLimiter(clock=clock)
    for _ in range(1000):
        assert limiter.admit(checks()).allowed
    clock.now = 60.5
    refused = limiter.admit(checks())
    assert not refused.allowed
    assert refused.retry_after_seconds == pytest.approx(120.0 - 60.5)
    clock.now = 119.9
    assert not limiter.admit(checks()).allowed
    clock.now = 120.0  # the burst's slice [59, 60) counted until 59 + 1 + 60
    allowed = limiter.admit(checks())
    assert allowed.allowed and allowed.window == "token/minute" and allowed.remaining == 999


def test_no_rolling_minute_ever_holds_more_than_the_limit() -> None:
    clock = Clock(0.0)
    limiter = RateLimiter(clock=clock)
    window = Window("w", 10, 60.0)
    admitted: list[float] = []
    for step in range(4000):  # one attempt every 0.07 s for 280 s
        clock.now = step * 0.07
        if limiter.admit([(window, "k")]).allowed:
            admitted.append(clock.now)
    for i, start in enumerate(admitted):
        in_window = [t for t in admitted[i:] if t < start + 60.0]
        assert len(in_window) <= 10
    assert len(admitted) >= 40, "the limit is reached again once each minute"


def test_the_hourly_limit_after_ten_full_minutes() -> None:
    clock = Clock(0.0)
    limiter = RateLimiter(clock=clock)
    for minute in range(10):
        clock.now = minute * 61.0  # each burst after the previous one left the minute
        for _ in range(1000):
            assert limiter.admit(checks(account=f"acct_{minute}")).allowed, minute
    clock.now = 10 * 61.0
    refused = limiter.admit(checks(account="acct_new"))
    assert not refused.allowed
    assert refused.window == "token/hour" and refused.limit == 10_000
    # the first burst (slice [0, 60)) counts until (0 + 1 + 60) * 60 s
    assert refused.retry_after_seconds == pytest.approx(61 * 60.0 - 610.0)
    clock.now = 61 * 60.0
    back = limiter.admit(checks(account="acct_new"))
    assert back.allowed and back.remaining == 999  # 9,001 in the hour, 1 in the minute


def test_tokens_of_one_account_share_the_account_limit_and_other_accounts_do_not() -> None:
    clock = Clock()
    limiter = RateLimiter(clock=clock)
    for n in range(5000):
        token = f"tok_{n % 6}"  # six tokens, none past its own 1,000
        assert limiter.admit(checks(token=token, account="acct_acme")).allowed, n
    refused = limiter.admit(checks(token="tok_fresh", account="acct_acme"))
    assert not refused.allowed and refused.window == "account/minute" and refused.limit == 5000
    other = limiter.admit(checks(token="tok_other", account="acct_globex"))
    assert other.allowed and other.remaining == 999


def test_the_headers_report_the_most_constraining_window() -> None:
    clock = Clock()
    limiter = RateLimiter(clock=clock)
    for _ in range(4500):  # through many tokens: the account window becomes the tightest
        limiter.admit(checks(token=f"tok_{clock.now}", account="acct_a"))
        clock.now += 0.001
    decision = limiter.admit(checks(token="tok_x", account="acct_a"))
    assert decision.window == "account/minute" and decision.remaining == 499
    assert 0 < decision.reset_after_seconds <= 61


def test_idle_keys_are_dropped() -> None:
    clock = Clock()
    limiter = RateLimiter(clock=clock)
    for n in range(100):
        limiter.admit([(MINUTE, f"tok_{n}")])
    assert limiter.statistics().keys == 100
    clock.now += 62
    for _ in range(PRUNE_EVERY):
        limiter.peek([(MINUTE, "tok_live")])
    assert limiter.statistics().keys <= 1


def test_windows_must_make_sense() -> None:
    with pytest.raises(ValueError):
        Window("w", 0, 60.0)
    with pytest.raises(ValueError):
        Window("w", 1, 0.0)
    with pytest.raises(ValueError):
        RateLimiter().peek([])


# ---- through the API ----------------------------------------------------------------


@asynccontextmanager
async def limited_client(
    deps: Dependencies, clock: Clock, **settings: Any
) -> AsyncIterator[TestClientProtocol]:
    """A client of an app whose limiter runs on ``clock`` with ``settings``."""
    limited = dataclasses.replace(
        deps,
        rate_limiter=QuotaLimiter(RateLimiter(clock=clock)),
        settings=dataclasses.replace(WebSettings(), **settings),
    )
    app = create_app(limited)
    async with app.test_app() as test_app:
        yield test_app.test_client()


def _assert_rate_headers(
    headers: Any, limit: int, remaining: int, period_seconds: float = 60.0
) -> None:
    assert headers["X-RateLimit-Limit"] == str(limit)
    assert headers["X-RateLimit-Remaining"] == str(remaining)
    reset = int(headers["X-RateLimit-Reset"])
    assert time.time() < reset <= time.time() + period_seconds * 61 / 60 + 1, "epoch seconds"


async def test_the_real_limit_through_the_api_1000th_passes_1001st_is_429(
    api: Api, deps: Dependencies
) -> None:
    with trio.fail_after(40):
        for n in range(1, 1001):
            status, body, headers = await api.get("/monitors", query={"limit": 1})
            assert status == 200, (n, body)
        _assert_rate_headers(headers, 1000, 0)
        refused = await api.get("/monitors")
        error = assert_error(refused, 429, "rate_limited", type="rate_limit_error")
        assert "per-minute" in error["message"]
        assert 1 <= int(refused[2]["Retry-After"]) <= 61
        _assert_rate_headers(refused[2], 1000, 0)


async def test_every_authenticated_response_carries_the_headers_errors_included(
    deps: Dependencies, make_token: MakeToken
) -> None:
    with trio.fail_after(15):
        clock = Clock()
        async with limited_client(deps, clock, token_requests_per_minute=10) as client:
            api = Api(client, await make_token())
            reader = Api(client, await make_token(permissions=["monitors.read"]))
            responses = [
                await api.get("/monitors"),  # 200
                await api.post("/monitors", json={}),  # 422
                await api.get("/monitors/mon_" + "a" * 24),  # 404
                await api.get("/monitors", headers={"Service-Version": "bad"}),  # 400
                await api.get("/monitors", query={"nope": 1}),  # 400
            ]
            for n, (_, _, headers) in enumerate(responses, start=1):
                _assert_rate_headers(headers, 10, 10 - n)
            forbidden = await reader.post("/monitors", json={})
            assert forbidden[0] == 403
            _assert_rate_headers(forbidden[2], 10, 9)
            unauthenticated = await Api(client, "nope").get("/monitors")
            assert unauthenticated[0] == 401
            assert "X-RateLimit-Limit" not in unauthenticated[2]
            # the OpenAPI document is not limited
            document = await client.get("/openapi.json")
            assert "X-RateLimit-Limit" not in document.headers


async def test_over_the_limit_is_429_until_the_window_rolls_on(
    deps: Dependencies, make_token: MakeToken
) -> None:
    with trio.fail_after(15):
        clock = Clock()
        async with limited_client(
            deps, clock, token_requests_per_minute=3, token_requests_per_hour=5
        ) as client:
            api = Api(client, await make_token())
            for _ in range(3):
                expect(await api.get("/monitors"))
            refused = await api.post("/monitors", json={"name": "x"})
            assert_error(refused, 429, "rate_limited", type="rate_limit_error")
            assert refused[2]["Retry-After"] == "61"
            assert refused[2]["Service-Version"]
            _assert_rate_headers(refused[2], 3, 0)
            clock.now += 61
            allowed = await api.get("/monitors")
            assert allowed[0] == 200
            _assert_rate_headers(allowed[2], 5, 1, 3600.0)  # now the hour is the tightest
            expect(await api.get("/monitors"))
            hourly = await api.get("/monitors")
            assert_error(hourly, 429, "rate_limited", type="rate_limit_error")
            assert "per-hour" in hourly[1]["error"]["message"]
            assert hourly[2]["X-RateLimit-Limit"] == "5"
            assert 3000 < int(hourly[2]["Retry-After"]) <= 3661


async def test_tokens_of_one_account_hit_the_account_limit_another_account_is_untouched(
    deps: Dependencies, make_token: MakeToken
) -> None:
    with trio.fail_after(15):
        clock = Clock()
        async with limited_client(
            deps, clock, token_requests_per_minute=4, account_requests_per_minute=6
        ) as client:
            first = Api(client, await make_token(account="acme"))
            second = Api(client, await make_token(account="acme"))
            other = Api(client, await make_token(account="globex"))
            for _ in range(4):
                expect(await first.get("/monitors"))
            expect(await second.get("/monitors"))
            last = await second.get("/monitors")
            _assert_rate_headers(last[2], 6, 0)
            refused = await second.get("/monitors")
            error = assert_error(refused, 429, "rate_limited", type="rate_limit_error")
            assert "account" in error["message"]
            assert refused[2]["X-RateLimit-Limit"] == "6"
            # the flood of acme costs globex nothing
            for n in range(4):
                theirs = await other.get("/monitors")
                assert theirs[0] == 200
                _assert_rate_headers(theirs[2], 4, 3 - n)


async def test_failed_authentication_is_limited_per_client_address(
    deps: Dependencies, make_token: MakeToken
) -> None:
    with trio.fail_after(15):
        clock = Clock()
        async with limited_client(deps, clock, auth_failures_per_minute=3) as client:
            good = await make_token()
            attacker = {"client": ("203.0.113.7", 40000)}
            bystander = {"client": ("198.51.100.9", 40000)}

            async def call(token: str, scope: dict[str, Any]) -> tuple[int, Any, Any]:
                response = await client.get(
                    "/monitors", headers={"Authorization": f"Bearer {token}"}, scope_base=scope
                )
                return response.status_code, await response.get_json(), response.headers

            for _ in range(3):
                assert_error(await call("guess", attacker), 401, "invalid_token")
            # over the limit: refused before the token is looked at, good tokens too
            for token in ("guess", good):
                refused = await call(token, attacker)
                assert_error(refused, 429, "rate_limited", type="rate_limit_error")
                assert refused[2]["X-RateLimit-Limit"] == "3"
                assert refused[2]["X-RateLimit-Remaining"] == "0"
                assert 1 <= int(refused[2]["Retry-After"]) <= 61
            # another address is not affected; successes cost nothing
            for _ in range(5):
                assert (await call(good, bystander))[0] == 200
            assert_error(await call("guess", bystander), 401, "invalid_token")
            clock.now += 61
            assert (await call(good, attacker))[0] == 200
