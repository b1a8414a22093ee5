"""The store's error hierarchy: every database failure leaves ``store`` as one of these.

::

    StoreError                  anything the store could not do ├── DatabaseUnavailable
    the server cannot be reached, or a connection broke mid-query ├── CursorNotFound
    a pagination cursor names no object of the account (docs/api.md, Conventions) ├──
    IntegrityConflict       a constraint refused the write (unique key, foreign key) └──
    TimelineFull            an incident's timeline holds its limit of entries

asyncpg's and the socket layer's exceptions are translated once, at the boundary in
:mod:`store._database`; callers above never see an asyncpg type. Exceptions raised by
caller-supplied callbacks (for example a validation error raised while a patch is applied
inside a transaction) are not translated: they pass through unchanged and roll the
transaction back.
"""

from __future__ import annotations


class StoreError(Exception):
    """Base class of every error the store raises."""


class DatabaseUnavailable(StoreError):
    """Postgres cannot be reached, refused the connection, or the connection broke."""


class CursorNotFound(StoreError):
    """``starting_after`` / ``ending_before`` names no object of this account.

    Attributes:
        param: the query parameter that carried the cursor (``"starting_after"`` or
            ``"ending_before"``).
    """

    def __init__(self, param: str, cursor: str) -> None:
        super().__init__(f"no object with id {cursor!r} for {param}")
        self.param = param
        self.cursor = cursor


class IntegrityConflict(StoreError):
    """A unique or foreign-key constraint refused the write.

    Attributes:
        constraint: the name of the constraint that refused it (for example
            ``status_pages_slug_key``), or None when the server did not name one.
    """

    def __init__(self, message: str, constraint: str | None = None) -> None:
        super().__init__(message)
        self.constraint = constraint


class TimelineFull(StoreError):
    """An incident's timeline already holds its limit of entries
    (``store.incidents.MAX_UPDATES``; docs/incidents.md, Timelines): the entry was refused
    and the transaction rolls back.

    Attributes:
        incident_id: the incident.
        limit: the entries it may hold.
    """

    def __init__(self, incident_id: str, limit: int) -> None:
        super().__init__(f"incident {incident_id} already has {limit:,} timeline entries")
        self.incident_id = incident_id
        self.limit = limit
