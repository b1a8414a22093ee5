"""Email subscriptions to a status page (docs/status-pages.md, "Subscribers"), public, no
token: plain Quart routes beside the status pages
(:mod:`web.public.status_pages`).

- ``POST /status/<slug>/subscribe`` (form field ``email``, checked with email-validator,
  no deliverability lookup, then lower-cased): records the request and writes its
  confirmation mail in one transaction (``store.page_subscribers.subscribe``); the page
  mailer sends it (``engine.page_mailer``). Every accepted request gets the same answer,
  202 "check your inbox", whether the address was new, pending, confirmed already or past
  its daily limit of confirmation mails: the answer never tells whether an address is
  subscribed.
- ``GET /status/<slug>/confirm/<token>`` shows a page with a "Confirm" button and changes
  nothing (mail scanners open links); its ``POST`` confirms.
- ``GET /status/<slug>/unsubscribe/<key>`` shows a page with an "Unsubscribe" button;
  ``POST`` unsubscribes: the form's, and the one-click POST of a mail client
  (``List-Unsubscribe-Post: List-Unsubscribe=One-Click``, RFC 8058), which gets 200 too
  when the address was unsubscribed already.

Errors: an invalid address is a 422 (``invalid_email``, ``param`` ``email``), an unknown
page or link a 404 (``resource_missing``), the page's hourly limit a 429 (``rate_limited``,
``Retry-After: 3600``), an unreachable database a 503 (``status_page_unavailable``,
``Retry-After: 5``). Each is an HTML page, or the API's error object when the request's
``Accept`` prefers ``application/json`` to ``text/html``. Every answer carries
``Cache-Control: no-store`` and ``Referrer-Policy: no-referrer`` (the path holds the token)
and a ``Content-Security-Policy`` that allows no script and forms only to this service.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable

import structlog
from email_validator import EmailNotValidError, validate_email
from quart import Response, g, request
from quart_trio import QuartTrio

from store import StoreError, page_subscribers

from ..api.status_pages import valid_slug
from ..http.deps import Dependencies
from ..http.errors import ApiError, error_body
from .status_pages import HTML, TEMPLATES

__all__ = ["add_subscription_routes"]

log = structlog.get_logger("uptrio.subscriptions")

_TOKEN = re.compile(r"[A-Za-z0-9_-]{16,128}")
"""What a confirm token or unsubscribe key may look like; anything else is a 404 without a
query."""
_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'unsafe-inline'; img-src 'none'; base-uri 'none'; "
        "form-action 'self'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
_TITLES = {
    "check_inbox": "Check your inbox",
    "confirm": "Confirm your subscription",
    "confirmed": "Subscription confirmed",
    "unsubscribe": "Unsubscribe?",
    "unsubscribed": "Unsubscribed",
    "invalid_email": "Not an email address",
    "limited": "Too many subscriptions",
    "missing": "Link not valid",
    "unavailable": "Temporarily unavailable",
}
_ERRORS = {
    "invalid_email": ("invalid_email", "email", {}),
    "limited": ("rate_limited", None, {"Retry-After": "3600"}),
    "missing": ("resource_missing", None, {}),
    "unavailable": ("status_page_unavailable", None, {"Retry-After": "5"}),
}
_PAGE = TEMPLATES.get_template("subscription.html")
MAX_EMAIL_LENGTH = 254
"""The longest address accepted, characters (RFC 5321's path limit)."""


def _answer(state: str, status: int, *, message: str = "", **values: str) -> Response:
    """The answer in ``state`` (a key of :data:`_TITLES`): the HTML page, or for an error
    and a client preferring JSON, the API's error object."""
    headers = dict(_HEADERS)
    if state in _ERRORS:
        code, param, extra = _ERRORS[state]
        headers.update(extra)
        accept = request.accept_mimetypes
        if accept.best_match(["text/html", "application/json"]) == "application/json":
            error = ApiError(code, message or _TITLES[state], param=param)
            body = json.dumps(error_body(error, getattr(g, "request_id", "")))
            return Response(body, status=status, headers=headers, content_type="application/json")
    html = _PAGE.render(state=state, title=_TITLES[state], **values)
    return Response(html.encode(), status=status, headers=headers, content_type=HTML)


def add_subscription_routes(app: QuartTrio, deps: Dependencies) -> None:
    """Add the subscribe, confirm and unsubscribe routes to ``app`` (module docstring)."""

    @app.route("/status/<slug>/subscribe", methods=["POST"], provide_automatic_options=False)
    async def subscribe(slug: str) -> Response:
        if not valid_slug(slug):
            return _answer("missing", 404, message="No status page has this slug.")
        form = await request.form
        raw = form.get("email", "").strip()
        try:
            if len(raw) > MAX_EMAIL_LENGTH:
                raise EmailNotValidError(f"longer than {MAX_EMAIL_LENGTH} characters")
            # lower-cased whole: one mailbox is one subscriber and one count of the limits
            email = validate_email(raw, check_deliverability=False).normalized.lower()
        except EmailNotValidError as exc:
            return _answer(
                "invalid_email", 422, message=f"email is not an address: {exc}", error=str(exc)
            )
        try:
            outcome = await deps.db.transaction(
                page_subscribers.subscribe, slug, email, int(deps.clock())
            )
        except StoreError as exc:
            log.warning("subscription not recorded", error=str(exc))
            return _answer("unavailable", 503)
        if outcome == "missing":
            return _answer("missing", 404, message="No status page has this slug.")
        if outcome == "limited":
            return _answer(
                "limited", 429, message="This status page took too many subscriptions this hour."
            )
        return _answer("check_inbox", 202, page="")

    async def confirm(slug: str, token: str) -> Response:
        if request.method == "POST":
            found = await deps.db.transaction(
                page_subscribers.confirm, slug, token, int(deps.clock())
            )
        else:
            found = await deps.db.run(
                page_subscribers.subscription_of_key, slug, confirm_token=token
            )
        if found is None:
            return _answer("missing", 404)
        posted = request.method == "POST" or found.status == "confirmed"
        return _answer(
            "confirmed" if posted else "confirm", 200, page=found.page_name, email=found.email
        )

    async def unsubscribe(slug: str, key: str) -> Response:
        if request.method == "POST":  # the form's, or RFC 8058's one-click
            await deps.db.transaction(page_subscribers.unsubscribe, slug, key)
            return _answer("unsubscribed", 200)
        found = await deps.db.run(page_subscribers.subscription_of_key, slug, key=key)
        if found is None:
            return _answer("unsubscribed", 200)
        return _answer("unsubscribe", 200, page=found.page_name, email=found.email)

    for path, view in (
        ("/status/<slug>/confirm/<key>", confirm),
        ("/status/<slug>/unsubscribe/<key>", unsubscribe),
    ):
        app.add_url_rule(
            path,
            view_func=_link(view),
            endpoint=view.__name__,
            methods=["GET", "POST"],
            provide_automatic_options=False,
        )


def _link(view: Callable[[str, str], Awaitable[Response]]) -> Callable[..., Awaitable[Response]]:
    """``view`` behind the checks both links share: a malformed slug or key is a 404
    without a query, the form's body is read and dropped (nothing in it is used; RFC
    8058's ``List-Unsubscribe=One-Click`` included), a database error is a 503."""

    async def checked(slug: str, key: str) -> Response:
        if not valid_slug(slug) or _TOKEN.fullmatch(key) is None:
            return _answer("missing", 404)
        await request.get_data(cache=False)
        try:
            return await view(slug, key)
        except StoreError:
            return _answer("unavailable", 503)

    return checked
