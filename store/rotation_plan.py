"""A schedule's rules and their parsing: pure, no I/O (docs/on-call.md, "How a schedule
decides"; the API's JSON shapes are part 9 of the extensions spec). :mod:`store.rotation`
computes who is on call from them and re-exports these names.

A layer's ``restrictions`` are also kept as their union over one week (:attr:`Layer.weekly`),
so that overlapping or touching ones count once and the interval around an instant is looked
up in one week's sorted list.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

__all__ = [
    "FIRST_YEAR",
    "LAST_YEAR",
    "LENGTH_SECONDS",
    "MAX_LAYERS",
    "MAX_MEMBERS",
    "MAX_RESTRICTIONS",
    "InvalidSchedule",
    "Layer",
    "Plan",
    "Restriction",
    "Rotation",
    "parse_plan",
    "plan_json",
    "union",
]

MAX_LAYERS, MAX_MEMBERS, MAX_RESTRICTIONS = 5, 50, 20
"""A schedule's most layers, a layer's most members and restrictions."""
LENGTH_SECONDS = (3_600, 2_592_000)
"""The shortest and longest custom rotation (one hour, 30 days)."""
FIRST_YEAR, LAST_YEAR = 1970, 8999
"""Handoffs lie in these years (datetime ends with the year 9999)."""
_DAY, _WEEK = 86_400, 7 * 86_400
_DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_STEPS = {"daily": timedelta(days=1), "weekly": timedelta(days=7)}
_CLOCK = re.compile(r"([01]\d|2[0-3]):([0-5]\d)")


def union(spans: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Intervals ``(start, end)`` sorted by start, as their union: sorted, disjoint, with
    touching ones joined."""
    merged: list[tuple[int, int]] = []
    for a, b in spans:
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    return merged


class InvalidSchedule(ValueError):
    """A schedule's rules are refused; ``field`` is the offending field's path as the API
    reports it in ``param`` (``time_zone``, ``layers``, ``layers[1].rotation.handoff``,
    ``layers[0].restrictions[2].end``), ``message`` says why."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True, slots=True)
class Rotation:
    """``type`` ``daily``, ``weekly`` or ``custom``; ``length_seconds`` the custom length
    (wall-clock seconds), None otherwise; ``handoff`` a naive local date-time (handoff 0)."""

    type: str
    length_seconds: int | None
    handoff: datetime

    @property
    def step(self) -> timedelta:
        """L, the wall-clock time from one handoff to the next."""
        return _STEPS.get(self.type) or timedelta(seconds=self.length_seconds or 0)


@dataclass(frozen=True, slots=True)
class Restriction:
    """Local intervals: on each of ``days`` (0 = Monday), ``start`` to ``end`` wall time;
    ``end`` ``time(0, 0)`` is midnight at the end of that day (the API's ``24:00``)."""

    days: frozenset[int]
    start: time
    end: time


def _seconds(value: time) -> int:
    return value.hour * 3_600 + value.minute * 60 + value.second


def _weekly(restrictions: tuple[Restriction, ...]) -> tuple[tuple[int, int], ...] | None:
    """The union of the restrictions over a week, as sorted disjoint ``(a, b)`` seconds from
    Monday 00:00 local (an interval across Sunday midnight ends after 604,800); None when
    there are none or they cover the whole week (the layer always has its member)."""
    if not restrictions:
        return None
    merged = union(
        sorted(
            (day * _DAY + _seconds(r.start), day * _DAY + (_seconds(r.end) or _DAY))
            for r in restrictions
            for day in r.days
        )
    )
    if len(merged) > 1 and merged[-1][1] == _WEEK and merged[0][0] == 0:
        merged[-1] = (merged[-1][0], _WEEK + merged.pop(0)[1])
    return None if merged == [(0, _WEEK)] else tuple(merged)


@dataclass(frozen=True, slots=True)
class Layer:
    """``members`` in rotation order (a member may appear more than once), ``rotation``,
    ``restrictions`` (none: always). ``weekly`` is derived from the restrictions."""

    name: str
    members: tuple[str, ...]
    rotation: Rotation
    restrictions: tuple[Restriction, ...]
    weekly: tuple[tuple[int, int], ...] | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "weekly", _weekly(self.restrictions))


@dataclass(frozen=True, slots=True)
class Plan:
    """A schedule's rules: ``time_zone`` an IANA name, ``layers`` (a later one wins)."""

    time_zone: str
    layers: tuple[Layer, ...]


def _zone(name: object) -> ZoneInfo:
    try:
        if isinstance(name, str) and name:
            return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):  # OSError: a directory, e.g. Europe
        pass
    raise InvalidSchedule("time_zone", f"{name!r} is no IANA time zone (e.g. Europe/Berlin)")


def _keys(value: object, path: str, required: set[str], optional: set[str]) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InvalidSchedule(path, "must be an object")
    for key in value:
        if key not in required | optional:
            raise InvalidSchedule(f"{path}.{key}", "is no field of this object")
    for key in sorted(required - set(value)):
        raise InvalidSchedule(f"{path}.{key}", "is required")
    return value


def _items(value: object, path: str, low: int, high: int, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise InvalidSchedule(path, f"must be a list of {what}")
    if not low <= len(value) <= high:
        raise InvalidSchedule(path, f"must hold {low} to {high} {what}")
    return value


def _handoff(value: object, path: str) -> datetime:
    parsed = None
    if isinstance(value, str) and len(value) > 10:  # a date alone is no date-time
        with suppress(ValueError):
            parsed = datetime.fromisoformat(value)
    if parsed is None or parsed.tzinfo is not None or parsed.microsecond:
        raise InvalidSchedule(
            path, "must be a local ISO 8601 date-time without an offset, e.g. 2026-12-01T09:00"
        )
    if not FIRST_YEAR <= parsed.year <= LAST_YEAR:
        raise InvalidSchedule(path, f"must lie in the years {FIRST_YEAR} to {LAST_YEAR}")
    return parsed


def _rotation(value: object, path: str) -> Rotation:
    body = _keys(value, path, {"type", "handoff"}, {"length_seconds"})
    kind, length = body["type"], body.get("length_seconds")
    if kind not in ("daily", "weekly", "custom"):
        raise InvalidSchedule(f"{path}.type", "must be daily, weekly or custom")
    if kind != "custom" and length is not None:
        raise InvalidSchedule(f"{path}.length_seconds", "is for a custom rotation only")
    low, high = LENGTH_SECONDS
    if kind == "custom" and (
        isinstance(length, bool) or not isinstance(length, int) or not low <= length <= high
    ):
        raise InvalidSchedule(
            f"{path}.length_seconds", f"must be an integer from {low:,} to {high:,} seconds"
        )
    return Rotation(kind, length, _handoff(body["handoff"], f"{path}.handoff"))


def _clock(value: object, path: str, *, end: bool) -> time:
    if end and value == "24:00":
        return time(0, 0)
    match = _CLOCK.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        raise InvalidSchedule(path, "must be a local time HH:MM" + (" (or 24:00)" if end else ""))
    return time(int(match[1]), int(match[2]))


def _restriction(value: object, path: str) -> Restriction:
    body = _keys(value, path, {"days", "start", "end"}, set())
    days: set[int] = set()
    for i, day in enumerate(_items(body["days"], f"{path}.days", 1, 7, "days")):
        if day not in _DAYS or _DAYS.index(day) in days:
            raise InvalidSchedule(f"{path}.days[{i}]", "must be one of mon..sun, each once")
        days.add(_DAYS.index(day))
    start = _clock(body["start"], f"{path}.start", end=False)
    end = _clock(body["end"], f"{path}.end", end=True)
    if end != time(0, 0) and end <= start:
        raise InvalidSchedule(f"{path}.end", "must be after start (24:00 ends at midnight)")
    return Restriction(frozenset(days), start, end)


def _layer(value: object, path: str, index: int) -> Layer:
    body = _keys(value, path, {"members", "rotation"}, {"name", "restrictions"})
    name = body.get("name", f"Layer {index + 1}")
    if not isinstance(name, str) or not 1 <= len(name) <= 100 or "\0" in name:
        raise InvalidSchedule(f"{path}.name", "must be 1 to 100 characters, without NUL")
    members = _items(body["members"], f"{path}.members", 1, MAX_MEMBERS, "members")
    for i, member in enumerate(members):
        if not isinstance(member, str) or not member:
            raise InvalidSchedule(f"{path}.members[{i}]", "must be a member id")
    rules = body.get("restrictions")
    rules = [] if rules is None else rules
    restrictions = _items(rules, f"{path}.restrictions", 0, MAX_RESTRICTIONS, "restrictions")
    return Layer(
        name,
        tuple(members),
        _rotation(body["rotation"], f"{path}.rotation"),
        tuple(_restriction(r, f"{path}.restrictions[{i}]") for i, r in enumerate(restrictions)),
    )


def parse_plan(time_zone: object, layers: object) -> Plan:
    """Check a schedule's ``time_zone`` and ``layers`` as the API receives them (JSON
    values, docs/on-call.md) and return them parsed. A layer's ``name`` defaults to ``Layer
    N``, its ``restrictions`` to none. Member ids are only checked to be strings: whether
    they name members of the account is the caller's to check.

    Raises:
        InvalidSchedule: naming the first offending field: ``time_zone`` (no IANA zone),
            ``layers`` (not 1 to 5), ``layers[i]`` (no object) or a field in it: an unknown
            or missing key, ``members`` (not 1 to 50 strings), ``rotation.type``,
            ``rotation.length_seconds`` (custom only, 3,600 to 2,592,000),
            ``rotation.handoff`` (no local ISO date-time in 1970 to 8999),
            ``restrictions[j].days[k]``, ``.start``, ``.end`` (HH:MM, end after start).
    """
    zone = _zone(time_zone)
    items = _items(layers, "layers", 1, MAX_LAYERS, "layers")
    return Plan(zone.key, tuple(_layer(v, f"layers[{i}]", i) for i, v in enumerate(items)))


def plan_json(plan: Plan) -> list[dict[str, Any]]:
    """The layers in the API's JSON shape (what :func:`parse_plan` reads back to ``plan``):
    ``length_seconds`` null unless custom, ``handoff`` to the minute (or second), ``days``
    in week order, an end at midnight as ``24:00``."""
    return [
        {
            "name": layer.name,
            "members": list(layer.members),
            "rotation": {
                "type": layer.rotation.type,
                "length_seconds": layer.rotation.length_seconds,
                "handoff": layer.rotation.handoff.isoformat(
                    timespec="seconds" if layer.rotation.handoff.second else "minutes"
                ),
            },
            "restrictions": [
                {
                    "days": [_DAYS[d] for d in sorted(r.days)],
                    "start": r.start.strftime("%H:%M"),
                    "end": "24:00" if r.end == time(0, 0) else r.end.strftime("%H:%M"),
                }
                for r in layer.restrictions
            ],
        }
        for layer in plan.layers
    ]
