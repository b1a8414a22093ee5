"""What a public status page shows, as plain data (docs/status-pages.md, What is shown, and
what never is): pure functions from a ``store.status_pages.PublicPage`` to the summary that
``summary.json`` serves and the HTML template renders. No I/O, no clock: tested without
either.

**Public, and nothing else.** A component shows its display name and group, never its
monitor's name, url, id, type or metadata. An incident shows its title, status,
severity, times and its timeline's statuses, times and messages, never its id, its
metadata, its postmortem or its description, and the timeline's first entry (written on
create, carrying the description, which for an incident a monitor opened names the
failing check and its error message) is shown without its message.

**Incidents a monitor or a heartbeat opened** (their ``monitor`` is the opener, which
only the engine sets) never show a text written from the opener's private name. Their
title is built from the opener, never read (:func:`public_title`): ``"<display name> is
down"``, the display name of the opener's component on this page, else ``"A monitored
service"``; a heartbeat is no component, so ``"A background job"``. A person's later
edit of such a title stays internal too (it was written from private names; what a
person means for the public is posted as an update). The timeline entries the engine
wrote on the opener's moves (``generated``; the store never reads their messages) show
``"<display name> is up again after <duration>"`` for a recovery
(:func:`public_message`), nothing for the opening one.

**Bounds** (docs/status-pages.md, Bounds): each incident shows its latest timeline entries
within the budgets of ``store.status_pages`` (10 per incident, 256 KiB of messages per page)
and how many it left out (``updates_omitted``).

**Component states** (``data-state`` in the HTML), from the monitor's status and its
maintenance:

=====================  =========================================================
``under_maintenance``  an open occurrence of a maintenance window (any effects)
                       covers the monitor: it wins over every row below (a planned
                       outage is not an outage)
``major_outage``       the monitor is ``down``
``degraded``           ``up`` or ``pending``, and named by an open incident
``operational``        ``up``
``unknown``            ``pending`` (no check has decided yet): "No data yet"
``paused``             ``paused``: "Not monitored"
=====================  =========================================================

**Overall state**, the worst of what the components and the open incidents say:
``major_outage`` when every monitored component (neither paused, unknown nor under
maintenance; at least one) is in ``major_outage``, or an open ``critical`` incident
affects the page; ``partial_outage`` when some component is in ``major_outage``, or an
open ``major`` incident affects the page; ``degraded`` when a component is ``degraded``
or any other open incident (``minor``, ``maintenance``) affects the page; else
``under_maintenance`` when some component is under maintenance (Statuspage's
``maintenance`` indicator: work in progress, nothing broken); else ``operational``.

**Scheduled maintenance**: the occurrences ``store.page_maintenance`` lists (in progress
or starting within 7 days), each with its window's title and description, its times, a
``status`` (``in_progress`` or ``scheduled``, from its times) and the display names of the
page's components it covers; never the window's id, metadata, effects or other monitors.

**Daily bars.** Each of the 90 UTC days has ``uptime_percent`` = up / (up + down) * 100
(null: neither, "no data"), shown rounded *down* to two decimals (a day with one down
second never reads 100.00 %), and a level: ``none`` (no data), ``full`` (no down
second), ``partial`` (99 % or more), ``low`` (under 99 %).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

from store import IncidentRecord, has_prefix, page_maintenance, status_pages

__all__ = [
    "COMPONENT_LABELS",
    "LEVEL_LABELS",
    "OVERALL_LABELS",
    "component_state",
    "day_level",
    "format_percent",
    "overall_state",
    "public_maintenance",
    "public_message",
    "public_title",
    "summary",
]

OVERALL_LABELS = {
    "operational": "All systems operational",
    "under_maintenance": "Under maintenance",
    "degraded": "Degraded performance",
    "partial_outage": "Partial outage",
    "major_outage": "Major outage",
}
COMPONENT_LABELS = {
    "operational": "Operational",
    "under_maintenance": "Under maintenance",
    "degraded": "Degraded",
    "major_outage": "Major outage",
    "unknown": "No data yet",
    "paused": "Not monitored",
}
LEVEL_LABELS = {
    "none": "no data",
    "full": "no downtime",
    "partial": "some downtime",
    "low": "significant downtime",
}
_RANK = {"operational": 0, "degraded": 1, "partial_outage": 2, "major_outage": 3}
_SEVERITY_STATE = {
    "critical": "major_outage",
    "major": "partial_outage",
    "minor": "degraded",
    "maintenance": "degraded",
}
_OTHER_SERVICE = "A monitored service"
_BACKGROUND_JOB = "A background job"


def component_state(
    monitor_status: str, in_open_incident: bool, in_maintenance: bool = False
) -> str:
    """A component's state from its monitor's status, whether an open incident names it
    and whether an open maintenance occurrence covers it (module docstring's table)."""
    if in_maintenance:
        return "under_maintenance"
    if monitor_status == "down":
        return "major_outage"
    if monitor_status == "paused":
        return "paused"
    if in_open_incident:
        return "degraded"
    return "operational" if monitor_status == "up" else "unknown"


def overall_state(component_states: Sequence[str], open_severities: Sequence[str]) -> str:
    """The page's state from its components' states and the severities of the open
    incidents affecting it (module docstring)."""
    monitored = [s for s in component_states if s not in ("paused", "unknown", "under_maintenance")]
    found = "operational"
    if monitored and all(s == "major_outage" for s in monitored):
        found = "major_outage"
    elif "major_outage" in monitored:
        found = "partial_outage"
    elif "degraded" in monitored:
        found = "degraded"
    for severity in open_severities:
        candidate = _SEVERITY_STATE.get(severity, "degraded")
        if _RANK[candidate] > _RANK[found]:
            found = candidate
    if found == "operational" and "under_maintenance" in component_states:
        return "under_maintenance"
    return found


def day_level(up_seconds: int, down_seconds: int) -> tuple[str, float | None]:
    """A day's ``(level, uptime_percent)`` (module docstring; percent None: no data)."""
    known = up_seconds + down_seconds
    if known == 0:
        return "none", None
    percent = up_seconds * 100.0 / known
    if down_seconds == 0:
        return "full", percent
    return ("partial" if percent >= 99.0 else "low"), percent


def format_percent(percent: float | None) -> str:
    """``"99.95%"``, rounded down to two decimals; ``"no data"`` for None."""
    if percent is None:
        return "no data"
    return f"{math.floor(percent * 100 + 1e-9) / 100:.2f}%"


def _subject(incident: IncidentRecord, names: dict[str, str]) -> str:
    """What an incident its ``monitor`` opened is about, in public words (module
    docstring): the opener's display name from ``names`` (monitor id to display name on
    this page), else a phrase for its kind."""
    opener = incident.monitor_id or ""
    if has_prefix(opener, "hbt"):
        return _BACKGROUND_JOB
    return names.get(opener, _OTHER_SERVICE)


def public_title(incident: IncidentRecord, names: dict[str, str]) -> str:
    """The title a public page shows: a person's title as written, or for an incident a
    monitor or a heartbeat opened ``"<subject> is down"`` built from the opener, never
    from the stored title (module docstring). ``names``: monitor id to display name."""
    if incident.monitor_id is None:
        return incident.title
    return f"{_subject(incident, names)} is down"


def public_message(
    update: status_pages.PublicUpdate, incident: IncidentRecord, names: dict[str, str]
) -> str | None:
    """The message a public page shows for ``update`` of ``incident``: a person's as
    written; for the engine's recovery entry ``"<subject> is up again after
    <duration>"``; None for any other (module docstring)."""
    if not update.generated:
        return update.message
    if update.recovered_after is None:
        return None
    return f"{_subject(incident, names)} is up again after {update.recovered_after}"


def _iso_date(epoch: int) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(epoch))


def summary(data: status_pages.PublicPage) -> dict[str, Any]:
    """The public summary of a page (the body of ``summary.json`` and what the HTML
    renders)::

        {"object": "status_page_summary", "generated_at": epoch s,
         "page": {"name", "slug", "description"},
         "state": overall state, "state_label": words,
         "components": [{"name", "group", "state", "state_label",
                         "uptime_percent": 90-day figure or null,
                         "days": [{"date": "YYYY-MM-DD", "uptime_percent",
                                   "level"}] x 90, oldest first}],
         "incidents": {"open": [...], "resolved": [...]},
         "scheduled_maintenances": [{"title", "description", "status": "in_progress" |
                                     "scheduled", "starts_at", "ends_at": epoch s,
                                     "components": [display names]}]}

    An incident is ``{"title", "status", "severity", "created", "updated",
    "resolved_at", "components": [display names], "updates": [{"status", "message",
    "created"}] the latest ones, oldest first, "updates_omitted": how many earlier ones
    are left out}``. Components whose monitor no longer exists are left out. The
    maintenances are those of ``data.maintenance`` in its order (in progress first, then
    by start); their components in the page's order.
    """
    page = data.page
    components = [c for c in page.components if c["monitor"] in data.monitors]
    open_incidents = [i for i in data.incidents if i.resolved_at is None]
    in_open = {m for i in open_incidents for m in i.monitors}
    in_maintenance = data.maintenance.under_maintenance
    dates = [_iso_date(start) for start in data.day_starts]  # once for every component
    cells: dict[tuple[int, int], tuple[float | None, str]] = {}  # (up, down): once a page
    shown: list[dict[str, Any]] = []
    for c in components:
        monitor = data.monitors[c["monitor"]]
        state = component_state(
            monitor.status, c["monitor"] in in_open, c["monitor"] in in_maintenance
        )
        pairs = data.days[c["monitor"]]
        days = []
        for date, pair in zip(dates, pairs, strict=True):
            cell = cells.get(pair)
            if cell is None:
                level, percent = day_level(*pair)
                cell = cells[pair] = (_round(percent), level)
            days.append({"date": date, "uptime_percent": cell[0], "level": cell[1]})
        up_total = sum(up for up, _ in pairs)
        down_total = sum(down for _, down in pairs)
        shown.append(
            {
                "name": c["name"],
                "group": c.get("group"),
                "state": state,
                "state_label": COMPONENT_LABELS[state],
                "uptime_percent": _round(day_level(up_total, down_total)[1]),
                "days": days,
            }
        )
    state = overall_state([c["state"] for c in shown], [i.severity for i in open_incidents])
    names: dict[str, str] = {}
    for c in components:
        names.setdefault(c["monitor"], c["name"])
    return {
        "object": "status_page_summary",
        "generated_at": data.now,
        "page": {"name": page.name, "slug": page.slug, "description": page.description},
        "state": state,
        "state_label": OVERALL_LABELS[state],
        "components": shown,
        "incidents": {
            "open": [_incident(i, data, names) for i in open_incidents],
            "resolved": [_incident(i, data, names) for i in data.incidents if i.resolved_at],
        },
        "scheduled_maintenances": [
            public_maintenance(m, components, data.now) for m in data.maintenance.listed
        ],
    }


def public_maintenance(
    m: page_maintenance.PublicMaintenance, components: list[dict[str, Any]], now: int
) -> dict[str, Any]:
    """One occurrence as the public sees it (see :func:`summary`): nothing of the window
    but its title, description and times; its components by display name, in the page's
    order (``components``: the page's, as in its ``components`` field). ``status`` is
    ``completed`` for one ended at ``now`` (epoch seconds; only the feeds list those)."""
    covered = set(m.monitors)
    status = "scheduled" if now < m.starts_at else "in_progress" if now < m.ends_at else "completed"
    return {
        "title": m.title,
        "description": m.description,
        "status": status,
        "starts_at": m.starts_at,
        "ends_at": m.ends_at,
        "components": list(dict.fromkeys(c["name"] for c in components if c["monitor"] in covered)),
    }


def _round(percent: float | None) -> float | None:
    """A percentage for JSON: rounded down to three decimals (never 100 with downtime)."""
    return None if percent is None else math.floor(percent * 1000 + 1e-9) / 1000


def _incident(
    i: IncidentRecord, data: status_pages.PublicPage, names: dict[str, str]
) -> dict[str, Any]:
    """One incident as the public sees it (see :func:`summary`)."""
    timeline = data.updates.get(i.id, [])
    return {
        "title": public_title(i, names),
        "status": i.status,
        "severity": i.severity,
        "created": i.created,
        "updated": i.updated,
        "resolved_at": i.resolved_at,
        "components": list(dict.fromkeys(names[m] for m in i.monitors if m in names)),
        "updates": [
            {"status": u.status, "message": public_message(u, i, names), "created": u.created}
            for u in timeline
        ],
        "updates_omitted": data.timeline_lengths.get(i.id, 0) - len(timeline),
    }
