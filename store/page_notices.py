"""The mails status page subscribers receive about incidents and maintenance (docs/status-pages.md,
"Subscribers"): written into the page mailer's outbox (``page_mails``,
:mod:`store.page_subscribers`) in the transaction of the timeline entry they tell of.

:func:`incident_notice` is called for every entry an incident's timeline gains through
``store.incidents`` (created, status moves, posted updates, resolved). One mail goes to
every confirmed subscriber of every page of the incident's account that shows one of the
incident's monitors, and says only what that page shows (docs/status-pages.md, "What is
shown, and what never is"): the page's name, the incident's title (for one a monitor
opened, ``"<display name> is down"`` from the page's component, never the engine's title
written from the private name), status, severity, the entry's message (never the first
entry's: the description), and the display names of the components it affects.
"""

from __future__ import annotations

import time
from typing import Protocol

from .database import Connection
from .page_subscribers import GIVE_UP_SECONDS
from .records import IncidentRecord

__all__ = ["ENGINE_NOTICES_CTE", "incident_notice", "maintenance_notice"]

ENGINE_NOTICES_CTE = f"""page_mailed AS (
    INSERT INTO page_mails (subscriber_id, page_id, email, kind, subject, body, link_path,
                            next_attempt_at, give_up_at, created)
    SELECT s.id, p.id, s.email, 'notice',
           left(p.name || ': ' || e.heading || t.name || ' is ' || e.state, 250),
           e.heading || t.name || ' is ' || e.state || E'\\n\\nStatus: ' || initcap(e.status)
               || E'\\nSeverity: ' || initcap(e.severity)
               || coalesce(E'\\n\\n' || t.name || ' is up again after ' || e.took, '')
               || E'\\n\\nAffected: ' || t.affected,
           '/status/' || p.slug || '/unsubscribe/' || s.unsubscribe_key, e.at::float8,
           e.at + {GIVE_UP_SECONDS}, e.at
    FROM (SELECT account_id, monitor_id, monitors, status, severity, created AS at,
                 'New incident: ' AS heading, 'down' AS state, NULL::text AS took
          FROM opened
          UNION ALL
          SELECT account_id, monitor_id, monitors, status, severity, resolved_at,
                 'Resolved: ', 'up again', human_duration(resolved_at - created)
          FROM resolved) e
    JOIN status_pages p ON p.account_id = e.account_id
    CROSS JOIN LATERAL (SELECT
        (SELECT c ->> 'name' FROM jsonb_array_elements(p.components) c
         WHERE c ->> 'monitor' = e.monitor_id LIMIT 1) AS name,
        (SELECT string_agg(DISTINCT c ->> 'name', ', ') FROM jsonb_array_elements(p.components) c
         WHERE c ->> 'monitor' = ANY(e.monitors)) AS affected) t
    JOIN page_subscribers s ON s.page_id = p.id AND s.status = 'confirmed'
    WHERE t.name IS NOT NULL)"""
"""A CTE of ``store.alerting``'s round: the subscriber mails of the incidents the round
opened and resolved (CTEs ``opened`` and ``resolved``), to the pages showing their opener
as a component (a heartbeat is never one): ``"<display name> is down"`` and
``"<display name> is up again after <duration>"``, as the public page tells them
(docs/status-pages.md, "Incidents a monitor or a heartbeat opened")."""

_WORDS = {
    "investigating": "Investigating",
    "identified": "Identified",
    "monitoring": "Monitoring",
    "resolved": "Resolved",
}

_INSERT = """
INSERT INTO page_mails (subscriber_id, page_id, email, kind, subject, body, link_path,
                        next_attempt_at, give_up_at, created)
SELECT s.id, p.id, s.email, 'notice',
       left(p.name || ': ' || $5 || t.title, 250),
       $5 || t.title || E'\\n\\nStatus: ' || $6 || E'\\nSeverity: ' || $7
           || coalesce(E'\\n\\n' || $8, '') || E'\\n\\nAffected: ' || t.affected,
       '/status/' || p.slug || '/unsubscribe/' || s.unsubscribe_key, $9::float8, $10, $9
FROM status_pages p
CROSS JOIN LATERAL (SELECT
    CASE WHEN $3::text IS NULL THEN $4
         WHEN $3 LIKE 'hbt\\_%' THEN 'A background job is down'
         ELSE coalesce((SELECT c ->> 'name' FROM jsonb_array_elements(p.components) c
                        WHERE c ->> 'monitor' = $3 LIMIT 1), 'A monitored service')
              || ' is down' END AS title,
    (SELECT string_agg(DISTINCT c ->> 'name', ', ') FROM jsonb_array_elements(p.components) c
     WHERE c ->> 'monitor' = ANY($2::text[])) AS affected) t
JOIN page_subscribers s ON s.page_id = p.id AND s.status = 'confirmed'
WHERE p.account_id = $1 AND t.affected IS NOT NULL
"""


async def incident_notice(
    connection: Connection,
    incident: IncidentRecord,
    message: str | None,
    created: int,
    *,
    first: bool = False,
) -> None:
    """Write the subscriber mails of one new timeline entry of ``incident`` (module
    docstring): ``message`` is the entry's (the first entry's, the description, is never
    sent: ``first``), ``created`` its time, epoch seconds. Run it in the entry's
    transaction."""
    heading = "New incident: " if first else ("Resolved: " if incident.status == "resolved" else "")
    await connection.execute(
        _INSERT,
        incident.account_id,
        incident.monitors or ([incident.monitor_id] if incident.monitor_id else []),
        incident.monitor_id,
        incident.title,
        heading,
        _WORDS.get(incident.status, incident.status),
        incident.severity.capitalize(),
        None if first else message,
        float(created),
        created + GIVE_UP_SECONDS,
    )


_MAINTENANCE = {
    "scheduled": "Scheduled maintenance: ",
    "started": "Maintenance in progress: ",
    "ended": "Maintenance completed: ",
}

_MAINTENANCE_INSERT = f"""
INSERT INTO page_mails (subscriber_id, page_id, email, kind, subject, body, link_path,
                        next_attempt_at, give_up_at, created)
SELECT s.id, p.id, s.email, 'notice', left(p.name || ': ' || $3, 250),
       $3 || E'\\n\\n' || $4 || E'\\n\\nAffected: ' || t.affected,
       '/status/' || p.slug || '/unsubscribe/' || s.unsubscribe_key, extract(epoch FROM now()),
       extract(epoch FROM now()) + {GIVE_UP_SECONDS}, $5
FROM status_pages p
CROSS JOIN LATERAL (
    SELECT string_agg(DISTINCT c ->> 'name', ', ') AS affected
    FROM jsonb_array_elements(p.components) c WHERE c ->> 'monitor' = ANY($2::text[])) t
JOIN page_subscribers s ON s.page_id = p.id AND s.status = 'confirmed'
WHERE p.account_id = $1 AND t.affected IS NOT NULL
"""


def _utc(epoch: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(epoch))


class Window(Protocol):
    """What a maintenance notice reads of a window (``store.windows.WindowRecord``)."""

    @property
    def account_id(self) -> str: ...
    @property
    def monitors(self) -> list[str]: ...
    @property
    def title(self) -> str: ...
    @property
    def description(self) -> str | None: ...


async def maintenance_notice(
    connection: Connection, window: Window, kind: str, starts_at: int, ends_at: int, at: int
) -> None:
    """Write the subscriber mails of an occurrence of ``window`` (``kind``: ``scheduled``,
    ``started`` or ``ended``; times epoch seconds) to every confirmed subscriber of the
    account's pages showing one of its monitors: the title,
    description and times, which the public page shows too, and the display names of the
    components it covers. Run it in the transaction of the change it tells of. The mails
    are due at once (the database's clock), whatever ``at``: a walk that acts on an
    occurrence late still tells it, for an hour of retries."""
    times = f"From {_utc(starts_at)} to {_utc(ends_at)}"
    if kind == "ended":
        times = f"Completed at {_utc(at)}"
    description = window.description
    text = times + ("" if description is None else "\n\n" + description)
    await connection.execute(
        _MAINTENANCE_INSERT,
        window.account_id,
        window.monitors,
        _MAINTENANCE[kind] + window.title,
        text,
        at,
    )
