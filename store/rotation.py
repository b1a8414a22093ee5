"""Who is on call: pure functions over a schedule's rules, no I/O (docs/on-call.md, "How a
schedule decides"; the API's shapes are part 9 of the extensions spec).

**Rotation.** A layer's k-th handoff is at the local wall time ``handoff + k * L`` in the
schedule's IANA time zone, with L one day (``daily``), seven days (``weekly``) or
``length_seconds`` (``custom``) added on the wall clock, never as a fixed offset: a daily
09:00 handoff stays at 09:00 local time, and the shift across a daylight-saving change
lasts 23 or 25 hours. Member ``k mod n`` holds from handoff k to handoff k+1; before the
first handoff the rotation runs backwards the same way (negative k), so every instant has a
member. A wall time becomes an instant as RFC 5545, section 3.3.5 says and zoneinfo does with
``fold=0`` (PEP 495): a time inside a spring-forward gap is read with the offset from before
the gap (02:30 becomes 03:30), a repeated time is its first occurrence. Two handoffs that so
land on one instant leave the first of them an empty shift.

**Restrictions.** A layer with restrictions has its member only inside their local
intervals (any of them): ``days`` are the local weekdays on which an interval starts,
``start`` and ``end`` its wall times that day; ``end`` may be ``24:00`` (held as
``time(0, 0)``: midnight at the end of the day), so ``00:00``-``24:00`` is a whole day. The
rotation goes on underneath: a restriction only hides it.

**Layers and overrides.** At each instant the last layer that has someone wins; an override
wins over every layer. Overlapping overrides put all their members on call; of one member's
overlapping overrides, the one that starts first (then ends last, then has the smaller id)
keeps its time and the other keeps only what lies outside it, so that nobody overlaps with
themself.

**Costs.** :func:`on_call` finds a layer's period by arithmetic on the wall clock (a few
zoneinfo conversions per layer) and sorts the overrides once; :func:`shifts` walks each
layer's handoffs and restriction intervals over the range, at most 90 days.

The rules' shapes and their parsing (:func:`parse_plan`, :func:`plan_json`) live in
:mod:`store.rotation_plan`; this module re-exports them, so callers import from here.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, time, timedelta
from itertools import pairwise
from zoneinfo import ZoneInfo

from .rotation_plan import (
    LAST_YEAR,
    InvalidSchedule,
    Layer,
    Plan,
    Restriction,
    Rotation,
    parse_plan,
    plan_json,
    union,
)

__all__ = [
    "HORIZON_SECONDS",
    "MAX_RANGE_SECONDS",
    "InvalidSchedule",
    "Layer",
    "Override",
    "Plan",
    "Restriction",
    "Rotation",
    "Shift",
    "members_at",
    "on_call",
    "parse_plan",
    "plan_json",
    "shifts",
]

HORIZON_SECONDS = 90 * 86_400
""":func:`on_call` looks this far (90 days, seconds) for the next change of its answer."""
MAX_RANGE_SECONDS = 90 * 86_400
"""The longest range :func:`shifts` lists (90 days, seconds)."""
_WEEK = 7 * 86_400
_STEPS = 64
"""How many instants :func:`on_call` tries one by one before it reads shifts instead."""
_LAST_EPOCH = int((datetime(LAST_YEAR + 1, 1, 1) - datetime(1970, 1, 1)).total_seconds())


@dataclass(frozen=True, slots=True)
class Override:
    """``member`` on call over ``[start, end)``, epoch seconds."""

    id: str
    member: str
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class Shift:
    """``member`` on call over ``[start, end)`` (epoch seconds), through layer index
    ``layer`` or override id ``override`` (exactly one of them is set)."""

    member: str
    start: int
    end: int
    layer: int | None
    override: str | None


# ---- one layer ---------------------------------------------------------------------------


def _instant(zone: ZoneInfo, local: datetime) -> int:
    """A naive local wall time as epoch seconds, ``fold=0`` (module docstring)."""
    return int(local.replace(tzinfo=zone).timestamp())


def _local(zone: ZoneInfo, at: int) -> datetime:
    return datetime.fromtimestamp(at, zone).replace(tzinfo=None)


def _period(rotation: Rotation, zone: ZoneInfo, wall: datetime, at: int) -> tuple[int, int]:
    """``(k, handoff k+1 in epoch seconds)`` for the period holding ``at`` (``wall`` its
    local time). The handoff at or before ``wall`` on the wall clock is never after ``at``
    (zoneinfo's fold=0 mapping is monotonic and reads ``wall`` no later than ``at``); a
    repeated hour may put a few later ones before ``at`` too, hence the loop."""
    step, handoff = rotation.step, rotation.handoff
    k = (wall - handoff) // step
    following = _instant(zone, handoff + (k + 1) * step)
    while following <= at:
        k += 1
        following = _instant(zone, handoff + (k + 1) * step)
    return k, following


def _holder(layer: Layer, zone: ZoneInfo, wall: datetime, at: int) -> tuple[str, int | None]:
    """The rotation's member at ``at`` and when it passes to someone else (None: never)."""
    members = layer.members
    k, following = _period(layer.rotation, zone, wall, at)
    member = members[k % len(members)]
    if len(set(members)) == 1:
        return member, None
    step, handoff = layer.rotation.step, layer.rotation.handoff
    while members[(k + 1) % len(members)] == member:
        k += 1
        following = _instant(zone, handoff + (k + 1) * step)
    return member, following


def _weeks(wall: datetime, before: int, after: int) -> Iterator[datetime]:
    monday = datetime.combine(wall.date() - timedelta(days=wall.weekday()), time())
    for n in range(-before, after + 1):
        yield monday + timedelta(days=7 * n)


def _coverage(layer: Layer, zone: ZoneInfo, wall: datetime, at: int) -> tuple[bool, int | None]:
    """Whether the restrictions let the layer have someone at ``at``, and the next instant
    that may change (None: never). Intervals ending on the wall clock at or before
    ``wall`` end no later than ``at`` and are skipped without a conversion."""
    if layer.weekly is None:
        return True, None
    for monday in _weeks(wall, 1, 1):
        for a, b in layer.weekly:
            end = monday + timedelta(seconds=b)
            if end <= wall or (end_at := _instant(zone, end)) <= at:
                continue
            start_at = _instant(zone, monday + timedelta(seconds=a))
            return (True, end_at) if start_at <= at else (False, start_at)
    raise AssertionError("every week has an interval")  # pragma: no cover


def _layer_at(
    layer: Layer, zone: ZoneInfo, wall: datetime, at: int
) -> tuple[str | None, int | None]:
    """The layer's member at ``at`` (None: restricted away) and the next instant at which
    that may change (None: never)."""
    covered, edge = _coverage(layer, zone, wall, at)
    if not covered:
        return None, edge
    member, passes = _holder(layer, zone, wall, at)
    return member, _earliest(edge, passes)


def _earliest(*instants: int | None) -> int | None:
    return min((i for i in instants if i is not None), default=None)


_Piece = tuple[int, int, str, int]
"""``(start, end, member, layer)``, epoch seconds."""


def _append(pieces: list[_Piece], piece: _Piece) -> None:
    """Add ``piece``, merged into the last one when it continues it (same member, layer)."""
    if piece[0] >= piece[1]:
        return
    if pieces and pieces[-1][1] == piece[0] and pieces[-1][2:] == piece[2:]:
        pieces[-1] = (pieces[-1][0], piece[1], piece[2], piece[3])
    else:
        pieces.append(piece)


def _layer_pieces(layer: Layer, index: int, zone: ZoneInfo, lo: int, hi: int) -> list[_Piece]:
    """The layer's own timeline over ``[lo, hi)``: its rotation cut to its restrictions."""
    step, handoff, members = layer.rotation.step, layer.rotation.handoff, layer.members
    k, following = _period(layer.rotation, zone, _local(zone, lo), lo)
    periods: list[_Piece] = []
    start = lo
    while start < hi:
        _append(periods, (start, min(following, hi), members[k % len(members)], index))
        k, start = k + 1, following
        following = _instant(zone, handoff + (k + 1) * step)
    if layer.weekly is None:
        return periods
    windows: list[tuple[int, int]] = []
    for monday in _weeks(_local(zone, lo), 1, (hi - lo) // _WEEK + 2):
        for a, b in layer.weekly:
            s = max(lo, _instant(zone, monday + timedelta(seconds=a)))
            e = min(hi, _instant(zone, monday + timedelta(seconds=b)))
            if s < e:
                windows.append((s, e))
    pieces: list[_Piece] = []
    i = 0
    for s, e in windows:
        while i < len(periods) and periods[i][1] <= s:
            i += 1
        j = i
        while j < len(periods) and periods[j][0] < e:
            p = periods[j]
            _append(pieces, (max(s, p[0]), min(e, p[1]), p[2], index))
            j += 1
    return pieces


# ---- all layers and overrides ------------------------------------------------------------


def _ordered(overrides: Sequence[Override]) -> list[Override]:
    return sorted(overrides, key=lambda o: (o.start, -o.end, o.id))


def _override_pieces(ordered: Sequence[Override]) -> Iterator[tuple[int, int, Override]]:
    """Each override's ``(start, end, override)`` once one member's earlier overrides are
    taken out of it (module docstring), empty ones left out, in ``ordered``'s order."""
    held: dict[str, int] = {}
    for o in ordered:
        start = max(o.start, held.get(o.member, o.start))
        held[o.member] = max(held.get(o.member, o.end), o.end)
        if start < o.end:
            yield start, o.end, o


def _check(*instants: int) -> None:
    for at in instants:
        if not 0 <= at < _LAST_EPOCH:
            raise ValueError(f"{at} is not epoch seconds from 1970 to {LAST_YEAR}")


_OverridePiece = tuple[int, int, Override]


def _answer(
    plan: Plan, zone: ZoneInfo, pieces: list[_OverridePiece], starts: list[int], at: int
) -> tuple[tuple[str, ...], int | None]:
    """Who is on call at ``at`` and the next instant at which that may change; ``pieces``
    are :func:`_override_pieces` (those that end after ``at`` suffice), ``starts`` their
    starts in ascending order."""
    following = bisect_right(starts, at)
    change = starts[following] if following < len(starts) else None
    found: dict[str, int] = {}
    for start, end, o in pieces:
        if start <= at < end:
            found.setdefault(o.member, start)
            change = _earliest(change, end)
    if found:
        return tuple(sorted(found, key=found.__getitem__)), change
    wall = _local(zone, at)
    for layer in reversed(plan.layers):
        member, until = _layer_at(layer, zone, wall, at)
        change = _earliest(change, until)
        if member is not None:
            return (member,), change
    return (), change


def _prepared(
    plan: Plan, overrides: Sequence[Override], at: int
) -> tuple[ZoneInfo, list[_OverridePiece], list[int]]:
    """What :func:`_answer` needs at ``at``: the zone, the override pieces that end after
    ``at`` and their starts in ascending order. Raises ValueError for a bad ``at``."""
    _check(at)
    pieces = [piece for piece in _override_pieces(_ordered(overrides)) if piece[1] > at]
    return ZoneInfo(plan.time_zone), pieces, sorted(start for start, _, _ in pieces)


def members_at(plan: Plan, overrides: Sequence[Override], at: int) -> list[str]:
    """Who is on call at ``at`` (epoch seconds), as :func:`on_call` answers, without
    looking for when that changes: a few zoneinfo conversions per layer, whatever the
    restrictions (the escalation walk needs no more).

    Raises:
        ValueError: ``at`` is not epoch seconds from 1970 to 8999.
    """
    return list(_answer(plan, *_prepared(plan, overrides, at), at)[0])


def on_call(plan: Plan, overrides: Sequence[Override], at: int) -> tuple[list[str], int | None]:
    """Who is on call at ``at`` (epoch seconds): the override members, each once, in order
    of the start of their shift in :func:`shifts` (then of the overrides' order), or else the
    last layer's member that has someone, or nobody; and ``until``, the first instant after
    ``at`` whose answer differs, or None when it does not change within
    :data:`HORIZON_SECONDS` (90 days).

    ``until`` is found by stepping from one instant where the answer may change to the next
    (each a handoff, a restriction's edge or an override's); after :data:`_STEPS` steps that
    changed nothing (layers that keep handing one member to themself through many
    restrictions), by reading :func:`shifts` in growing windows instead.

    Raises:
        ValueError: ``at`` is not epoch seconds from 1970 to 8999.
    """
    zone, pieces, starts = _prepared(plan, overrides, at)
    members, change = _answer(plan, zone, pieces, starts, at)
    limit = min(at + HORIZON_SECONDS + 1, _LAST_EPOCH)
    for _ in range(_STEPS):
        if change is None or change >= limit:
            return list(members), None
        then, following = _answer(plan, zone, pieces, starts, change)
        if then != members:
            return list(members), change
        change = following
    window = 86_400
    while change is not None and change < limit:
        end = min(limit, change + window)
        found = _first_change(shifts(plan, overrides, change, end), members, change, end)
        if found is not None:
            return list(members), found
        change, window = end, min(MAX_RANGE_SECONDS, window * 4)
    return list(members), None


def _first_change(listed: list[Shift], members: tuple[str, ...], lo: int, hi: int) -> int | None:
    """The first instant of ``[lo, hi)`` at which the members on call, read from ``listed``
    (:func:`shifts` over that range), are not ``members``; None when there is none."""
    edges = {lo} | {shift.start for shift in listed} | {shift.end for shift in listed}
    active: list[Shift] = []
    i = 0
    for at in sorted(edge for edge in edges if edge < hi):
        active = [shift for shift in active if shift.end > at]
        while i < len(listed) and listed[i].start <= at:
            active.append(listed[i])
            i += 1
        if tuple(shift.member for shift in active) != members:
            return at
    return None


def _stack(layers: list[list[_Piece]]) -> list[_Piece]:
    """One timeline from the layers' own: on each stretch, the last layer with someone."""
    points = sorted({p for pieces in layers for piece in pieces for p in piece[:2]})
    at = [0] * len(layers)
    timeline: list[_Piece] = []
    for lo, hi in pairwise(points):
        for index in reversed(range(len(layers))):
            pieces, i = layers[index], at[index]
            while i < len(pieces) and pieces[i][1] <= lo:
                i += 1
            at[index] = i
            if i < len(pieces) and pieces[i][0] <= lo:
                _append(timeline, (lo, hi, pieces[i][2], index))
                break
    return timeline


def _cut(timeline: list[_Piece], busy: list[tuple[int, int]]) -> Iterator[_Piece]:
    """The timeline outside the ``busy`` intervals (sorted by start)."""
    joined = union(busy)
    i = 0
    for start, end, member, layer in timeline:
        while i < len(joined) and joined[i][1] <= start:
            i += 1
        j = i
        while j < len(joined) and joined[j][0] < end:
            if start < joined[j][0]:
                yield start, joined[j][0], member, layer
            start = max(start, joined[j][1])
            j += 1
        if start < end:
            yield start, end, member, layer


def shifts(plan: Plan, overrides: Sequence[Override], start: int, end: int) -> list[Shift]:
    """The final timeline over ``[start, end)`` (epoch seconds), ascending by start (then
    layer shifts before override shifts, overrides in their order): a layer's consecutive
    pieces of one member merged, each override its own shift (module docstring), clipped
    to the range. Only instants when nobody is on call are left uncovered; one member's
    shifts never overlap.

    Raises:
        ValueError: ``end`` before ``start``, more than :data:`MAX_RANGE_SECONDS` (90 days)
            after it, or either not epoch seconds from 1970 to 8999.
    """
    _check(start, end)
    if end < start or end - start > MAX_RANGE_SECONDS:
        raise ValueError(f"the range must be 0 to {MAX_RANGE_SECONDS:,} seconds (90 days) long")
    zone = ZoneInfo(plan.time_zone)
    busy: list[tuple[int, int]] = []
    found: list[tuple[int, int, int, int, Shift]] = []
    for position, (held, e, o) in enumerate(_override_pieces(_ordered(overrides))):
        s, e = max(held, start), min(e, end)
        if s < e:  # ties on a clipped start: by unclipped start, as on_call orders
            busy.append((s, e))
            found.append((s, 1, held, position, Shift(o.member, s, e, None, o.id)))
    layers = [_layer_pieces(layer, i, zone, start, end) for i, layer in enumerate(plan.layers)]
    for s, e, member, layer in _cut(_stack(layers), sorted(busy)):
        found.append((s, 0, s, 0, Shift(member, s, e, layer, None)))
    return [shift for *_, shift in sorted(found, key=lambda f: f[:4])]
