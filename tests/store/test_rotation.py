"""Who is on call and the shifts of a schedule (store.rotation; pure, so no database and no
clock): rotations across both 2026 daylight-saving changes of Europe/Berlin (29 March,
25 October) and America/New_York (8 March, 1 November), handoffs inside the gap and the
repeated hour, restrictions, layers, overrides, ``until``, validation (docs/on-call.md, "How a
schedule decides"), and properties over generated schedules, overrides and ranges."""

from __future__ import annotations

from datetime import UTC, datetime
from itertools import pairwise
from typing import Any
from unittest.mock import patch
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from store import rotation
from store.rotation import (
    HORIZON_SECONDS,
    InvalidSchedule,
    Override,
    Plan,
    Shift,
    on_call,
    parse_plan,
    plan_json,
    shifts,
)

BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")
HOUR, DAY = 3_600, 86_400


def epoch(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> int:
    """A UTC instant as epoch seconds."""
    return int(datetime(year, month, day, hour, minute, tzinfo=UTC).timestamp())


def layer(members: str, kind: str = "daily", handoff: str = "2026-01-05T09:00", **more: Any) -> Any:
    """A layer in the API's shape; ``members`` one letter each."""
    rotation = {"type": kind, "handoff": handoff}
    if "length_seconds" in more:
        rotation["length_seconds"] = more.pop("length_seconds")
    return {"members": list(members), "rotation": rotation, **more}


def plan(time_zone: str, *layers: Any) -> Plan:
    return parse_plan(time_zone, list(layers))


def local(shift: Shift, zone: ZoneInfo) -> tuple[str, str, float]:
    """A shift as its member, its local start (with offset) and its length in hours."""
    start = datetime.fromtimestamp(shift.start, zone).isoformat(timespec="minutes")
    return shift.member, start, (shift.end - shift.start) / HOUR


# ---- rotations across daylight saving ------------------------------------------------------


@pytest.mark.parametrize(
    ("time_zone", "before", "after", "hours"),
    [
        ("Europe/Berlin", (2026, 3, 28), (2026, 3, 29), 23),
        ("Europe/Berlin", (2026, 10, 24), (2026, 10, 25), 25),
        ("America/New_York", (2026, 3, 7), (2026, 3, 8), 23),
        ("America/New_York", (2026, 10, 31), (2026, 11, 1), 25),
    ],
)
def test_daily_0900_handoff_stays_0900_local_and_the_shift_across_a_change_is_23_or_25_hours(
    time_zone: str, before: tuple[int, int, int], after: tuple[int, int, int], hours: int
) -> None:
    zone = ZoneInfo(time_zone)
    schedule = plan(time_zone, layer("abc", handoff="2026-01-01T09:00"))
    listed = shifts(schedule, [], epoch(*before) - 2 * DAY, epoch(*after) + 3 * DAY)
    inner = [local(s, zone) for s in listed[1:-1]]
    assert {start[11:16] for _, start, _ in inner} == {"09:00"}
    across = [
        s for s in listed if datetime.fromtimestamp(s.start, zone).date().timetuple()[:3] == before
    ]
    assert local(across[0], zone)[2] == hours
    assert {length for *_, length in inner} == {24, hours}
    members = [member for member, *_ in inner]
    assert all(b == "abc"[("abc".index(a) + 1) % 3] for a, b in pairwise(members))


@pytest.mark.parametrize(
    ("time_zone", "monday", "hours"),
    [
        ("Europe/Berlin", (2026, 3, 23), 167),
        ("Europe/Berlin", (2026, 10, 19), 169),
        ("America/New_York", (2026, 3, 2), 167),
        ("America/New_York", (2026, 10, 26), 169),
    ],
)
def test_weekly_monday_handoff_keeps_its_local_time_and_the_week_across_a_change_is_an_hour_off(
    time_zone: str, monday: tuple[int, int, int], hours: int
) -> None:
    zone = ZoneInfo(time_zone)
    schedule = plan(time_zone, layer("ab", "weekly", "2026-01-05T09:00"))
    start = epoch(*monday) - 14 * DAY
    listed = [local(s, zone) for s in shifts(schedule, [], start, start + 35 * DAY)[1:-1]]
    assert [start[:16].endswith("T09:00") for _, start, _ in listed] == [True] * len(listed)
    assert {datetime.fromisoformat(start).weekday() for _, start, _ in listed} == {0}
    day = datetime(*monday).date().isoformat()
    assert next(length for _, start, length in listed if start.startswith(day)) == hours
    assert all(a[0] != b[0] for a, b in pairwise(listed))


def test_handoff_in_the_spring_gap_moves_forward_and_in_the_repeated_hour_takes_the_first() -> None:
    schedule = plan("Europe/Berlin", layer("ab", handoff="2026-01-01T02:30"))
    spring = shifts(schedule, [], epoch(2026, 3, 27, 12), epoch(2026, 3, 30, 12))
    assert [local(s, BERLIN) for s in spring[1:-1]] == [
        (spring[1].member, "2026-03-28T02:30+01:00", 24.0),  # to 02:30 read as 03:30 CEST
        (spring[2].member, "2026-03-29T03:30+02:00", 23.0),
    ]
    autumn = shifts(schedule, [], epoch(2026, 10, 23, 12), epoch(2026, 10, 26, 12))
    assert [local(s, BERLIN) for s in autumn[1:-1]] == [
        (autumn[1].member, "2026-10-24T02:30+02:00", 24.0),
        (autumn[2].member, "2026-10-25T02:30+02:00", 25.0),  # the first 02:30 (CEST)
    ]
    new_york = plan("America/New_York", layer("ab", handoff="2026-01-01T01:30"))
    fall = shifts(new_york, [], epoch(2026, 10, 31, 12), epoch(2026, 11, 2, 12))
    assert local(fall[1], NEW_YORK) == (fall[1].member, "2026-11-01T01:30-04:00", 25.0)


def test_custom_12_hour_rotation_hands_off_at_0900_and_2100_local_across_spring_forward() -> None:
    schedule = plan(
        "Europe/Berlin", layer("ab", "custom", "2026-03-01T09:00", length_seconds=12 * HOUR)
    )
    listed = [
        local(s, BERLIN) for s in shifts(schedule, [], epoch(2026, 3, 28, 8), epoch(2026, 3, 30, 7))
    ]
    assert listed == [
        ("a", "2026-03-28T09:00+01:00", 12.0),
        ("b", "2026-03-28T21:00+01:00", 11.0),
        ("a", "2026-03-29T09:00+02:00", 12.0),
        ("b", "2026-03-29T21:00+02:00", 12.0),
    ]
    # handoff 0 is 2026-03-01T09:00, member a; 54 handoffs later it is 2026-03-28T09:00
    assert on_call(schedule, [], epoch(2026, 2, 1, 8, 30)) == (["a"], epoch(2026, 2, 1, 20))
    assert on_call(schedule, [], epoch(2026, 2, 1, 7, 59))[0] == ["b"]


def test_a_rotation_before_its_first_handoff_runs_backwards() -> None:
    schedule = plan("UTC", layer("abc", handoff="2026-06-10T00:00"))
    assert on_call(schedule, [], epoch(2026, 6, 10))[0] == ["a"]
    assert on_call(schedule, [], epoch(2026, 6, 9, 23))[0] == ["c"]
    assert on_call(schedule, [], epoch(2026, 6, 8))[0] == ["b"]
    assert on_call(schedule, [], epoch(2026, 6, 7))[0] == ["a"]


# ---- restrictions, layers, overrides ---------------------------------------------------


BUSINESS = {"days": ["mon", "tue", "wed", "thu", "fri"], "start": "09:00", "end": "17:00"}


def test_restricted_upper_layer_wins_in_business_hours_and_the_lower_layer_shows_through() -> None:
    schedule = plan(
        "America/New_York",
        layer("n", "weekly"),
        layer("d", "weekly", restrictions=[BUSINESS]),
    )
    # Friday 6 March to Tuesday 10 March 2026, across the spring change (Sunday 8 March)
    listed = [
        (*local(s, NEW_YORK), s.layer)
        for s in shifts(schedule, [], epoch(2026, 3, 6, 5), epoch(2026, 3, 10, 4))
    ]
    assert listed == [
        ("n", "2026-03-06T00:00-05:00", 9.0, 0),
        ("d", "2026-03-06T09:00-05:00", 8.0, 1),
        ("n", "2026-03-06T17:00-05:00", 63.0, 0),  # Friday 17:00 to Monday 09:00, an hour short
        ("d", "2026-03-09T09:00-04:00", 8.0, 1),
        ("n", "2026-03-09T17:00-04:00", 7.0, 0),
    ]
    assert on_call(schedule, [], epoch(2026, 3, 9, 14)) == (["d"], epoch(2026, 3, 9, 21))
    assert on_call(schedule, [], epoch(2026, 3, 7)) == (["n"], epoch(2026, 3, 9, 13))


def test_restriction_to_2400_and_one_across_sunday_midnight_cover_the_night_without_a_seam() -> (
    None
):
    night = [
        {"days": ["sun"], "start": "22:00", "end": "24:00"},
        {"days": ["mon"], "start": "00:00", "end": "06:00"},
    ]
    schedule = plan("Europe/Berlin", layer("x", "weekly"), layer("y", "weekly", restrictions=night))
    listed = shifts(schedule, [], epoch(2026, 3, 15, 12), epoch(2026, 3, 16, 12))
    assert [local(s, BERLIN) for s in listed] == [
        ("x", "2026-03-15T13:00+01:00", 9.0),
        ("y", "2026-03-15T22:00+01:00", 8.0),
        ("x", "2026-03-16T06:00+01:00", 7.0),
    ]


def test_overrides_win_over_every_layer_and_overlapping_ones_put_both_on_call() -> None:
    schedule = plan(
        "UTC", layer("ab", handoff="2026-05-01T00:00"), layer("c", restrictions=[BUSINESS])
    )
    overrides = [
        Override("ovr_1", "z", epoch(2026, 5, 4, 8), epoch(2026, 5, 4, 12)),
        Override("ovr_2", "y", epoch(2026, 5, 4, 10), epoch(2026, 5, 4, 14)),
    ]
    assert on_call(schedule, overrides, epoch(2026, 5, 4, 9)) == (["z"], epoch(2026, 5, 4, 10))
    assert on_call(schedule, overrides, epoch(2026, 5, 4, 11)) == (
        ["z", "y"],
        epoch(2026, 5, 4, 12),
    )
    assert on_call(schedule, overrides, epoch(2026, 5, 4, 13)) == (["y"], epoch(2026, 5, 4, 14))
    assert on_call(schedule, overrides, epoch(2026, 5, 4, 14)) == (["c"], epoch(2026, 5, 4, 17))
    listed = shifts(schedule, overrides, epoch(2026, 5, 4, 0), epoch(2026, 5, 4, 18))
    assert listed == [
        Shift("b", epoch(2026, 5, 4, 0), epoch(2026, 5, 4, 8), 0, None),
        Shift("z", epoch(2026, 5, 4, 8), epoch(2026, 5, 4, 12), None, "ovr_1"),
        Shift("y", epoch(2026, 5, 4, 10), epoch(2026, 5, 4, 14), None, "ovr_2"),
        Shift("c", epoch(2026, 5, 4, 14), epoch(2026, 5, 4, 17), 1, None),
        Shift("b", epoch(2026, 5, 4, 17), epoch(2026, 5, 4, 18), 0, None),
    ]


def test_one_members_overlapping_overrides_never_overlap_in_the_shifts() -> None:
    schedule = plan("UTC", layer("a"))
    overrides = [
        Override("ovr_b", "z", 1_000, 5_000),
        Override("ovr_a", "z", 2_000, 3_000),  # inside the first: no shift of its own
        Override("ovr_c", "z", 4_000, 9_000),
    ]
    assert shifts(schedule, overrides, 0, 10_000) == [
        Shift("a", 0, 1_000, 0, None),
        Shift("z", 1_000, 5_000, None, "ovr_b"),
        Shift("z", 5_000, 9_000, None, "ovr_c"),
        Shift("a", 9_000, 10_000, 0, None),
    ]
    assert on_call(schedule, overrides, 2_500) == (["z"], 9_000)


def test_until_skips_changes_that_leave_the_same_members_on_call() -> None:
    schedule = plan(
        "UTC", layer("ab", handoff="2026-05-01T00:00"), layer("a", handoff="2026-05-01T06:00")
    )
    assert on_call(schedule, [], epoch(2026, 5, 1)) == (["a"], None)  # layer 1 always has a
    single = plan(
        "UTC", layer("aa", restrictions=[{"days": ["mon"], "start": "00:00", "end": "24:00"}])
    )
    at = epoch(2026, 5, 4, 12)  # a Monday
    assert on_call(single, [Override("o", "a", at + HOUR, at + 2 * HOUR)], at) == (
        ["a"],
        epoch(2026, 5, 5),
    )
    assert on_call(single, [], epoch(2026, 5, 5)) == ([], epoch(2026, 5, 11))
    restricted = plan("UTC", layer("a", restrictions=[BUSINESS]))
    assert on_call(restricted, [], epoch(2026, 5, 2))[1] == epoch(2026, 5, 4, 9)
    assert on_call(plan("UTC", layer("ab")), [Override("o", "q", 0, epoch(2027, 1, 1))], 10) == (
        ["q"],
        None,  # the override outlasts the horizon
    )
    assert HORIZON_SECONDS == 90 * DAY


def test_until_past_many_changes_that_change_nothing_is_read_from_the_shifts() -> None:
    every_day = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
    every_two_hours = [
        {"days": every_day, "start": f"{h:02}:00", "end": f"{h:02}:30"} for h in range(0, 24, 2)
    ]
    schedule = plan("Europe/Berlin", layer("a"), layer("aa", restrictions=every_two_hours))
    at = epoch(2026, 3, 1)
    later = Override("ovr_1", "b", at + 30 * DAY + 600, at + 31 * DAY)
    assert on_call(schedule, [], at) == (["a"], None)
    assert on_call(schedule, [later], at) == (["a"], at + 30 * DAY + 600)
    assert on_call(schedule, [later], at + 30 * DAY + 600) == (["b"], at + 31 * DAY)


def test_shifts_refuses_a_range_over_90_days_or_backwards() -> None:
    schedule = plan("UTC", layer("a"))
    assert shifts(schedule, [], 100, 100) == []
    assert len(shifts(schedule, [], 0, 90 * DAY)) == 1
    with pytest.raises(ValueError, match="90"):
        shifts(schedule, [], 0, 90 * DAY + 1)
    with pytest.raises(ValueError):
        shifts(schedule, [], 100, 99)
    with pytest.raises(ValueError):
        on_call(schedule, [], -1)


# ---- validation --------------------------------------------------------------------------


GOOD = layer("ab", restrictions=[BUSINESS])


def with_(path: list[Any], value: Any) -> list[Any]:
    """``[GOOD]`` with the value at ``path`` (keys and indexes) replaced, or removed when
    ``value`` is ``...``."""
    import copy

    layers = [copy.deepcopy(GOOD)]
    target: Any = layers
    for key in path[:-1]:
        target = target[key]
    if value is ...:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return layers


@pytest.mark.parametrize(
    ("layers", "field"),
    [
        ({}, "layers"),
        ([], "layers"),
        ([GOOD] * 6, "layers"),
        (["x"], "layers[0]"),
        (with_([0, "color"], "red"), "layers[0].color"),
        (with_([0, "name"], ""), "layers[0].name"),
        (with_([0, "members"], ...), "layers[0].members"),
        (with_([0, "members"], []), "layers[0].members"),
        (with_([0, "members"], ["m"] * 51), "layers[0].members"),
        (with_([0, "members", 1], 7), "layers[0].members[1]"),
        (with_([0, "rotation"], ...), "layers[0].rotation"),
        (with_([0, "rotation", "type"], "monthly"), "layers[0].rotation.type"),
        (with_([0, "rotation", "length_seconds"], 7_200), "layers[0].rotation.length_seconds"),
        (with_([0, "rotation", "handoff"], "2026-12-01"), "layers[0].rotation.handoff"),
        (with_([0, "rotation", "handoff"], "2026-12-01T09:00+01:00"), "layers[0].rotation.handoff"),
        (with_([0, "rotation", "handoff"], "tomorrow"), "layers[0].rotation.handoff"),
        (with_([0, "rotation", "handoff"], 1_800_000_000), "layers[0].rotation.handoff"),
        (with_([0, "restrictions"], {}), "layers[0].restrictions"),
        (with_([0, "restrictions", 0, "days"], []), "layers[0].restrictions[0].days"),
        (
            with_([0, "restrictions", 0, "days"], ["mon", "funday"]),
            "layers[0].restrictions[0].days[1]",
        ),
        (
            with_([0, "restrictions", 0, "days"], ["mon", "mon"]),
            "layers[0].restrictions[0].days[1]",
        ),
        (with_([0, "restrictions", 0, "start"], "9:00"), "layers[0].restrictions[0].start"),
        (with_([0, "restrictions", 0, "start"], "24:00"), "layers[0].restrictions[0].start"),
        (with_([0, "restrictions", 0, "end"], "08:00"), "layers[0].restrictions[0].end"),
        (with_([0, "restrictions", 0, "end"], "09:00"), "layers[0].restrictions[0].end"),
        (with_([0, "restrictions", 0, "end"], "25:00"), "layers[0].restrictions[0].end"),
    ],
)
def test_each_invalid_field_is_named(layers: Any, field: str) -> None:
    with pytest.raises(InvalidSchedule) as caught:
        parse_plan("Europe/Berlin", layers)
    assert caught.value.field == field


@pytest.mark.parametrize("length", [None, 3_599, 2_592_001, 7_200.0, True, "7200"])
def test_custom_rotation_needs_a_length_from_an_hour_to_30_days(length: Any) -> None:
    layers = with_(
        [0, "rotation"], {"type": "custom", "handoff": "2026-12-01T09:00", "length_seconds": length}
    )
    with pytest.raises(InvalidSchedule) as caught:
        parse_plan("UTC", layers)
    assert caught.value.field == "layers[0].rotation.length_seconds"


@pytest.mark.parametrize("zone", ["Mars/Olympus", "Europe", "../etc", "", None, 1])
def test_unknown_time_zone_is_refused(zone: Any) -> None:
    with pytest.raises(InvalidSchedule) as caught:
        parse_plan(zone, [GOOD])
    assert caught.value.field == "time_zone"


def test_plan_json_round_trips_through_parse_plan() -> None:
    layers = [
        layer("ab", "custom", "2026-12-01T09:00:30", length_seconds=7_200, name="Nights"),
        layer("c", restrictions=[{"days": ["sun", "mon"], "start": "00:00", "end": "24:00"}]),
    ]
    parsed = parse_plan("America/New_York", layers)
    shown = plan_json(parsed)
    assert parse_plan("America/New_York", shown) == parsed
    assert shown[1]["name"] == "Layer 2"
    assert shown[1]["restrictions"] == [{"days": ["mon", "sun"], "start": "00:00", "end": "24:00"}]
    assert shown[0]["rotation"] == {
        "type": "custom",
        "length_seconds": 7_200,
        "handoff": "2026-12-01T09:00:30",
    }


# ---- properties --------------------------------------------------------------------------

ZONES = ["Europe/Berlin", "America/New_York", "UTC", "Australia/Lord_Howe"]
DAYS = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
# around both 2026 changes of Berlin and New York
ANCHORS = [epoch(2026, 3, 6), epoch(2026, 3, 27), epoch(2026, 10, 23), epoch(2026, 10, 30)]


@st.composite
def restrictions(draw: st.DrawFn) -> dict[str, Any]:
    start = draw(st.integers(0, 47)) * 30
    end = draw(st.integers(start // 30 + 1, 48)) * 30
    return {
        "days": draw(st.lists(st.sampled_from(DAYS), min_size=1, max_size=7, unique=True)),
        "start": f"{start // 60:02}:{start % 60:02}",
        "end": f"{end // 60:02}:{end % 60:02}",
    }


@st.composite
def layers(draw: st.DrawFn, unrestricted: bool) -> dict[str, Any]:
    kind = draw(st.sampled_from(["daily", "weekly", "custom"]))
    handoff = datetime(
        2026,
        draw(st.integers(1, 12)),
        draw(st.integers(1, 28)),
        draw(st.integers(0, 23)),
        draw(st.sampled_from([0, 30])),
    )
    rotation: dict[str, Any] = {"type": kind, "handoff": handoff.isoformat(timespec="minutes")}
    if kind == "custom":
        rotation["length_seconds"] = draw(st.integers(1, 60)) * 1_800 + 1_800
    return {
        "members": draw(st.lists(st.sampled_from("abcde"), min_size=1, max_size=5)),
        "rotation": rotation,
        "restrictions": [] if unrestricted else draw(st.lists(restrictions(), max_size=3)),
    }


@st.composite
def cases(draw: st.DrawFn, plain: bool = False) -> tuple[Plan, list[Override], int, int]:
    count = draw(st.integers(1, 5))
    drawn = [draw(layers(unrestricted=plain and i == 0)) for i in range(count)]
    start = draw(st.sampled_from(ANCHORS)) + draw(st.integers(0, 4 * DAY))
    end = start + draw(st.integers(1, 6 * DAY))
    overrides = (
        []
        if plain
        else [
            Override(f"ovr_{i}", draw(st.sampled_from("abxy")), s, s + draw(st.integers(1, DAY)))
            for i, s in enumerate(draw(st.lists(st.integers(start - DAY, end), max_size=5)))
        ]
    )
    return parse_plan(draw(st.sampled_from(ZONES)), drawn), overrides, start, end


@settings(max_examples=60, deadline=None)
@given(cases(), st.lists(st.floats(0, 1), max_size=5))
def test_shifts_are_in_range_ascending_never_self_overlapping_and_agree_with_on_call(
    case: tuple[Plan, list[Override], int, int], fractions: list[float]
) -> None:
    schedule, overrides, start, end = case
    listed = shifts(schedule, overrides, start, end)
    assert all(start <= s.start < s.end <= end for s in listed)
    assert [s.start for s in listed] == sorted(s.start for s in listed)
    assert all((s.layer is None) != (s.override is None) for s in listed)
    for member in {s.member for s in listed}:
        own = [s for s in listed if s.member == member]
        assert all(a.end <= b.start for a, b in pairwise(own))
    boundaries = sorted({start} | {t for s in listed for t in (s.start, s.end) if t < end})
    instants = boundaries + [start + int(f * (end - start - 1)) for f in fractions]
    for at in instants:
        members, until = on_call(schedule, overrides, at)
        assert members == [s.member for s in listed if s.start <= at < s.end]
        assert rotation.members_at(schedule, overrides, at) == members
        assert until is None or until > at
        later = [b for b in boundaries if b > at and (until is None or b < until)]
        assert all(on_call(schedule, overrides, b)[0] == members for b in later)
        if until is not None and until < end:
            assert until in boundaries
            assert on_call(schedule, overrides, until)[0] != members
        with patch.object(rotation, "_STEPS", 0):  # until read from shifts at once
            assert on_call(schedule, overrides, at) == (members, until)


@settings(max_examples=40, deadline=None)
@given(cases(plain=True))
def test_with_an_unrestricted_first_layer_and_no_overrides_shifts_cover_the_range_once(
    case: tuple[Plan, list[Override], int, int],
) -> None:
    schedule, _, start, end = case
    listed = shifts(schedule, [], start, end)
    assert listed[0].start == start and listed[-1].end == end
    assert all(a.end == b.start for a, b in pairwise(listed))
    assert all(a.member != b.member or a.layer != b.layer for a, b in pairwise(listed))
