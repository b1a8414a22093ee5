"""The figures of ``uptrio bench alerts`` (bench.alerts.alert_figures) from rows as the
harness reads them: what counts as lost, as a duplicate, as written after the drain, and
the first notification's latency. Pure: no process, no socket."""

from __future__ import annotations

from typing import Any

from bench.alerts import alert_figures
from bench.receiver import Receiver

START, END = 1000.0, 1020.0


def _row(alert: str, kind: str, status: str, created: int = 1005) -> dict[str, Any]:
    return {"alert_id": alert, "kind": kind, "status": status, "attempts": 1, "created": created}


def _figures(rows: list[dict[str, Any]], received: list[list[Any]]) -> dict[str, Any]:
    triggered = [
        {"alert_id": "alt_a", "committed": 1001.0},
        {"alert_id": "alt_b", "committed": 1002.0},
        {"alert_id": "alt_c", "committed": 1019.5},
        {"alert_id": "alt_before", "committed": 999.0},  # before the window
    ]
    return alert_figures(
        triggered, rows, received, window=(START, END), interval=10.0, drained_at=1025.5
    )


def test_lost_duplicates_and_latency_are_counted_per_alert_and_kind() -> None:
    rows = [
        _row("alt_a", "trigger", "succeeded"),
        _row("alt_a", "resolved", "succeeded"),
        _row("alt_b", "trigger", "succeeded"),  # never received: lost
        _row("alt_b", "resolved", "pending"),  # never received: lost
        _row("alt_c", "trigger", "cancelled"),  # cancelled: neither lost nor received
        _row("alt_c", "resolved", "succeeded", created=1026),  # after the drain
        _row("alt_before", "trigger", "succeeded"),
    ]
    received = [
        ["alt_a", "trigger", 1001.25],
        ["alt_a", "trigger", 1001.5],  # the same notification twice
        ["alt_a", "resolved", 1011.0],
        ["alt_c", "resolved", 1026.2],
        ["alt_before", "trigger", 999.1],
    ]
    figures = _figures(rows, received)
    assert figures["alerts_raised"] == 3
    assert figures["notifications"] == {
        "trigger": {"succeeded": 2, "pending": 0, "failed": 0, "cancelled": 1},
        "resolved": {"succeeded": 1, "pending": 1, "failed": 0, "cancelled": 0},
    }
    assert (figures["received"], figures["lost"], figures["written_after_drain"]) == (2, 2, 1)
    assert figures["alerts_without_first_notification"] == 2  # alt_b and alt_c
    latency = figures["first_notification_latency_ms"]
    assert latency["count"] == 1 and latency["p50"] == latency["max"] == 250.0
    assert figures["latency_p50_ms_by_interval"] == [250.0]
    whole = figures["whole_run"]
    assert whole["duplicates"] == 1 and whole["received_posts"] == 5
    assert whole["succeeded_not_received"] == 1  # alt_b's trigger
    assert whole["notifications"] == {"succeeded": 5, "pending": 1, "failed": 0, "cancelled": 1}


def test_a_drain_that_ran_out_counts_what_is_still_pending_as_lost() -> None:
    rows = [_row("alt_a", "trigger", "pending", created=1001)]
    figures = alert_figures(
        [{"alert_id": "alt_a", "committed": 1001.0}],
        rows,
        [],
        window=(START, END),
        interval=10.0,
        drained_at=None,
    )
    assert figures["lost"] == 1 and figures["written_after_drain"] == 0


def test_the_receiver_tells_a_notification_from_an_events_delivery() -> None:
    receiver = Receiver(verify_every=1)
    body = b'{"object": "notification", "kind": "trigger", "alert": {"id": "alt_a"}}'
    receiver.record("", 5.0, "", body)
    receiver.record("evt_1", 6.0, "t=1,v1=00", b'{"type": "alert.triggered"}')
    receiver.record("", 7.0, "", b"not json")
    dump = receiver.report()
    assert dump["notifications"] == [("alt_a", "trigger", 5.0)]
    assert dump["received"] == [("evt_1", 6.0, "alert.triggered"), ("", 7.0, "")]
    assert dump["signatures"]["checked"] == 2
