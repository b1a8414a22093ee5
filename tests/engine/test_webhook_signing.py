"""The pure parts of webhook delivery: the ``Uptrio-Signature`` value and the back-off
(docs/webhooks.md, The request, and Success and retries), checked against an independent
computation."""

from __future__ import annotations

import hashlib
import hmac

import pytest

from engine import signature_header
from store import EventRecord, deliveries


def test_the_signature_has_one_v1_per_secret_over_timestamp_dot_body() -> None:
    body = b'{"id": "evt_1"}'
    header = signature_header(["whsec_new", "whsec_old"], 1_700_000_000, body)
    expected = [
        hmac.new(s.encode(), b"1700000000." + body, hashlib.sha256).hexdigest()
        for s in ("whsec_new", "whsec_old")
    ]
    assert header == f"t=1700000000,v1={expected[0]},v1={expected[1]}"
    with pytest.raises(ValueError):
        signature_header([], 1, body)


def test_the_back_off_doubles_from_the_base_times_the_jitter() -> None:
    delay = deliveries.retry_delay_seconds
    assert [delay(n, 60, 1.0) for n in (1, 2, 3, 4)] == [60, 120, 240, 480]
    assert delay(1, 60, 0.5) == 30 and delay(3, 0.5, 1.5) == 3
    # with the default base and no jitter, 12 retries fit in 3 days and 13 do not
    assert sum(delay(n, 60, 1.0) for n in range(1, 13)) < 3 * 86_400
    assert sum(delay(n, 60, 1.0) for n in range(1, 14)) > 3 * 86_400
    assert delay(10_000, 60, 1.0) < float("inf")


def _attempt(
    *, succeeded: bool, attempts: int, at: float, give_up_at: int, duration_ms: float = 0.0
) -> deliveries.Attempt:
    event = EventRecord(
        id="evt_1",
        account_id="acct_1",
        type="monitor.down",
        resource_id="mon_1",
        created=0,
        object={},
        previous=None,
        request_id=None,
        idempotency_key=None,
    )
    claimed = deliveries.ClaimedDelivery(
        id="whd_1",
        account_id="acct_1",
        endpoint_id="we_1",
        url="http://127.0.0.1:9/",
        secrets=["whsec_1"],
        event=event,
        attempts=attempts,
        give_up_at=give_up_at,
    )
    return deliveries.Attempt(
        delivery=claimed,
        at=at,
        succeeded=succeeded,
        response_status=200 if succeeded else 500,
        error=None if succeeded else "unexpected_status",
        duration_ms=duration_ms,
        jitter=1.0,
    )


def test_an_attempt_settles_succeeded_retried_or_failed_past_give_up() -> None:
    done = _attempt(succeeded=True, attempts=0, at=100.0, give_up_at=10_000)
    assert done.outcome(60) == ("succeeded", None)
    first = _attempt(succeeded=False, attempts=0, at=100.0, give_up_at=10_000)
    assert first.outcome(60) == ("pending", 160.0)
    third = _attempt(succeeded=False, attempts=2, at=100.0, give_up_at=10_000)
    assert third.outcome(60) == ("pending", 340.0)
    late = _attempt(succeeded=False, attempts=2, at=100.0, give_up_at=300)
    assert late.outcome(60) == ("failed", None)


def test_the_back_off_runs_from_the_end_of_the_attempt() -> None:
    # a receiver that never answers: the attempt started at 100 and timed out 10 s later;
    # the 60 s back-off is counted from 110, so the timeout does not eat into it
    timed_out = _attempt(
        succeeded=False, attempts=0, at=100.0, give_up_at=10_000, duration_ms=10_000.0
    )
    assert timed_out.outcome(60) == ("pending", 170.0)
    assert timed_out.outcome(1) == ("pending", 111.0)  # not due at once after a long wait
    # and the 3 days are judged on that time too
    edge = _attempt(succeeded=False, attempts=0, at=100.0, give_up_at=165, duration_ms=10_000.0)
    assert edge.outcome(60) == ("failed", None)
