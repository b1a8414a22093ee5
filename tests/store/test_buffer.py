"""The store actor's bounded buffer (store.buffer): pure rules, no database, no clock."""

from __future__ import annotations

import pytest

from store import CheckRecord, StatusChange, WriteCheck
from store.buffer import StoreBuffer


def _item(n: int, *, change: bool = False) -> WriteCheck:
    check = CheckRecord(
        id=f"chk_{n}",
        monitor_id="mon_a",
        status="up",
        response_time_ms=1.0,
        status_code=None,
        error_code=None,
        error_message=None,
        created=n,
    )
    moved = None
    if change:
        moved = StatusChange(
            monitor_id="mon_a",
            check_id=check.id,
            from_status="pending",
            to_status="up",
            run_epoch=0,
            created=n,
        )
    return WriteCheck(check=check, change=moved, queued_at=float(n))


def _ids(items: list[WriteCheck]) -> list[int]:
    return [item.check.created for item in items]


def test_a_failed_batch_goes_back_to_the_front_in_order() -> None:
    buffer = StoreBuffer(limit=10)
    for n in range(5):
        buffer.append(_item(n))
    batch = buffer.take(3)
    assert _ids(batch.items) == [0, 1, 2] and len(buffer) == 2
    buffer.append(_item(5))
    buffer.put_back(batch)
    assert buffer.oldest_queued_at() == 0.0
    assert _ids(buffer.take(10).items) == [0, 1, 2, 3, 4, 5]


def test_trim_drops_the_oldest_and_counts_them_as_left() -> None:
    buffer = StoreBuffer(limit=3)
    for n in range(8):
        buffer.append(_item(n))
    assert buffer.trim() == 5
    assert (buffer.dropped, buffer.entered, buffer.left) == (5, 8, 5)
    batch = buffer.take(10)
    assert _ids(batch.items) == [5, 6, 7]
    buffer.committed(batch)
    assert buffer.left == buffer.entered == 8
    assert buffer.trim() == 0


def test_a_dropped_result_keeps_its_status_change_for_the_next_batch() -> None:
    buffer = StoreBuffer(limit=2)
    buffer.append(_item(0, change=True))
    for n in range(1, 4):
        buffer.append(_item(n))
    assert buffer.trim() == 2 and buffer.orphan_count == 1
    batch = buffer.take(10)
    assert _ids(batch.items) == [2, 3]
    assert [c.check_id for c in batch.moves] == ["chk_0"]  # the orphan comes first
    buffer.put_back(batch)  # a failed write keeps the orphan too
    assert buffer.orphan_count == 1 and len(buffer) == 2


def test_orphans_are_bounded_too() -> None:
    buffer = StoreBuffer(limit=1)
    for n in range(4):
        buffer.append(_item(n, change=True))
    assert buffer.trim() == 3
    assert buffer.orphan_count == 1 and buffer.dropped_changes == 2


def test_a_discarded_poison_batch_counts_as_dropped() -> None:
    buffer = StoreBuffer(limit=5)
    buffer.append(_item(0, change=True))
    buffer.discard(buffer.take(5))
    assert (buffer.dropped, buffer.dropped_changes, buffer.left) == (1, 1, 1)


def test_limit_must_be_positive() -> None:
    with pytest.raises(ValueError):
        StoreBuffer(limit=0)
