"""A maintenance window's occurrences, status and next window (store.recurrence; pure, so
no database and no clock): examples across both daylight-saving changes of Europe/Berlin
and America/New_York (docs/maintenance.md, "Recurring windows and daylight saving"), and
properties over generated schedules and instants."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from store.recurrence import (
    MAX_DURATION_SECONDS,
    InvalidWindow,
    Occurrence,
    Schedule,
    next_window,
    occurrences,
    parse_recurrence,
    schedule_of,
    status_at,
)

BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")


def epoch(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> int:
    """A UTC instant as epoch seconds."""
    return int(datetime(year, month, day, hour, minute, tzinfo=UTC).timestamp())


def weekly(time_zone: str, start: str, duration_seconds: int = 3_600, **more: Any) -> Schedule:
    """A recurring schedule on Sundays."""
    recurrence = {
        "rrule": more.pop("rrule", "FREQ=WEEKLY;BYDAY=SU"),
        "time_zone": time_zone,
        "start": start,
        "duration_seconds": duration_seconds,
    }
    return Schedule(recurrence=parse_recurrence(recurrence), **more)


def local_starts(schedule: Schedule, zone: ZoneInfo, lo: int, hi: int) -> list[str]:
    """Each occurrence's start on the zone's wall clock, with its offset."""
    return [
        datetime.fromtimestamp(o.starts_at, zone).isoformat() for o in occurrences(schedule, lo, hi)
    ]


# ---- daylight saving ---------------------------------------------------------------


def test_weekly_0230_in_berlin_keeps_its_local_time_across_both_changes_of_2026() -> None:
    schedule = weekly("Europe/Berlin", "2026-01-04T02:30:00")
    march = local_starts(schedule, BERLIN, epoch(2026, 3, 21), epoch(2026, 4, 6))
    # 29 March: 02:30 does not exist (02:00 CET jumps to 03:00 CEST); read with the offset
    # before the gap (RFC 5545, 3.3.5), it is 01:30 UTC, 03:30 CEST
    assert march == [
        "2026-03-22T02:30:00+01:00",
        "2026-03-29T03:30:00+02:00",
        "2026-04-05T02:30:00+02:00",
    ]
    october = local_starts(schedule, BERLIN, epoch(2026, 10, 17), epoch(2026, 11, 2))
    # 25 October: 02:30 happens twice; the first (CEST) is the occurrence, once
    assert october == [
        "2026-10-18T02:30:00+02:00",
        "2026-10-25T02:30:00+02:00",
        "2026-11-01T02:30:00+01:00",
    ]
    assert occurrences(schedule, epoch(2026, 10, 25), epoch(2026, 10, 26)) == [
        Occurrence(epoch(2026, 10, 25, 0, 30), epoch(2026, 10, 25, 1, 30))
    ]


def test_new_york_gap_and_repeated_hour_of_2026() -> None:
    spring = weekly("America/New_York", "2026-01-04T02:30:00")
    # 8 March: 02:30 does not exist; 07:30 UTC is 03:30 EDT
    assert occurrences(spring, epoch(2026, 3, 8), epoch(2026, 3, 9)) == [
        Occurrence(epoch(2026, 3, 8, 7, 30), epoch(2026, 3, 8, 8, 30))
    ]
    fall = weekly("America/New_York", "2026-01-04T01:30:00")
    # 1 November: 01:30 happens twice (EDT, then EST); the first, 05:30 UTC
    assert occurrences(fall, epoch(2026, 11, 1), epoch(2026, 11, 2)) == [
        Occurrence(epoch(2026, 11, 1, 5, 30), epoch(2026, 11, 1, 6, 30))
    ]


def test_a_start_in_the_gap_or_the_repeated_hour_is_read_as_the_rfc_says() -> None:
    in_gap = weekly("Europe/Berlin", "2026-03-29T02:30:00")
    assert next_window(in_gap, epoch(2026, 3, 1)) == Occurrence(
        epoch(2026, 3, 29, 1, 30), epoch(2026, 3, 29, 2, 30)
    )
    repeated = weekly("America/New_York", "2026-11-01T01:30:00", rrule="FREQ=DAILY;COUNT=2")
    # 01:30 EDT (05:30 UTC), then 01:30 EST the next day (06:30 UTC)
    assert occurrences(repeated, epoch(2026, 10, 1), epoch(2026, 12, 1)) == [
        Occurrence(epoch(2026, 11, 1, 5, 30), epoch(2026, 11, 1, 6, 30)),
        Occurrence(epoch(2026, 11, 2, 6, 30), epoch(2026, 11, 2, 7, 30)),
    ]


def test_duration_is_elapsed_time_across_a_change() -> None:
    # two hours from 02:00 CEST on the fall-back night end at 03:00 CET
    schedule = weekly("Europe/Berlin", "2026-10-25T02:00:00", duration_seconds=7_200)
    (first,) = occurrences(schedule, epoch(2026, 10, 24), epoch(2026, 10, 26))
    assert first.ends_at - first.starts_at == 7_200
    assert datetime.fromtimestamp(first.ends_at, BERLIN).isoformat() == "2026-10-25T03:00:00+01:00"


def test_hourly_rule_lists_the_instant_a_gap_merges_once_and_in_order() -> None:
    schedule = weekly(
        "Europe/Berlin", "2026-03-29T00:00:00", duration_seconds=600, rrule="FREQ=HOURLY"
    )
    starts = local_starts(schedule, BERLIN, epoch(2026, 3, 28, 23), epoch(2026, 3, 29, 3))
    assert starts == [
        "2026-03-29T00:00:00+01:00",
        "2026-03-29T01:00:00+01:00",
        "2026-03-29T03:00:00+02:00",
        "2026-03-29T04:00:00+02:00",
    ]


# ---- status, end, cancel -------------------------------------------------------------


def test_one_off_status_and_next_window_over_time() -> None:
    schedule = schedule_of(starts_at=1_000, ends_at=2_000, recurrence=None)
    assert status_at(schedule, 999) == "scheduled"
    assert next_window(schedule, 999) == Occurrence(1_000, 2_000)
    assert status_at(schedule, 1_000) == "in_progress"
    assert next_window(schedule, 1_999) == Occurrence(1_000, 2_000)
    assert status_at(schedule, 2_000) == "completed"
    assert next_window(schedule, 2_000) is None


def test_end_cuts_the_open_occurrence_only() -> None:
    schedule = weekly("Europe/Berlin", "2026-01-04T02:30:00")
    open_at = epoch(2026, 1, 4, 1, 40)  # 02:40 CET, ten minutes into the first one
    ended = Schedule(recurrence=schedule.recurrence, ended_at=open_at)
    assert status_at(ended, open_at) == "scheduled"
    assert next_window(ended, open_at) == Occurrence(
        epoch(2026, 1, 11, 1, 30), epoch(2026, 1, 11, 2, 30)
    )
    assert occurrences(ended, epoch(2026, 1, 4), epoch(2026, 1, 12)) == [
        Occurrence(epoch(2026, 1, 4, 1, 30), open_at),
        Occurrence(epoch(2026, 1, 11, 1, 30), epoch(2026, 1, 11, 2, 30)),
    ]


def test_cancel_drops_later_occurrences_and_lets_the_open_one_run() -> None:
    schedule = weekly("Europe/Berlin", "2026-01-04T02:30:00")
    during = epoch(2026, 1, 11, 1, 45)
    canceled = Schedule(recurrence=schedule.recurrence, canceled_at=during)
    assert status_at(canceled, during) == "in_progress"
    assert status_at(canceled, epoch(2026, 1, 11, 2, 30)) == "canceled"
    assert next_window(canceled, epoch(2026, 1, 11, 2, 30)) is None
    before = Schedule(starts_at=5_000, ends_at=6_000, canceled_at=4_000)
    assert status_at(before, 4_000) == "canceled"
    assert occurrences(before, 0, 10_000) == []


def test_a_rule_with_count_completes() -> None:
    schedule = weekly("UTC", "2026-01-04T00:00:00", rrule="FREQ=WEEKLY;COUNT=2")
    assert len(occurrences(schedule, 0, epoch(2027, 1, 1))) == 2
    assert status_at(schedule, epoch(2026, 1, 12)) == "completed"


# ---- validation ------------------------------------------------------------------------


def _recurrence(**changes: Any) -> dict[str, Any]:
    return {
        "rrule": "FREQ=DAILY",
        "time_zone": "Europe/Berlin",
        "start": "2026-01-01T03:00:00",
        "duration_seconds": 600,
    } | changes


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"rrule": "FREQ=SOMETIMES"}, "recurrence.rrule"),
        ({"rrule": "BOGUS=1"}, "recurrence.rrule"),
        ({"rrule": "FREQ=MINUTELY"}, "recurrence.rrule"),
        ({"rrule": "FREQ=HOURLY;BYMINUTE=0,30"}, "recurrence.rrule"),
        ({"rrule": "DTSTART:20260101T000000\nRRULE:FREQ=DAILY"}, "recurrence.rrule"),
        ({"rrule": "FREQ=DAILY;UNTIL=20270101T000000"}, "recurrence.rrule"),
        ({"rrule": "FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=31"}, "recurrence.rrule"),
        # never matching, at the finer frequencies python-dateutil walks to the year 9999
        ({"rrule": "FREQ=DAILY;BYMONTH=2;BYMONTHDAY=30"}, "recurrence.rrule"),
        ({"rrule": "FREQ=HOURLY;BYMONTH=4;BYMONTHDAY=31;BYHOUR=3"}, "recurrence.rrule"),
        ({"rrule": "FREQ=WEEKLY;BYMONTH=2;BYMONTHDAY=30"}, "recurrence.rrule"),
        ({"rrule": "FREQ=MONTHLY;BYDAY=6MO"}, "recurrence.rrule"),
        ({"rrule": 7}, "recurrence.rrule"),
        ({"time_zone": "Mars/Olympus_Mons"}, "recurrence.time_zone"),
        ({"time_zone": "../etc/passwd"}, "recurrence.time_zone"),
        ({"time_zone": "Europe"}, "recurrence.time_zone"),  # a directory of the database
        ({"time_zone": ""}, "recurrence.time_zone"),
        ({"start": "2026-01-01T03:00:00+01:00"}, "recurrence.start"),
        ({"start": "yesterday"}, "recurrence.start"),
        ({"duration_seconds": 0}, "recurrence.duration_seconds"),
        ({"duration_seconds": -60}, "recurrence.duration_seconds"),
        ({"duration_seconds": 1.5}, "recurrence.duration_seconds"),
        ({"duration_seconds": True}, "recurrence.duration_seconds"),
        ({"duration_seconds": MAX_DURATION_SECONDS + 1}, "recurrence.duration_seconds"),
        ({"every": "day"}, "recurrence"),
    ],
)
def test_a_bad_recurrence_names_its_field(changes: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidWindow) as raised:
        parse_recurrence(_recurrence(**changes))
    assert raised.value.field == field
    assert isinstance(raised.value, ValueError)


@pytest.mark.parametrize(
    ("starts_at", "ends_at", "recurrence", "field"),
    [
        (100, 100, None, "ends_at"),
        (100, 50, None, "ends_at"),
        (100, 100 + MAX_DURATION_SECONDS + 1, None, "ends_at"),
        (None, 100, None, "starts_at"),
        (100, None, None, "ends_at"),
        ("100", 200, None, "starts_at"),
        (100, 200, _recurrence(), "starts_at"),
    ],
)
def test_a_bad_schedule_names_its_field(
    starts_at: object, ends_at: object, recurrence: dict[str, Any] | None, field: str
) -> None:
    with pytest.raises(InvalidWindow) as raised:
        schedule_of(starts_at=starts_at, ends_at=ends_at, recurrence=recurrence)
    assert raised.value.field == field


@pytest.mark.parametrize(
    "rule",
    [
        "FREQ=DAILY;BYMONTH=2;BYMONTHDAY=29",  # a leap day: 2028
        "FREQ=WEEKLY",  # the start's weekday
        "FREQ=WEEKLY;INTERVAL=2;BYDAY=TU",
        "FREQ=MONTHLY;BYDAY=-1FR",
        "FREQ=MONTHLY;BYDAY=5TU;BYMONTH=2",  # a fifth Tuesday of February: 2028
        "FREQ=HOURLY;BYDAY=SU;BYHOUR=3",
        "FREQ=DAILY;BYMONTH=3",
        "FREQ=YEARLY;BYWEEKNO=53;BYDAY=MO",
        "FREQ=YEARLY;BYYEARDAY=366",
    ],
)
def test_a_rule_that_matches_somewhere_in_ten_years_is_taken(rule: str) -> None:
    assert parse_recurrence(_recurrence(rrule=rule)).rrule == rule


def test_a_parsed_recurrence_round_trips_as_json() -> None:
    value = _recurrence(rrule="RRULE:FREQ=WEEKLY;BYDAY=MO,TH", time_zone="America/New_York")
    assert parse_recurrence(value).as_json() == value
    assert parse_recurrence(parse_recurrence(value).as_json()) == parse_recurrence(value)


# ---- properties ------------------------------------------------------------------------

ZONES = ["Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata", "UTC"]
RULES = [
    "FREQ=WEEKLY;BYDAY=SU",
    "FREQ=DAILY",
    "FREQ=DAILY;INTERVAL=3",
    "FREQ=HOURLY;INTERVAL=5",
    "FREQ=MONTHLY;BYMONTHDAY=-1",
    "FREQ=WEEKLY;BYDAY=MO,WE,FR;BYHOUR=1,2,3",
    "FREQ=WEEKLY;INTERVAL=3;BYDAY=TU,SA;WKST=SU",
    "FREQ=HOURLY;INTERVAL=7;BYDAY=MO,TU",
    "FREQ=DAILY;INTERVAL=2;UNTIL=20261001T000000Z",
]
YEAR_2026 = (epoch(2026, 1, 1), epoch(2027, 1, 1))


@st.composite
def recurring(draw: st.DrawFn) -> Schedule:
    hour, minute = draw(st.integers(0, 23)), draw(st.sampled_from([0, 15, 30, 45]))
    day = draw(st.integers(1, 28))
    month = draw(st.integers(1, 12))
    year = draw(st.integers(2019, 2025))
    return Schedule(
        recurrence=parse_recurrence(
            {
                "rrule": draw(st.sampled_from(RULES)),
                "time_zone": draw(st.sampled_from(ZONES)),
                "start": f"{year}-{month:02d}-{day:02d}T{hour:02d}:{minute:02d}:00",
                "duration_seconds": draw(st.integers(60, 4 * 3_600)),
            }
        )
    )


instants = st.integers(*YEAR_2026)


@settings(max_examples=60, deadline=None)
@given(schedule=recurring(), lo=instants, span=st.integers(0, 20 * 86_400))
def test_occurrences_overlap_the_interval_in_order_each_once(
    schedule: Schedule, lo: int, span: int
) -> None:
    found = occurrences(schedule, lo, lo + span)
    assert recurrence_duration(schedule) > 0
    assert all(o.starts_at < lo + span and o.ends_at > lo for o in found)
    starts = [o.starts_at for o in found]
    assert starts == sorted(set(starts))
    assert all(o.ends_at - o.starts_at == recurrence_duration(schedule) for o in found)


@settings(max_examples=60, deadline=None)
@given(schedule=recurring(), lo=instants, cut=st.integers(1, 10 * 86_400))
def test_splitting_an_interval_splits_its_occurrences(
    schedule: Schedule, lo: int, cut: int
) -> None:
    hi = lo + 10 * 86_400
    mid = min(lo + cut, hi)
    whole = occurrences(schedule, lo, hi)
    left, right = occurrences(schedule, lo, mid), occurrences(schedule, mid, hi)
    assert sorted(set(left) | set(right), key=lambda o: o.starts_at) == whole


@settings(max_examples=60, deadline=None)
@given(schedule=recurring(), at=instants)
def test_status_and_next_window_agree_with_occurrences(schedule: Schedule, at: int) -> None:
    upcoming = next_window(schedule, at)
    if upcoming is None:  # a rule with UNTIL, over
        assert status_at(schedule, at) == "completed"
        assert occurrences(schedule, at, at + 400 * 86_400) == []
        return
    assert upcoming.ends_at > at
    assert upcoming == occurrences(schedule, at, max(at, upcoming.starts_at) + 1)[0]
    assert status_at(schedule, at) == ("in_progress" if upcoming.starts_at <= at else "scheduled")


@settings(max_examples=40, deadline=None)
@given(schedule=recurring(), at=instants, offset=st.integers(0, 5 * 86_400))
def test_end_and_cancel_only_ever_remove_time(schedule: Schedule, at: int, offset: int) -> None:
    lo, hi = at - 5 * 86_400, at + 5 * 86_400
    planned = occurrences(schedule, lo, hi)
    for changed in (
        Schedule(recurrence=schedule.recurrence, ended_at=at),
        Schedule(recurrence=schedule.recurrence, canceled_at=at),
    ):
        after = occurrences(changed, lo, hi)
        assert all(
            any(p.starts_at == a.starts_at and a.ends_at <= p.ends_at for p in planned)
            for a in after
        )
        assert all(o.starts_at <= at for o in after if changed.canceled_at is not None)
        assert status_at(changed, at + offset) in {
            "in_progress",
            "canceled",
            "scheduled",
            "completed",
        }
        if changed.canceled_at is not None:
            assert status_at(changed, at + offset) in {"in_progress", "canceled"}
    ended = Schedule(recurrence=schedule.recurrence, ended_at=at)
    assert not any(o.starts_at <= at < o.ends_at for o in occurrences(ended, lo, hi))


def reference(schedule: Schedule, lo: int, hi: int) -> list[Occurrence]:
    """The occurrences of ``[lo, hi)`` the plain way: every instance of the rule from its
    own start, each read with fold=0, in order, each instant once."""
    assert schedule.recurrence is not None
    zone = ZoneInfo(schedule.recurrence.time_zone)
    duration = schedule.recurrence.duration_seconds
    wide = (
        datetime.fromtimestamp(lo - duration - 2 * 86_400, zone).replace(fold=0),
        datetime.fromtimestamp(hi + 2 * 86_400, zone).replace(fold=0),
    )
    starts = {
        int(local.replace(fold=0).timestamp())
        for local in schedule.recurrence.rule().between(*wide, inc=True)
    }
    return [Occurrence(s, s + duration) for s in sorted(starts) if s < hi and s + duration > lo]


@settings(max_examples=60, deadline=None)
@given(schedule=recurring(), lo=instants, span=st.integers(0, 20 * 86_400))
def test_occurrences_are_the_rule_walked_from_its_own_start(
    schedule: Schedule, lo: int, span: int
) -> None:
    assert occurrences(schedule, lo, lo + span) == reference(schedule, lo, lo + span)


def test_occurrences_across_the_gap_match_the_plain_walk() -> None:
    hourly = weekly("Europe/Berlin", "2019-05-05T00:30:00", 600, rrule="FREQ=HOURLY;INTERVAL=7")
    lo, hi = epoch(2026, 3, 27), epoch(2026, 4, 2)
    assert occurrences(hourly, lo, hi) == reference(hourly, lo, hi)
    fortnight = weekly("America/New_York", "2020-02-29T02:30:00", rrule="FREQ=WEEKLY;INTERVAL=2")
    lo, hi = epoch(2026, 2, 1), epoch(2026, 12, 1)
    found = occurrences(fortnight, lo, hi)
    assert found == reference(fortnight, lo, hi)
    assert len(found) == 22


def recurrence_duration(schedule: Schedule) -> int:
    assert schedule.recurrence is not None
    return schedule.recurrence.duration_seconds


def test_one_off_is_listed_when_it_overlaps() -> None:
    schedule = Schedule(starts_at=100, ends_at=200)
    assert occurrences(schedule, 0, 100) == []
    assert occurrences(schedule, 0, 101) == [Occurrence(100, 200)]
    assert occurrences(schedule, 199, 300) == [Occurrence(100, 200)]
    assert occurrences(schedule, 200, 300) == []
    with pytest.raises(ValueError):
        occurrences(schedule, 10, 5)
