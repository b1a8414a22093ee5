"""The pure parts of webhook delivery: the ``Uptrio-Signature`` value and the back-off
(extensions part 2), checked against an independent computation."""

from __future__ import annotations

import hashlib
import hmac

import pytest

from engine import signature_header
from store import webhooks


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
    delay = webhooks.retry_delay_seconds
    assert [delay(n, 60, 1.0) for n in (1, 2, 3, 4)] == [60, 120, 240, 480]
    assert delay(1, 60, 0.5) == 30 and delay(3, 0.5, 1.5) == 3
    # with the default base and no jitter, 12 retries fit in 3 days and 13 do not
    assert sum(delay(n, 60, 1.0) for n in range(1, 13)) < 3 * 86_400
    assert sum(delay(n, 60, 1.0) for n in range(1, 14)) > 3 * 86_400
    assert delay(10_000, 60, 1.0) < float("inf")
