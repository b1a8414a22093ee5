"""The email channel (engine.channels; docs/alerts.md) against a real SMTP relay on
127.0.0.1: aiosmtpd (https://aiosmtpd.aio-libs.org/) served on the trio-asyncio loop,
with a certificate of the test CA for STARTTLS and for implicit TLS (smtps), and
LOGIN/PLAIN authentication. The client is aiosmtplib
(https://aiosmtplib.readthedocs.io/en/stable/usage.html)."""

from __future__ import annotations

import dataclasses
import email
import email.policy
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import trio
import trio_asyncio
from aiosmtpd.smtp import SMTP, AuthResult, LoginPassword

from engine import ChannelSettings, send
from tests.engine.test_channels_http import ALERT
from tests.targets import TlsPair

ADDRESS = "oncall@example.com"


@dataclass
class Relay:
    """What the relay received: (envelope, whether the session was over TLS)."""

    port: int = 0
    mails: list[tuple[Any, bool]] = field(default_factory=list)
    refuse: bool = False

    async def handle_RCPT(
        self, server: Any, session: Any, envelope: Any, address: str, options: Any
    ) -> str:
        if self.refuse:
            return "550 5.1.1 no such mailbox"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        over_tls = server.transport.get_extra_info("ssl_object") is not None
        self.mails.append((envelope, over_tls))
        return "250 Message accepted"


def authenticator(
    server: Any, session: Any, envelope: Any, mechanism: str, data: Any
) -> AuthResult:
    ok = isinstance(data, LoginPassword) and (data.login, data.password) == (b"pager", b"s3cr:t")
    return AuthResult(success=ok, handled=False)  # False: aiosmtpd answers 535


@asynccontextmanager
async def relay(*, tls: TlsPair, implicit: bool, **smtp: Any) -> AsyncIterator[Relay]:
    """An aiosmtpd relay on 127.0.0.1 (STARTTLS offered and required, or smtps)."""
    found = Relay()

    def protocol() -> SMTP:
        return SMTP(
            found,
            hostname="localhost",
            tls_context=None if implicit else tls.server,
            require_starttls=not implicit,
            auth_require_tls=not implicit,  # aiosmtpd sees only STARTTLS as TLS
            authenticator=authenticator,
            **smtp,
        )

    async with trio_asyncio.open_loop() as loop:
        server = await trio_asyncio.aio_as_trio(loop.create_server)(
            protocol, host="127.0.0.1", port=0, ssl=tls.server if implicit else None
        )
        found.port = server.sockets[0].getsockname()[1]
        try:
            yield found
        finally:
            server.close()
            await trio_asyncio.aio_as_trio(server.wait_closed)()


def settings(url: str, tls: TlsPair, timeout: float = 5.0) -> ChannelSettings:
    return ChannelSettings(
        smtp_url=url,
        smtp_from="Uptrio <alerts@uptrio.example>",
        ssl_context=tls.client,
        timeout_seconds=timeout,
    )


def parts(envelope: Any) -> tuple[Any, str, str]:
    mail = email.message_from_bytes(envelope.original_content, policy=email.policy.default)
    plain = mail.get_body(("plain",)).get_content()
    html = mail.get_body(("html",)).get_content()
    return mail, plain, html


async def test_starttls_with_authentication(tls: TlsPair) -> None:
    with trio.fail_after(10):
        async with relay(tls=tls, implicit=False, auth_required=True) as found:
            url = f"smtp://pager:s3cr%3At@127.0.0.1:{found.port}"
            attempt = await send(
                "email", {"address": ADDRESS}, ALERT, settings(url, tls), channel_id="nch_1"
            )
    assert attempt.status == "succeeded", attempt.error
    ((envelope, over_tls),) = found.mails
    assert over_tls  # STARTTLS happened (the relay requires it)
    assert envelope.rcpt_tos == [ADDRESS]
    mail, plain, html = parts(envelope)
    assert mail["Subject"] == "[DOWN] Checkout <API> & co" and len(mail["Subject"]) <= 78
    assert mail["To"] == ADDRESS and mail["From"] == "Uptrio <alerts@uptrio.example>"
    assert mail["Auto-Submitted"] == "auto-generated"
    assert ALERT.ack_url in plain and f'href="{ALERT.ack_url}"' in html
    assert ALERT.summary in plain
    assert "Checkout &lt;API&gt; &amp; co" in html and "<API>" not in html  # autoescape
    assert "hunter2" not in plain and "hunter2" not in html


async def test_implicit_tls(tls: TlsPair) -> None:
    resolved = dataclasses.replace(ALERT, kind="resolved", status="resolved", ack_url=None)
    with trio.fail_after(10):
        async with relay(tls=tls, implicit=True) as found:
            url = f"smtps://pager:s3cr%3At@127.0.0.1:{found.port}"
            attempt = await send(
                "email", {"address": ADDRESS}, resolved, settings(url, tls), channel_id="n"
            )
    assert attempt.status == "succeeded", attempt.error
    ((envelope, over_tls),) = found.mails
    assert over_tls
    mail, plain, _ = parts(envelope)
    assert mail["Subject"].startswith("[RESOLVED]") and "Acknowledge" not in plain


async def test_wrong_password_is_a_failed_attempt(tls: TlsPair) -> None:
    with trio.fail_after(10):
        async with relay(tls=tls, implicit=False, auth_required=True) as found:
            url = f"smtp://pager:wrong@127.0.0.1:{found.port}"
            attempt = await send(
                "email", {"address": ADDRESS}, ALERT, settings(url, tls), channel_id="n"
            )
    assert attempt.status == "failed" and attempt.response_status == 535
    assert attempt.error is not None and attempt.error.startswith("smtp_error")
    assert found.mails == []


async def test_a_refused_recipient_is_a_failed_attempt(tls: TlsPair) -> None:
    with trio.fail_after(10):
        async with relay(tls=tls, implicit=True) as found:
            found.refuse = True
            url = f"smtps://127.0.0.1:{found.port}"
            attempt = await send(
                "email", {"address": ADDRESS}, ALERT, settings(url, tls), channel_id="n"
            )
    assert attempt.status == "failed" and attempt.error is not None
    assert attempt.error.startswith("smtp_error")


async def test_an_untrusted_certificate_fails(tls: TlsPair) -> None:
    with trio.fail_after(10):
        async with relay(tls=tls, implicit=True) as found:
            strict = dataclasses.replace(
                settings(f"smtps://127.0.0.1:{found.port}", tls),
                ssl_context=ssl.create_default_context(),  # the system's CAs only
            )
            attempt = await send("email", {"address": ADDRESS}, ALERT, strict, channel_id="n")
    assert attempt.status == "failed" and found.mails == []


async def test_a_silent_relay_fails_within_the_deadline(
    tls: TlsPair, nursery: trio.Nursery
) -> None:
    async def silent(stream: trio.SocketStream) -> None:
        await trio.sleep_forever()  # never greets

    listeners = await nursery.start(trio.serve_tcp, silent, 0)
    port = listeners[0].socket.getsockname()[1]
    started = trio.current_time()
    with trio.fail_after(5):
        attempt = await send(
            "email",
            {"address": ADDRESS},
            ALERT,
            settings(f"smtp://127.0.0.1:{port}", tls, timeout=0.5),
            channel_id="n",
        )
    assert attempt.status == "failed" and attempt.error is not None
    assert attempt.error.startswith("timeout")
    assert trio.current_time() - started < 2.0


async def test_no_relay_is_a_failed_attempt() -> None:
    with trio.fail_after(5):
        attempt = await send(
            "email", {"address": ADDRESS}, ALERT, ChannelSettings(), channel_id="n"
        )
    assert attempt.status == "failed" and attempt.error is not None
    assert attempt.error.startswith("smtp_not_configured")
