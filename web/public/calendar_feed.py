"""A schedule's calendar feed (docs/on-call.md, "The calendar feed"): ``GET
/schedules/<id>/calendar.ics?key=<calendar_key>``, the shifts of the next 90 days (from
00:00 UTC today) as an RFC 5545 calendar a calendar application subscribes to, built with
the ``icalendar`` library. A plain Quart route beside the API, like the acknowledge links
(:mod:`web.public.alert_ack`): no token, the key is the capability (a calendar application
cannot send a bearer token).

Answers:

- 200 ``text/calendar; charset=utf-8``: the schedule's name (``X-WR-CALNAME``), a
  ``PRODID``, and one ``VEVENT`` per shift of the 90 days from 00:00 UTC today (the
  range moves once a day, so two fetches on one day list the same events): ``UID``
  ``<end>-<member>-<layer N or ovr_…>@<schedule id>``, the same on every fetch while the
  shift keeps its member, end and source (the shift under way, shown from 00:00 UTC
  today, keeps its UID from day to day; a calendar application updates an event in
  place), ``SUMMARY`` "On call: <member's name>", ``DTSTART``/``DTEND`` in UTC. Nothing
  else of the account (no email, no channels, no ids but the members').
  ``Cache-Control: private, max-age=300``; ``Referrer-Policy: no-referrer`` (the URL
  holds the key).
- 404 ``text/plain``: an unknown or malformed schedule id, and a wrong or missing key,
  alike: the feed says nothing about which schedules exist. A rotated key's feed is a
  404 from the moment the rotation commits.
- 503 (``Retry-After: 5``): the database cannot be reached.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

import trio
from icalendar import Calendar, Event
from quart import Response, request
from quart_trio import QuartTrio

from store import StoreError, has_prefix, members, schedules

from ..http.deps import Dependencies

__all__ = ["HORIZON_SECONDS", "PRODID", "add_calendar_routes", "render_calendar"]

PRODID = "-//Uptrio//On-call schedule//EN"
"""The feed's product identifier (RFC 5545, 3.7.3)."""
HORIZON_SECONDS = 90 * 86_400
"""How far ahead the feed reaches (90 days, seconds)."""
CONTENT_TYPE = "text/calendar; charset=utf-8"
"""The feed's media type (RFC 5545, 8.1)."""
_KEY = re.compile(r"[0-9a-f]{32}")
"""What a key looks like (128 random bits, hex); anything else is a 404 without a query."""
_DAY = 86_400
_HEADERS = {"Referrer-Policy": "no-referrer", "X-Content-Type-Options": "nosniff"}


def _utc(epoch: int) -> datetime:
    return datetime.fromtimestamp(epoch, UTC)


def render_calendar(
    schedule: schedules.ScheduleRecord,
    shifts: list[schedules.Shift],
    names: dict[str, str],
    now: int,
) -> bytes:
    """The calendar of ``shifts`` (``names``: member id to name; an id missing there is
    shown as itself), stamped ``now`` (epoch seconds), as RFC 5545 text (UTF-8, CRLF)."""
    calendar = Calendar()
    calendar.add("prodid", PRODID)
    calendar.add("version", "2.0")
    calendar.add("calscale", "GREGORIAN")
    calendar.add("method", "PUBLISH")
    calendar.add("x-wr-calname", schedule.name)
    for shift in shifts:
        source = f"layer{shift.layer}" if shift.override is None else shift.override
        event = Event()
        event.add("uid", f"{shift.end}-{shift.member}-{source}@{schedule.id}")
        event.add("dtstamp", _utc(now))
        event.add("dtstart", _utc(shift.start))
        event.add("dtend", _utc(shift.end))
        event.add("summary", f"On call: {names.get(shift.member, shift.member)}")
        event.add("transp", "TRANSPARENT")
        calendar.add_component(event)
    ical: bytes = calendar.to_ical()
    return ical


def _text(status: int, message: str) -> Response:
    headers = dict(_HEADERS, **({"Retry-After": "5"} if status == 503 else {}))
    return Response(message + "\n", status=status, headers=headers, content_type="text/plain")


def add_calendar_routes(app: QuartTrio, deps: Dependencies) -> None:
    """Add ``GET /schedules/<schedule_id>/calendar.ics`` to ``app`` (module docstring)."""

    async def feed(schedule_id: str, key: str) -> Response:
        record = await deps.db.run(schedules.get_by_calendar_key, schedule_id, key)
        if record is None:
            return _text(404, "no such calendar")
        now = int(deps.clock())
        start = now // _DAY * _DAY  # 00:00 UTC today: stable all day
        loaded = await deps.db.run(schedules.load_plan, record.id, start, start + HORIZON_SECONDS)
        if loaded is None:  # deleted between the two reads
            return _text(404, "no such calendar")
        plan, overrides = loaded
        found = await trio.to_thread.run_sync(  # 90 days of shifts: off the event loop
            schedules.shifts,
            plan,
            overrides,
            start,
            start + HORIZON_SECONDS,
            limiter=deps.status_render_limiter,
        )
        people = await deps.db.run(
            members.get_members, record.account_id, [s.member for s in found]
        )
        body = render_calendar(record, found, {m.id: m.name for m in people}, now)
        headers = dict(_HEADERS, **{"Cache-Control": "private, max-age=300"})
        return Response(body, status=200, headers=headers, content_type=CONTENT_TYPE)

    @app.route(
        "/schedules/<schedule_id>/calendar.ics", methods=["GET"], provide_automatic_options=False
    )
    async def schedule_calendar(schedule_id: str) -> Response:
        key = request.args.get("key", "")
        if not has_prefix(schedule_id, "sch") or _KEY.fullmatch(key) is None:
            return _text(404, "no such calendar")
        try:
            return await feed(schedule_id, key)
        except StoreError:
            return _text(503, "temporarily unavailable: retry in a few seconds")
