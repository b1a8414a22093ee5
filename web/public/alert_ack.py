"""The one-click acknowledge link of an alert (docs/alerts.md, "Acknowledge links"):
``GET /alerts/ack/<token>`` shows a small confirmation page and changes nothing (mail
scanners and link previews open links), and its form's ``POST /alerts/ack/<token>``
acknowledges the alert.

No token, no cookie: the 128-bit token in the path is the capability, bound to one alert
and to the member (or, for a channel target, the channel) it was sent to, and it dies
when the alert resolves. The alert is acknowledged on behalf of that member
(``acknowledged_by`` ``{"type": "member", "id": "mbr_…"}``), or as a token naming the
channel (``{"type": "token", "id": "nch_…"}``) when the link went to a channel target. These
are plain Quart routes beside the API, like the status pages
(:mod:`web.public.status_pages`) and the ping URLs (:mod:`web.public.pings`).

The page shows what the message that carried the link already said, nothing more: the
alert's summary (``"<name> is down: <error message>"``), its severity, since when it is
down and when it was acknowledged. Never the monitor's URL or headers, the account, the
members or the channels.

Answers (``text/html``), each with ``Cache-Control: no-store``, ``Referrer-Policy:
no-referrer`` (the path holds the token) and a ``Content-Security-Policy`` allowing no
script, nothing from elsewhere, no framing, and a form posting only to this address:

- 200: GET of a live link: the confirmation (or "already acknowledged"); POST: "acknowledged
  by you", "already acknowledged", or "resolved" (resolved between the page and the click).
- 404: an unknown, malformed or dead link (its alert resolved); nothing is read for a
  malformed one.
- 503 (``Retry-After: 5``): the database cannot be reached; nothing was changed.
"""

from __future__ import annotations

import re

from quart import Response, request
from quart_trio import QuartTrio

from store import AlertNotOpen, AlertRecord, StoreError, alerts

from ..http.deps import Dependencies
from .status_pages import HTML, TEMPLATES

__all__ = ["add_alert_ack_routes"]

_TOKEN = re.compile(r"[A-Za-z0-9_-]{16,128}")
"""What a token may look like (128 random bits, hex or URL-safe base64); anything else is
a 404 without a query."""
_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'unsafe-inline'; img-src 'none'; base-uri 'none'; "
        "form-action 'self'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
_TITLES = {
    "confirm": "Acknowledge this alert?",
    "acknowledged": "Alert acknowledged",
    "already": "Already acknowledged",
    "resolved": "Alert resolved",
    "missing": "Acknowledge link not valid",
    "unavailable": "Temporarily unavailable",
}
_PAGE = TEMPLATES.get_template("alert_ack.html")


def _page(state: str, status: int, alert: AlertRecord | None = None) -> Response:
    """The page in ``state`` (a key of :data:`_TITLES`) for ``alert``."""
    html = _PAGE.render(state=state, title=_TITLES[state], alert=alert)
    headers = dict(_HEADERS)
    if status == 503:
        headers["Retry-After"] = "5"
    return Response(html.encode(), status=status, headers=headers, content_type=HTML)


def add_alert_ack_routes(app: QuartTrio, deps: Dependencies) -> None:
    """Add ``GET`` and ``POST /alerts/ack/<token>`` to ``app`` (module docstring)."""

    async def show(token: str) -> Response:
        alert = await deps.db.run(alerts.alert_of_token, token)
        if alert is None:
            return _page("missing", 404)
        return _page("confirm" if alert.status == "triggered" else "already", 200, alert)

    async def acknowledge(token: str) -> Response:
        await request.get_data(cache=False)  # the form's body: nothing in it is read
        try:
            alert, changed = await deps.db.transaction(
                alerts.acknowledge_by_token, token, now=int(deps.clock())
            )
        except AlertNotOpen:
            return _page("resolved", 200)
        if alert is None:
            return _page("missing", 404)
        return _page("acknowledged" if changed else "already", 200, alert)

    @app.route("/alerts/ack/<token>", methods=["GET", "POST"], provide_automatic_options=False)
    async def alert_ack(token: str) -> Response:
        if _TOKEN.fullmatch(token) is None:
            return _page("missing", 404)
        try:
            if request.method == "POST":
                return await acknowledge(token)
            return await show(token)
        except StoreError:
            return _page("unavailable", 503)
