"""Email: a message with a plain-text and an HTML part (``email.message.EmailMessage``,
the HTML from a Jinja2 template with autoescape), both holding the acknowledge link,
sent through the server's relay with aiosmtplib
(https://aiosmtplib.readthedocs.io/en/stable/usage.html) (docs/alerts.md).

The relay is ``--smtp-url``: ``smtp://[user:password@]host[:port]`` (port 25 by default;
STARTTLS when the relay offers it, aiosmtplib's ``start_tls=None``) or
``smtps://…`` (TLS from the first byte, port 465 by default); user and password are
percent-decoded. Every SMTP step has the attempt's deadline (aiosmtplib's ``timeout``)
and the whole send is held to it too. The relay is the operator's, not a user's: the
target policy does not apply to it.

aiosmtplib runs on asyncio; it is run through trio-asyncio's loop (the service runs in
one: ``trio_asyncio.open_loop()``; a caller outside one gets a loop for the send).

The subject is the headline (``[DOWN] <name>``, at most 78 characters: one line of a lock
screen); ``Auto-Submitted: auto-generated`` (RFC 3834) keeps auto-responders quiet.
"""

from __future__ import annotations

import ssl
import time
from collections.abc import Mapping
from email.message import EmailMessage
from email.utils import formatdate, make_msgid
from typing import Any
from urllib.parse import unquote, urlsplit

import aiosmtplib
import jinja2
import trio
import trio_asyncio

from ._channel_type import ChannelType, Key
from ._message import Attempt, ChannelSettings, Message, facts, headline

__all__ = ["EMAIL", "Relay", "compose", "parse_smtp_url", "send_mail", "sender_of"]

_TEMPLATES = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)

HTML = _TEMPLATES.from_string(
    """<!doctype html>
<html><body style="font-family: sans-serif">
<h2>{{ title }}</h2>
<p>{{ message.summary }}</p>
<table>{% for label, value in facts %}
<tr><th align="left">{{ label }}</th><td>{{ value }}</td></tr>{% endfor %}
</table>
{% if message.ack_url %}<p><a href="{{ message.ack_url }}"
 style="display: inline-block; padding: 8px 16px; background: #1d4ed8; color: #fff"
 >Acknowledge</a></p>
<p>Or open {{ message.ack_url }}</p>{% endif %}
</body></html>
"""
)

TEXT = jinja2.Environment(autoescape=False, undefined=jinja2.StrictUndefined).from_string(
    """{{ title }}

{{ message.summary }}
{% for label, value in facts %}
{{ label }}: {{ value }}{% endfor %}
{% if message.ack_url %}
Acknowledge: {{ message.ack_url }}
{% endif %}"""
)


class Relay:
    """The parts of ``--smtp-url``: ``host``, ``port``, ``implicit_tls`` (``smtps``),
    ``username`` and ``password`` (None when absent)."""

    __slots__ = ("host", "implicit_tls", "password", "port", "username")

    def __init__(
        self, host: str, port: int, implicit_tls: bool, username: str | None, password: str | None
    ) -> None:
        self.host, self.port, self.implicit_tls = host, port, implicit_tls
        self.username, self.password = username, password


def parse_smtp_url(url: str) -> Relay:
    """``url`` as a `Relay` (module docstring).

    Raises:
        ValueError: not an ``smtp://`` or ``smtps://`` url with a host.
    """
    parts = urlsplit(url)
    if parts.scheme not in ("smtp", "smtps") or not parts.hostname:
        raise ValueError("the SMTP url must be smtp://host[:port] or smtps://host[:port]")
    implicit = parts.scheme == "smtps"
    return Relay(
        host=parts.hostname,
        port=parts.port or (465 if implicit else 25),
        implicit_tls=implicit,
        username=unquote(parts.username) if parts.username else None,
        password=unquote(parts.password) if parts.password is not None else None,
    )


def compose(address: str, message: Message, sender: str) -> EmailMessage:
    """The email of ``message`` to ``address`` from ``sender`` (module docstring)."""
    title = headline(message)
    values = {"title": title, "message": message, "facts": facts(message)}
    mail = EmailMessage()
    mail["Subject"] = title
    mail["From"] = sender
    mail["To"] = address
    mail["Date"] = formatdate(localtime=False)
    mail["Message-ID"] = make_msgid(domain=sender.rpartition("@")[2] or None)
    mail["Auto-Submitted"] = "auto-generated"
    mail.set_content(TEXT.render(values))
    mail.add_alternative(HTML.render(values), subtype="html")
    return mail


async def deliver(
    config: Mapping[str, Any], message: Message, settings: ChannelSettings
) -> Attempt:
    """Send ``message`` to ``config["address"]`` through the relay (module docstring).

    Returns:
        the `Attempt`; failed with ``smtp_not_configured`` without a relay, with
        ``timeout`` past ``settings.timeout_seconds``, with ``smtp_error`` (and the reply
        code as ``response_status`` when the relay answered one) when the relay refused
        or the connection failed. Never raises for the relay's doing; `trio.Cancelled`
        passes.
    """
    if settings.smtp_url is None:
        return Attempt.failed("smtp_not_configured: this server has no --smtp-url")
    try:
        relay = parse_smtp_url(settings.smtp_url)
    except ValueError as exc:
        return Attempt.failed(f"smtp_not_configured: {exc}")
    mail = compose(config["address"], message, sender_of(settings, relay))
    return await send_mail(mail, settings)


def sender_of(settings: ChannelSettings, relay: Relay) -> str:
    """The sender address of mails: ``--smtp-from``, else ``uptrio@<relay host>``."""
    return settings.smtp_from or f"uptrio@{relay.host}"


async def send_mail(mail: EmailMessage, settings: ChannelSettings) -> Attempt:
    """Send ``mail`` (addressed already) through the relay of ``settings`` under
    ``settings.timeout_seconds`` (module docstring); also the page mailer's
    (``engine.page_mailer``).

    Returns:
        the `Attempt`, as :func:`deliver` tells. Never raises for the relay's doing;
        `trio.Cancelled` passes.
    """
    if settings.smtp_url is None:
        return Attempt.failed("smtp_not_configured: this server has no --smtp-url")
    started = time.perf_counter()
    try:
        relay = parse_smtp_url(settings.smtp_url)
    except ValueError as exc:
        return Attempt.failed(f"smtp_not_configured: {exc}")
    tls = settings.ssl_context if settings.ssl_context is not None else ssl.create_default_context()
    timeout = settings.timeout_seconds

    async def send() -> object:
        return await aiosmtplib.send(
            mail,
            hostname=relay.host,
            port=relay.port,
            username=relay.username,
            password=relay.password,
            use_tls=relay.implicit_tls,
            start_tls=False if relay.implicit_tls else None,
            tls_context=tls,
            timeout=timeout,
        )

    def done(error: str | None, status: int | None = None) -> Attempt:
        return Attempt(
            status="failed" if error else "succeeded",
            response_status=status,
            error=error,
            duration_ms=(time.perf_counter() - started) * 1000.0,
        )

    try:
        with trio.fail_after(timeout):
            if trio_asyncio.current_loop.get() is None:
                async with trio_asyncio.open_loop():
                    await trio_asyncio.aio_as_trio(send)()
            else:
                await trio_asyncio.aio_as_trio(send)()
    except trio.TooSlowError:
        return done(f"timeout: no answer from the SMTP relay within {timeout} s")
    except aiosmtplib.SMTPTimeoutError as exc:
        return done(f"timeout: {exc}")
    except aiosmtplib.SMTPResponseException as exc:
        return done(f"smtp_error: {exc.code} {exc.message}", exc.code)
    except (aiosmtplib.SMTPException, OSError) as exc:
        return done(f"smtp_error: {exc}")
    return done(None)


EMAIL = ChannelType(
    name="email",
    keys=(Key(name="address", kind="email"),),
    deliver=deliver,
)
