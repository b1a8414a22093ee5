"""The pure parts of the engine: the status state machine and the deadline grid."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.health import Health, after_check
from engine.schedule import grid_phase, missed_between, next_deadline, phase_offset


def run(results: str, *, failure: int = 2, success: int = 1, start: str = "pending") -> str:
    """Feed results ("u" good, "d" failed) and return the final status."""
    health = Health(start)
    for r in results:
        health = after_check(health, r == "u", failure_threshold=failure, success_threshold=success)
    return health.status


@pytest.mark.parametrize(
    ("results", "failure", "success", "start", "expected"),
    [
        ("", 2, 1, "pending", "pending"),
        ("u", 2, 1, "pending", "up"),
        ("d", 2, 1, "pending", "pending"),  # one failure is below the threshold
        ("dd", 2, 1, "pending", "down"),
        ("ud", 2, 1, "pending", "up"),  # up stays up below the failure threshold
        ("udd", 2, 1, "pending", "down"),
        ("dud", 2, 1, "up", "up"),  # the good check reset the failed streak
        ("ddu", 2, 1, "pending", "up"),
        ("ddu", 2, 2, "pending", "down"),  # two good checks needed
        ("dduu", 2, 2, "pending", "up"),
        ("d", 1, 1, "up", "down"),
        ("dddddddddd", 10, 1, "up", "down"),
        ("ddddddddd", 10, 1, "up", "up"),
        ("u", 2, 1, "down", "up"),
    ],
)
def test_status_moves_at_the_thresholds(
    results: str, failure: int, success: int, start: str, expected: str
) -> None:
    assert run(results, failure=failure, success=success, start=start) == expected


def test_thresholds_below_one_are_refused() -> None:
    with pytest.raises(ValueError):
        after_check(Health(), True, failure_threshold=0, success_threshold=1)


@given(st.text(alphabet="ud", max_size=40), st.integers(1, 10), st.integers(1, 10))
def test_status_follows_the_latest_streak(results: str, failure: int, success: int) -> None:
    status = run(results, failure=failure, success=success)
    tail = len(results) - len(results.rstrip(results[-1])) if results else 0
    if results and results[-1] == "u" and tail >= success:
        assert status == "up"
    if results and results[-1] == "d" and tail >= failure:
        assert status == "down"
    if "u" * success not in results and "d" * failure not in results:
        assert status == "pending"


@given(st.floats(0, 1e7), st.floats(0, 1000), st.integers(1, 86_400))
def test_next_deadline_is_the_next_grid_point(now: float, phase_seed: float, interval: int) -> None:
    phase = phase_seed % interval
    deadline = next_deadline(now, phase, interval)
    assert now < deadline <= now + interval + 1e-6
    k = (deadline - phase) / interval
    assert abs(k - round(k)) < 1e-6


def test_phase_is_stable_and_spread() -> None:
    assert phase_offset("mon_a", 10) == phase_offset("mon_a", 10)
    offsets = [phase_offset(f"mon_{i}", 10) for i in range(10_000)]
    assert all(0 <= o < 10 for o in offsets)
    buckets = [0] * 10
    for o in offsets:
        buckets[int(o)] += 1
    assert min(buckets) > 800  # roughly uniform: no thundering herd
    assert grid_phase("mon_a", 10, 1234.5) == pytest.approx(
        (phase_offset("mon_a", 10) + 1234.5) % 10
    )


def test_missed_ticks_are_counted_not_piled_up() -> None:
    assert missed_between(10.0, 20.0, 10) == 0
    assert missed_between(10.0, 40.0, 10) == 2
    # a probe that overran by 2.5 intervals: the next deadline skips the missed points
    assert next_deadline(35.0, 0.0, 10) == 40.0
