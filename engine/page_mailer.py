"""The page mailer: an actor under the root supervisor that sends the mails of status page
subscribers (docs/status-pages.md, "Subscribers"; the outbox ``page_mails``,
``store.page_subscribers``).

Every ``poll_seconds`` (and at once after a full claim) it claims due mails
(``store.page_subscribers.claim_due``: ``FOR UPDATE SKIP LOCKED``, so every node runs one
and none sends a mail twice at once), composes each (:func:`compose_page_mail`) and sends
it through the SMTP relay of email channels (``engine.channels.send_mail``), at most
``max_in_flight`` at once, each under ``timeout_seconds``; each attempt is settled with the
back-off of the notification outbox for at most an hour. The settings are the notifier's
(:class:`~engine.notifier.NotifierSettings`: relay, sender, retry base, deadlines, public
URL).

At least once: a claim leases the mail for ``claim_seconds``; a mailer that dies before
recording leaves it to be claimed again. A database error while claiming or recording is
logged and waits a poll; ``trio.Cancelled`` is never caught.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from email.message import EmailMessage
from email.utils import formatdate, make_msgid
from urllib.parse import urlsplit

import jinja2
import structlog
import trio

from store import Database, StoreError, page_subscribers
from store.page_subscribers import ClaimedMail

from .channels import Attempt, ChannelSettings, send_mail
from .notifier import NotifierSettings

__all__ = ["compose_page_mail", "run_page_mailer"]

log = structlog.get_logger("uptrio.page_mailer")

_TEXT = jinja2.Environment(autoescape=False, undefined=jinja2.StrictUndefined)
_HTML = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)

CONFIRM_TEXT = _TEXT.from_string(
    """Someone, hopefully you, asked to receive email updates of the status page "{{ page }}".

To confirm, open this link and press "Confirm":
{{ url }}

If it was not you, ignore this mail: nothing more is sent without a confirmation.
"""
)
NOTICE_TEXT = _TEXT.from_string(
    """{{ body }}

The status page: {{ page_url }}

You receive this because you subscribed to the status page "{{ page }}".
Unsubscribe: {{ url }}
"""
)
HTML = _HTML.from_string(
    """<!doctype html>
<html><body style="font-family: sans-serif">
<h2>{{ subject }}</h2>
{% if confirm %}<p>Someone, hopefully you, asked to receive email updates of the status page
&ldquo;{{ page }}&rdquo;.</p>
<p><a href="{{ url }}">Confirm the subscription</a></p>
<p>If it was not you, ignore this mail: nothing more is sent without a confirmation.</p>
{% else %}<pre style="font-family: inherit; white-space: pre-wrap">{{ body }}</pre>
<p><a href="{{ page_url }}">Open the status page</a></p>
<p style="color: #555">You receive this because you subscribed to the status page
&ldquo;{{ page }}&rdquo;. <a href="{{ url }}">Unsubscribe</a></p>{% endif %}
</body></html>
"""
)


def compose_page_mail(mail: ClaimedMail, sender: str, public_url: str) -> EmailMessage:
    """The email of a claimed subscriber mail (module docstring): a plain-text and an HTML
    part; its link is ``public_url`` + the mail's path. A ``notice`` links to the page
    (``/status/<slug>``, the first part of that path) and carries the
    unsubscribe link in both parts and ``List-Unsubscribe`` with
    ``List-Unsubscribe-Post: List-Unsubscribe=One-Click`` (RFC 8058: the client POSTs to
    that URL). Pure."""
    url = public_url.rstrip("/") + mail.link_path
    confirm = mail.kind == "confirm"
    subject = f"Confirm your subscription to {mail.page_name}" if confirm else mail.subject
    page_url = public_url.rstrip("/") + "/".join(mail.link_path.split("/")[:3])
    values = {
        "page": mail.page_name,
        "url": url,
        "page_url": page_url,
        "body": mail.body,
        "subject": subject,
    }
    out = EmailMessage()
    out["Subject"] = subject
    out["From"] = sender
    out["To"] = mail.email
    out["Date"] = formatdate(localtime=False)
    out["Message-ID"] = make_msgid(domain=sender.rpartition("@")[2] or None)
    out["Auto-Submitted"] = "auto-generated"
    if not confirm:
        out["List-Unsubscribe"] = f"<{url}>"
        out["List-Unsubscribe-Post"] = "List-Unsubscribe=One-Click"
    out.set_content((CONFIRM_TEXT if confirm else NOTICE_TEXT).render(values))
    out.add_alternative(HTML.render(values, confirm=confirm), subtype="html")
    return out


async def run_page_mailer(
    db: Database,
    settings: NotifierSettings,
    *,
    clock: Callable[[], float] = time.time,
    rng: random.Random | None = None,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run the page mailer until cancelled (module docstring); ``task_status.started()``
    at once.

    Args:
        db: the database, with a deadline.
        settings: the notifier's settings (relay, sender, retries, deadlines, public URL).
        clock: wall-clock time, epoch seconds.
        rng: draws the back-off's jitter (tests seed it).
    """
    channel = settings.channel_settings(None)
    draw = rng or random.Random()
    task_status.started()
    while True:
        try:
            claimed = await db.transaction(
                page_subscribers.claim_due, clock(), settings.max_in_flight, settings.claim_seconds
            )
        except StoreError as exc:
            log.warning("page mail claim failed", error=str(exc))
            claimed = []
        async with trio.open_nursery() as nursery:
            for mail in claimed:
                nursery.start_soon(
                    _attempt, db, settings, channel, mail, clock, draw.uniform(0.5, 1.5)
                )
        if len(claimed) < settings.max_in_flight:
            await trio.sleep(settings.poll_seconds)


async def _attempt(
    db: Database,
    settings: NotifierSettings,
    channel: ChannelSettings,
    mail: ClaimedMail,
    clock: Callable[[], float],
    jitter: float,
) -> None:
    """Send one mail under the deadline and settle it (a database error: logged, the
    lease lapses and the mail is sent again)."""
    at = clock()
    sender = settings.smtp_from or f"uptrio@{urlsplit(settings.smtp_url or '').hostname}"
    attempt = Attempt.failed("timeout: no answer from the SMTP relay")
    with trio.move_on_after(settings.timeout_seconds):
        attempt = await send_mail(compose_page_mail(mail, sender, settings.public_url), channel)
    if attempt.error:
        log.info("page mail attempt failed", mail=mail.seq, error=attempt.error)
    try:
        await db.transaction(
            page_subscribers.record_attempt,
            mail.seq,
            error=attempt.error,
            now=at,
            ended=clock(),
            retry_base_seconds=settings.retry_base_seconds,
            jitter=jitter,
        )
    except StoreError as exc:
        log.warning("page mail attempt not recorded", mail=mail.seq, error=str(exc))
