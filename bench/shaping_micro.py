"""Micro-benchmark: what shaping one API object costs, with the shapers derived from the
response models (``web.api.shaping``; docs/architecture.md, "API resources").

White-box (allowed by the import contracts in ``pyproject.toml``): it imports the
shapers of ``web.api`` and the record classes of ``store`` and calls them in this
process; no database, no HTTP.

Usage::

    .venv/bin/python -m bench.shaping_micro [--calls 200000] [--rounds 3]

Variants, each ``--calls`` calls a round, one after the other, on one record built in
memory (values as a real row has them):

- ``monitor``: ``web.api.monitors.monitor_object`` on an http monitor with request
  headers and two assertions (24 keys, the assertions reordered from jsonb's order);
- ``check``: ``web.api.history.check_object`` on a failed check (its ``error`` object);
- ``check-hand``: the same check shaped by a dict written out by hand, as the shapers
  were before they were derived: the floor the derived shaper is measured against.

Per variant and round: calls per second and microseconds per call (wall clock,
``time.perf_counter``); the best round is the figure.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from typing import Any

from store import CheckRecord, MonitorRecord
from web.api.history import check_object
from web.api.monitors import monitor_object

_MONITOR = MonitorRecord(
    id="mon_7k2m4q8w1x9z3c5v6b0n2a4s",
    account_id="acct_1",
    name="checkout api",
    url="https://example.com/health",
    type="http",
    status="up",
    interval_seconds=60,
    timeout_seconds=30,
    method="GET",
    expected_status_code=200,
    failure_threshold=2,
    success_threshold=1,
    run_epoch=3,
    created=1_795_000_000,
    updated=1_795_000_060,
    metadata={"team": "payments", "tier": "1"},
    last_checked_at=1_795_000_120,
    request_headers={"Accept": "application/json"},
    assertions=[
        {"source": "json_body", "target": "ok", "property": "$.status", "comparison": "equals"},
        {"source": "status_code", "target": 400, "property": None, "comparison": "less_than"},
    ],
    tls_expiry_days=14,
    tls_verify=True,
)

_CHECK = CheckRecord(
    id="chk_aaaaaaaa7k2m4q8w1x9z3c5v",
    monitor_id=_MONITOR.id,
    status="down",
    response_time_ms=30_000.0,
    status_code=None,
    error_code="timeout",
    error_message="no response within 30 s",
    created=1_795_000_120,
)


def _check_by_hand(r: CheckRecord) -> dict[str, Any]:
    error = None
    if r.error_code is not None:
        error = {"code": r.error_code, "message": r.error_message or ""}
    return {
        "id": r.id,
        "object": "check",
        "monitor": r.monitor_id,
        "status": r.status,
        "response_time_ms": r.response_time_ms,
        "status_code": r.status_code,
        "error": error,
        "tls_expires_at": r.tls_expires_at,
        "created": r.created,
    }


VARIANTS: dict[str, tuple[Callable[[Any], dict[str, Any]], Any]] = {
    "monitor": (monitor_object, _MONITOR),
    "check": (check_object, _CHECK),
    "check-hand": (_check_by_hand, _CHECK),
}
"""Each variant: the shaper and the record it shapes."""


def _round(shape: Callable[[Any], dict[str, Any]], record: Any, calls: int) -> float:
    """Seconds for ``calls`` calls of ``shape(record)``."""
    start = time.perf_counter()
    for _ in range(calls):
        shape(record)
    return time.perf_counter() - start


def main(argv: Sequence[str] | None = None) -> None:
    """Run the rounds and print one line per variant."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    for name, (shape, record) in VARIANTS.items():
        shape(record)
        seconds = [_round(shape, record, args.calls) for _ in range(args.rounds)]
        best = min(seconds)
        listed = ", ".join(f"{args.calls / s:,.0f}" for s in seconds)
        print(
            f"{name:>10}: {args.calls / best:,.0f} calls/s, {best / args.calls * 1e6:.2f} us a call"
            f" (rounds: {listed})"
        )


if __name__ == "__main__":
    main()
