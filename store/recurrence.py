"""When a maintenance window is open: pure functions, no I/O (docs/maintenance.md,
"Recurring windows and daylight saving").

A window is one-off (``starts_at`` and ``ends_at``, epoch seconds) or recurring
(``recurrence``: ``{"rrule", "time_zone", "start", "duration_seconds"}``). A recurring
window's occurrences are the RFC 5545 RRULE expanded by python-dateutil
(``rrulestr(rule, dtstart=start)``) on the wall clock of its IANA time zone (zoneinfo),
never by adding fixed offsets: a weekly 02:30 window starts at 02:30 local time in
summer and in winter. Each occurrence lasts ``duration_seconds`` of elapsed time (a
02:00 window of 7,200 s on a fall-back night ends at 03:00, one wall-clock hour later).

**Daylight-saving changes** follow RFC 5545, section 3.3.5 (DATE-TIME, "FORM #3"), which
is also what zoneinfo does with ``fold=0`` (PEP 495):

- a local time that does not exist (02:30 on a spring-forward night in Europe/Berlin or
  America/New_York) is read with the UTC offset from before the gap: the occurrence
  starts 03:30 local time, the same instant;
- a local time that happens twice (02:30 on a fall-back night in Berlin, 01:30 in New
  York) is its first occurrence (daylight time, ``fold=0``): one occurrence, not two.

A start time on the wall clock that two rule instances map to the same instant (an
hourly rule's 02:00 and 03:00 across a gap) is one occurrence.

The start is the rule's DTSTART; as in python-dateutil, it is an occurrence only if it
matches the rule (RFC 5545, section 3.8.5.3, leaves a start outside the rule undefined).
Rules more frequent than hourly are refused (a window opening every minute is no
maintenance window, and would need too many rows: :mod:`store.windows` materializes each
occurrence).

**Status at an instant** (:func:`status_at`): ``in_progress`` while an occurrence is
open, else ``canceled`` once canceled, else ``scheduled`` while an occurrence lies ahead,
else ``completed``. ``POST .../end`` at ``ended_at`` cuts every occurrence open at that
instant to end there; ``POST .../cancel`` at ``canceled_at`` drops every occurrence that
starts after that instant (one open at that instant runs on: ``end`` stops it).
``next_window`` is the occurrence open at the instant, or else the next one, or None.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from dateutil.rrule import rrule as RRule
from dateutil.rrule import rrulestr

__all__ = [
    "MAX_DURATION_SECONDS",
    "MAX_OCCURRENCES",
    "InvalidWindow",
    "Occurrence",
    "Recurrence",
    "Schedule",
    "next_window",
    "occurrences",
    "parse_recurrence",
    "schedule_of",
    "status_at",
]

MAX_DURATION_SECONDS = 31 * 86_400
"""The longest occurrence (31 days, seconds); a longer one is refused."""
MAX_OCCURRENCES = 2_000
"""At most this many occurrences from one call of :func:`occurrences` (an hourly rule
makes 840 in 35 days)."""
_FIRST_WITHIN = timedelta(days=10 * 366)
"""A rule must have an occurrence within ten years of its start (a leap day's rule
waits at most eight)."""
_MARGIN_SECONDS = 86_400
_MARGIN = timedelta(seconds=_MARGIN_SECONDS)
"""Expansion starts a day before an interval on the wall clock, and puts a day of
occurrences in order, so that no daylight-saving shift (at most a few hours) hides or
misorders one."""


class InvalidWindow(ValueError):
    """A window's schedule is refused; ``field`` names the offending field as the API
    reports it in ``param`` (``starts_at``, ``ends_at``, ``recurrence.rrule``,
    ``recurrence.time_zone``, ``recurrence.start``, ``recurrence.duration_seconds``)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True, slots=True)
class Occurrence:
    """One period of a window: ``[starts_at, ends_at)``, epoch seconds."""

    starts_at: int
    ends_at: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Recurrence:
    """A checked recurrence: ``rrule`` as given (an RFC 5545 RRULE value, optionally
    prefixed ``RRULE:``), ``time_zone`` an IANA name, ``start`` the naive local date-time
    of the first instance (DTSTART), ``duration_seconds`` each occurrence's length."""

    rrule: str
    time_zone: str
    start: datetime
    duration_seconds: int

    def as_json(self) -> dict[str, Any]:
        """The stored and shown form: ``{"rrule", "time_zone", "start" (ISO 8601 local
        date-time, no offset), "duration_seconds"}``."""
        return {
            "rrule": self.rrule,
            "time_zone": self.time_zone,
            "start": self.start.isoformat(),
            "duration_seconds": self.duration_seconds,
        }

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> Recurrence:
        """A stored recurrence (:meth:`as_json`, checked by :func:`parse_recurrence`
        when it was written), read back without checking it again."""
        return cls(
            rrule=value["rrule"],
            time_zone=value["time_zone"],
            start=datetime.fromisoformat(value["start"]),
            duration_seconds=int(value["duration_seconds"]),
        )

    def rule(self, near: datetime | None = None) -> RRule:
        """The rule expanded in ``time_zone`` (python-dateutil), from ``start`` or, when
        ``near`` (a naive local date-time) is given, from a later start that yields the
        same occurrences from ``near`` on (:func:`_start_near`)."""
        start = self.start if near is None else _start_near(self.rrule, self.start, near)
        parsed = rrulestr(self.rrule, dtstart=start.replace(tzinfo=ZoneInfo(self.time_zone)))
        assert isinstance(parsed, RRule)  # one RRULE line, checked by parse_recurrence
        return parsed


_DAY_PARTS = ("BYMONTH", "BYMONTHDAY", "BYYEARDAY", "BYWEEKNO", "BYDAY")
_WEEKDAYS = ("MO", "TU", "WE", "TH", "FR", "SA", "SU")


def _some_day(parts: Mapping[str, str], start: datetime) -> bool:
    """Whether some day ever satisfies the rule's day-level parts (``parts`` as
    :func:`_parts` gives them; ``start`` the naive local start).

    python-dateutil walks a rule that never matches (February 30, a 6th Monday) to the
    year 9999 whatever its UNTIL: 5 to 11 s of CPU for a DAILY or an HOURLY rule. So the
    days are asked first of a MONTHLY (or the rule's own YEARLY) rule with only those
    parts, which walks 96,000 months at most (under a second); it may only say yes more
    often than the rule itself (its INTERVAL, time parts and BYSETPOS dropped), never
    less. A DAILY or HOURLY rule with no BYDAY or BYMONTHDAY matches every weekday; a
    WEEKLY one without BYDAY, the start's."""
    freq = parts.get("FREQ", "")
    kept = {k: parts[k] for k in _DAY_PARTS if k in parts}
    if freq in ("DAILY", "HOURLY") and not {"BYDAY", "BYMONTHDAY"} & set(kept):
        kept["BYDAY"] = ",".join(_WEEKDAYS)
    if freq == "WEEKLY" and "BYDAY" not in kept:
        kept["BYDAY"] = _WEEKDAYS[start.weekday()]
    probe = ";".join(
        [f"FREQ={freq if freq in ('YEARLY', 'MONTHLY') else 'MONTHLY'}"]
        + [f"{k}={v}" for k, v in kept.items()]
    )
    day = start.replace(hour=0, minute=0, second=0, microsecond=0)
    try:
        return rrulestr(probe, dtstart=day).after(day, inc=True) is not None
    except ValueError:  # a day part the probe's FREQ refuses: the rule itself decides
        return True


def _parts(text: str) -> dict[str, str]:
    """An RRULE's parts, ``{"FREQ": "WEEKLY", ...}`` (upper case)."""
    body = text.strip().upper().removeprefix("RRULE:")
    return dict(p.partition("=")[::2] for p in body.split(";"))


_PERIOD = {"HOURLY": timedelta(hours=1), "DAILY": timedelta(days=1), "WEEKLY": timedelta(weeks=1)}


def _start_near(text: str, start: datetime, near: datetime) -> datetime:
    """A DTSTART at or before ``near`` (naive local date-times) from which the rule
    yields the occurrences the rule from ``start`` yields from ``near`` on, so that
    python-dateutil, which walks every instance from DTSTART, need not walk years of
    them: ``start`` moved by a whole number of the rule's periods (INTERVAL hours, days
    or weeks on the wall clock). Such a move keeps the weekday and the time of day the
    rule takes from DTSTART and the phase of its INTERVAL. Not for a rule with COUNT
    (counted from DTSTART) nor MONTHLY or YEARLY (months differ in length; those walk
    few instances anyway): ``start`` as it is."""
    parts = _parts(text)
    period = _PERIOD.get(parts.get("FREQ", ""))
    if period is None or "COUNT" in parts or near <= start:
        return start
    step = period * int(parts.get("INTERVAL", "1") or "1")
    return start + step * ((near - start) // step)


@dataclass(frozen=True, slots=True, kw_only=True)
class Schedule:
    """A window's schedule: one-off (``starts_at`` and ``ends_at``, epoch seconds) or
    ``recurrence``, and what ``end`` and ``cancel`` did to it (``ended_at``,
    ``canceled_at``: epoch seconds, or None)."""

    starts_at: int | None = None
    ends_at: int | None = None
    recurrence: Recurrence | None = None
    ended_at: int | None = None
    canceled_at: int | None = None


def _zone(name: object) -> ZoneInfo:
    if not isinstance(name, str) or not name:
        raise InvalidWindow("recurrence.time_zone", "must be an IANA time zone name")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):  # "Europe" is a directory
        raise InvalidWindow(
            "recurrence.time_zone", f"{name!r} is no IANA time zone (e.g. Europe/Berlin)"
        ) from None


def _duration(value: object, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidWindow(field, "must be an integer number of seconds")
    if value <= 0:
        raise InvalidWindow(field, "must be more than 0 seconds")
    if value > MAX_DURATION_SECONDS:
        raise InvalidWindow(field, f"must be at most {MAX_DURATION_SECONDS:,} seconds (31 days)")
    return value


def parse_recurrence(value: Mapping[str, Any]) -> Recurrence:
    """Check a ``recurrence`` object and return it parsed.

    Raises:
        InvalidWindow: its ``field`` names the first offending field: a missing or extra
            key (``recurrence``), an RRULE python-dateutil does not parse, that carries
            DTSTART or more than one line, is more frequent than hourly (FREQ=MINUTELY or
            SECONDLY, or several BYMINUTE or BYSECOND values), or has an UNTIL
            without ``Z`` (RFC 5545 wants UTC there when DTSTART has a time zone)
            (``recurrence.rrule``); an unknown zone (``recurrence.time_zone``); a start
            that is no local ISO 8601 date-time (``recurrence.start``); a duration not in
            1 to :data:`MAX_DURATION_SECONDS` (``recurrence.duration_seconds``); a rule
            that never matches within ten years of its start (``recurrence.rrule``).
    """
    keys = {"rrule", "time_zone", "start", "duration_seconds"}
    if set(value) != keys:
        missing, extra = sorted(keys - set(value)), sorted(set(value) - keys)
        raise InvalidWindow(
            "recurrence",
            f"needs exactly rrule, time_zone, start, duration_seconds "
            f"(missing {missing}, unknown {extra})",
        )
    zone = _zone(value["time_zone"])
    start_text = value["start"]
    try:
        start = datetime.fromisoformat(start_text) if isinstance(start_text, str) else None
    except ValueError:
        start = None
    if start is None or start.tzinfo is not None:
        raise InvalidWindow(
            "recurrence.start",
            "must be a local ISO 8601 date-time without an offset, e.g. 2026-03-29T02:30:00",
        )
    duration = _duration(value["duration_seconds"], "recurrence.duration_seconds")
    text = value["rrule"]
    if not isinstance(text, str) or not text.strip():
        raise InvalidWindow("recurrence.rrule", "must be an RFC 5545 RRULE, e.g. FREQ=WEEKLY")
    body = text.strip().removeprefix("RRULE:")
    if "\n" in body or ":" in body or "DTSTART" in body.upper():
        raise InvalidWindow(
            "recurrence.rrule", "must be one RRULE value (the start goes in recurrence.start)"
        )
    recurrence = Recurrence(
        rrule=text.strip(), time_zone=zone.key, start=start, duration_seconds=duration
    )
    try:
        rule = recurrence.rule()
    except (ValueError, TypeError, AssertionError) as exc:
        raise InvalidWindow("recurrence.rrule", f"is no RFC 5545 RRULE ({exc})") from None
    parts = _parts(body)
    if parts.get("FREQ") in ("MINUTELY", "SECONDLY") or any(
        "," in parts.get(key, "") for key in ("BYMINUTE", "BYSECOND")
    ):
        raise InvalidWindow("recurrence.rrule", "may repeat at most hourly")
    dtstart = start.replace(tzinfo=zone)
    bounded = rule.replace(count=None, until=(dtstart + _FIRST_WITHIN).astimezone(UTC))
    if not _some_day(parts, start) or bounded.after(dtstart, inc=True) is None:
        raise InvalidWindow("recurrence.rrule", "has no occurrence in the ten years from start")
    return recurrence


def schedule_of(
    *, starts_at: object, ends_at: object, recurrence: Mapping[str, Any] | None
) -> Schedule:
    """Check a window's schedule as the API receives it: either ``starts_at`` and
    ``ends_at`` (integer epoch seconds, ``ends_at`` after ``starts_at``) or
    ``recurrence`` (:func:`parse_recurrence`), never both.

    Raises:
        InvalidWindow: naming ``starts_at`` (missing, not an integer, or given with a
            recurrence), ``ends_at`` (missing, not an integer, not after ``starts_at``,
            or more than :data:`MAX_DURATION_SECONDS` after it), or a recurrence field.
    """
    if recurrence is not None:
        if starts_at is not None or ends_at is not None:
            field = "starts_at" if starts_at is not None else "ends_at"
            raise InvalidWindow(field, "a window has starts_at and ends_at, or a recurrence")
        return Schedule(recurrence=parse_recurrence(recurrence))
    for field, value in (("starts_at", starts_at), ("ends_at", ends_at)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidWindow(field, "must be epoch seconds (or give a recurrence)")
    assert isinstance(starts_at, int) and isinstance(ends_at, int)
    if ends_at <= starts_at:
        raise InvalidWindow("ends_at", "must be after starts_at")
    _duration(ends_at - starts_at, "ends_at")
    return Schedule(starts_at=starts_at, ends_at=ends_at)


def _wall_order(schedule: Schedule, lo: int) -> Iterator[Occurrence]:
    """The planned starts (before ``end`` and ``cancel``) in the rule's order, which is
    the wall clock's: around a spring-forward gap that can list an instant after a later
    one (02:30 read before the gap is 03:30, after 03:00), never by more than a day."""
    if schedule.recurrence is None:
        assert schedule.starts_at is not None and schedule.ends_at is not None
        yield Occurrence(schedule.starts_at, schedule.ends_at)
        return
    recurrence = schedule.recurrence
    zone = ZoneInfo(recurrence.time_zone)
    duration = recurrence.duration_seconds
    # on the wall clock, a day before the first start that can still be open at lo
    after = (datetime.fromtimestamp(lo - duration, zone) - _MARGIN).replace(fold=0)
    rule = recurrence.rule(near=after.replace(tzinfo=None) - _MARGIN)
    for local in rule.xafter(after, inc=True):
        starts_at = int(local.replace(fold=0).timestamp())
        yield Occurrence(starts_at, starts_at + duration)


def _planned(schedule: Schedule, lo: int) -> Iterator[Occurrence]:
    """The planned occurrences (before ``end`` and ``cancel``) that end after ``lo``, in
    order of start, each instant once: :func:`_wall_order` put in order through a heap
    that holds a day of them."""
    pending: list[tuple[int, int]] = []
    last: int | None = None
    for occurrence in _wall_order(schedule, lo):
        if occurrence.ends_at <= lo:
            continue
        heapq.heappush(pending, (occurrence.starts_at, occurrence.ends_at))
        while pending and pending[0][0] < occurrence.starts_at - _MARGIN_SECONDS:
            starts_at, ends_at = heapq.heappop(pending)
            if starts_at != last:
                last = starts_at
                yield Occurrence(starts_at, ends_at)
    while pending:
        starts_at, ends_at = heapq.heappop(pending)
        if starts_at != last:
            last = starts_at
            yield Occurrence(starts_at, ends_at)


def _effective(schedule: Schedule, lo: int) -> Iterator[Occurrence]:
    """The occurrences that end after ``lo`` as ``end`` and ``cancel`` left them, in
    order of start; empty ones (ended before they began) are left out."""
    ended, canceled = schedule.ended_at, schedule.canceled_at
    for occurrence in _planned(schedule, lo):
        if canceled is not None and occurrence.starts_at > canceled:
            return
        if ended is not None and occurrence.starts_at <= ended < occurrence.ends_at:
            if ended == occurrence.starts_at or ended <= lo:
                continue
            occurrence = Occurrence(occurrence.starts_at, ended)
        yield occurrence


def occurrences(schedule: Schedule, lo: int, hi: int) -> list[Occurrence]:
    """The occurrences open at some instant of ``[lo, hi)`` (epoch seconds: those that
    start before ``hi`` and end after ``lo``) as ``end`` and ``cancel`` left them, in
    order of start, at most :data:`MAX_OCCURRENCES`.

    Raises:
        ValueError: ``hi`` is before ``lo``.
    """
    if hi < lo:
        raise ValueError(f"hi ({hi}) is before lo ({lo})")
    found: list[Occurrence] = []
    for occurrence in _effective(schedule, lo):
        if occurrence.starts_at >= hi or len(found) >= MAX_OCCURRENCES:
            break
        found.append(occurrence)
    return found


def next_window(schedule: Schedule, at: int) -> Occurrence | None:
    """The occurrence open at ``at`` (epoch seconds), or else the first one after it, or
    None when none is left."""
    for occurrence in _effective(schedule, at):
        return occurrence
    return None


def status_at(schedule: Schedule, at: int) -> str:
    """The window's ``status`` at ``at`` (epoch seconds): ``in_progress``, ``canceled``,
    ``scheduled`` or ``completed`` (module docstring)."""
    upcoming = next_window(schedule, at)
    if upcoming is not None and upcoming.starts_at <= at:
        return "in_progress"
    if schedule.canceled_at is not None and schedule.canceled_at <= at:
        return "canceled"
    return "completed" if upcoming is None else "scheduled"
