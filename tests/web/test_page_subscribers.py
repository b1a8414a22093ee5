"""Email subscriptions to a status page (docs/status-pages.md, "Subscribers"): the form's
POST writes a confirmation mail that the page mailer sends through a real SMTP relay
(aiosmtpd on 127.0.0.1); the test reads the mail, follows its link (a GET changes nothing,
the POST confirms), and checks the limits and that no answer tells whether an address was
subscribed."""

from __future__ import annotations

import email
import email.policy
import re
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlsplit

import trio
import trio_asyncio
from aiosmtpd.smtp import SMTP
from quart.typing import TestClientProtocol

from engine import NotifierSettings, run_page_mailer
from store import Database, window_walk
from tests.api import Api
from tests.engine.test_channels_email import Relay
from tests.web.helpers import create_monitor, expect
from tests.web.status_helpers import move

PUBLIC = "https://status.example.test"
ADDRESS = "reader@example.com"


@asynccontextmanager
async def mailer(db: Database) -> AsyncIterator[Relay]:
    """A plain SMTP relay on 127.0.0.1 and the page mailer sending through it (fast polls)."""
    found = Relay()
    loop = trio_asyncio.current_loop.get()  # the database's loop (tests/conftest.py)
    server = await trio_asyncio.aio_as_trio(loop.create_server)(
        lambda: SMTP(found, hostname="localhost"), host="127.0.0.1", port=0
    )
    found.port = server.sockets[0].getsockname()[1]
    settings = NotifierSettings(
        smtp_url=f"smtp://127.0.0.1:{found.port}",
        smtp_from="Status <status@uptrio.example>",
        poll_seconds=0.05,
        public_url=PUBLIC,
    )
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(run_page_mailer, db, settings)
            yield found
            nursery.cancel_scope.cancel()
    finally:
        server.close()
        await trio_asyncio.aio_as_trio(server.wait_closed)()


async def mails(found: Relay, count: int) -> list[Any]:
    """The first ``count`` mails the relay received, parsed (waits for them)."""
    while len(found.mails) < count:
        await trio.sleep(0.02)
    return [
        email.message_from_bytes(envelope.original_content, policy=email.policy.default)
        for envelope, _ in found.mails[:count]
    ]


def link_of(mail: Any) -> str:
    """The path of the mail's link under :data:`PUBLIC` (from its plain-text part)."""
    plain = mail.get_body(("plain",)).get_content()
    url = re.search(re.escape(PUBLIC) + r"/\S+", plain)
    assert url is not None, plain
    return urlsplit(url.group(0)).path


async def page(api: Api, slug: str = "acme-status") -> str:
    monitor = (await create_monitor(api, name="secret-name-1"))["id"]
    components = [{"monitor": monitor, "name": "Website", "group": None}]
    body = {"name": "Acme", "slug": slug, "components": components}
    expect(await api.post("/status-pages", json=body), 201)
    return monitor


async def subscribe(client: TestClientProtocol, address: str, slug: str = "acme-status") -> Any:
    return await client.post(f"/status/{slug}/subscribe", form={"email": address})


async def test_subscribe_mails_a_link_that_confirms_only_on_post(
    client: TestClientProtocol, api: Api, db: Database
) -> None:
    with trio.fail_after(20):
        await page(api)
        public = await client.get("/status/acme-status")  # the page's own form posts here
        assert 'action="/status/acme-status/subscribe"' in await public.get_data(as_text=True)
        assert "form-action 'self'" in public.headers["Content-Security-Policy"]
        async with mailer(db) as found:
            answer = await subscribe(client, " Reader@Example.com ")
            text = await answer.get_data(as_text=True)
            assert answer.status_code == 202, text
            assert "Check your inbox" in text and answer.headers["Cache-Control"] == "no-store"
            (mail,) = await mails(found, 1)
            while await db.run(_mail_status) != "succeeded":  # the attempt is recorded
                await trio.sleep(0.02)
        assert mail["To"] == ADDRESS and "Acme" in mail["Subject"]
        assert "List-Unsubscribe" not in mail  # nothing to unsubscribe from yet
        path = link_of(mail)
        assert path.startswith("/status/acme-status/confirm/")
        for _ in range(2):  # a mail scanner, then the reader
            shown = await client.get(path)
            html = await shown.get_data(as_text=True)
            assert shown.status_code == 200 and '<form method="post">' in html
        assert await db.run(_status, ADDRESS) == "pending"
        confirmed = await client.post(path, form={})
        assert confirmed.status_code == 200
        assert "Subscription confirmed" in await confirmed.get_data(as_text=True)
        assert await db.run(_status, ADDRESS) == "confirmed"
        # the token is stored only as a digest, and the settled mail forgot its link
        token = path.rsplit("/", 1)[1]
        assert not await db.run(_holds, token)


async def _status(connection: Any, address: str) -> str | None:
    return await connection.fetchval(
        "SELECT status FROM page_subscribers WHERE email = $1", address
    )


async def _mail_status(connection: Any) -> str:
    return str(await connection.fetchval("SELECT status FROM page_mails WHERE kind = 'confirm'"))


async def _holds(connection: Any, token: str) -> bool:
    return bool(
        await connection.fetchval(
            "SELECT EXISTS (SELECT 1 FROM page_subscribers WHERE confirm_digest = $1 "
            "OR unsubscribe_key = $1) OR EXISTS (SELECT 1 FROM page_mails "
            "WHERE position($1 in coalesce(link_path, '')) > 0)",
            token,
        )
    )


async def test_bad_input_and_unknown_links(client: TestClientProtocol, api: Api) -> None:
    with trio.fail_after(15):
        await page(api)
        bad = await subscribe(client, "not-an-address")
        assert bad.status_code == 422 and "Not an email address" in await bad.get_data(as_text=True)
        as_json = await client.post(
            "/status/acme-status/subscribe",
            form={"email": "x@"},
            headers={"Accept": "application/json"},
        )
        error = (await as_json.get_json())["error"]
        assert as_json.status_code == 422
        assert (error["type"], error["code"], error["param"]) == (
            "invalid_request_error",
            "invalid_email",
            "email",
        )
        assert (await subscribe(client, ADDRESS, "no-such-page")).status_code == 404
        assert (await client.get("/status/acme-status/confirm/" + "A" * 22)).status_code == 404
        assert (await client.post("/status/acme-status/confirm/bad!")).status_code == 404


async def test_limits_and_no_answer_tells_a_subscribed_address(
    client: TestClientProtocol, api: Api, db: Database
) -> None:
    with trio.fail_after(20):
        await page(api)
        await page(api, "other-page")
        for _ in range(4):
            assert (await subscribe(client, ADDRESS)).status_code == 202
        assert (await subscribe(client, ADDRESS, "other-page")).status_code == 202
        # the sixth request in a day is accepted alike, and sends nothing
        sixth = await subscribe(client, ADDRESS, "other-page")
        assert sixth.status_code == 202
        assert await db.run(_confirm_mails, ADDRESS) == 5
        # a confirmed address is answered like any other, and is sent nothing more
        fan = "fan@example.com"
        first = await subscribe(client, fan, "other-page")
        await db.run(_confirm_all)
        again = await subscribe(client, fan, "other-page")
        assert (first.status_code, again.status_code) == (202, 202)
        assert await first.get_data() == await again.get_data()
        assert await db.run(_confirm_mails, fan) == 1
        # the page's hourly limit: 100 confirmation mails, then 429 with Retry-After
        for n in range(100 - 4):
            assert (await subscribe(client, f"r{n}@example.com")).status_code == 202
        limited = await client.post(
            "/status/acme-status/subscribe",
            form={"email": "late@example.com"},
            headers={"Accept": "application/json"},
        )
        assert limited.status_code == 429 and limited.headers["Retry-After"] == "3600"
        assert (await limited.get_json())["error"]["code"] == "rate_limited"
        assert await db.run(_status, "late@example.com") is None
        # another page is not held back
        assert (await subscribe(client, "late@example.com", "other-page")).status_code == 202


async def _confirm_mails(connection: Any, address: str) -> int:
    return int(
        await connection.fetchval(
            "SELECT count(*) FROM page_mails WHERE email = $1 AND kind = 'confirm'", address
        )
    )


async def _confirm_all(connection: Any) -> None:
    await connection.execute("UPDATE page_subscribers SET status = 'confirmed'")


async def _confirmed(client: TestClientProtocol, found: Relay, address: str) -> None:
    """Subscribe ``address`` to ``acme-status`` and follow its confirmation link."""
    assert (await subscribe(client, address)).status_code == 202
    mail = (await mails(found, len(found.mails) + 1))[-1]
    assert (await client.post(link_of(mail), form={})).status_code == 200


async def test_incident_mails_carry_one_click_unsubscribe(
    client: TestClientProtocol, api: Api, db: Database
) -> None:
    with trio.fail_after(30):
        monitor = await page(api)
        async with mailer(db) as found:
            await _confirmed(client, found, ADDRESS)
            incident = expect(
                await api.post(
                    "/incidents",
                    json={
                        "title": "Slow checkout",
                        "description": "secret-description-77",
                        "monitors": [monitor],
                        "severity": "minor",
                    },
                ),
                201,
            )
            path = f"/incidents/{incident['id']}"
            body = {"message": "A fix is rolling out", "status": "monitoring"}
            expect(await api.post(path + "/updates", json=body), 201)
            resolution = {"resolution_message": "All good again"}
            expect(await api.post(path + "/resolve", json=resolution))
            got = {m["Subject"]: m for m in (await mails(found, 4))[1:]}  # sent concurrently
        created = got.pop("Acme: New incident: Slow checkout")
        updated = got.pop("Acme: Slow checkout")
        resolved = got.pop("Acme: Resolved: Slow checkout")
        texts = [m.get_body(("plain",)).get_content() for m in (created, updated, resolved)]
        assert "Status: Investigating" in texts[0] and "Affected: Website" in texts[0]
        assert "A fix is rolling out" in texts[1] and "Status: Monitoring" in texts[1]
        assert "All good again" in texts[2] and "Status: Resolved" in texts[2]
        for mail, text in zip((created, updated, resolved), texts, strict=True):
            whole = mail.as_string()
            assert "secret-description-77" not in whole and "secret-name-1" not in whole
            assert monitor not in whole
            lines = text.splitlines()
            assert f"The status page: {PUBLIC}/status/acme-status" in lines
            assert mail["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
            unsubscribe = mail["List-Unsubscribe"].strip("<>")
            assert unsubscribe.startswith(f"{PUBLIC}/status/acme-status/unsubscribe/")
            assert f"Unsubscribe: {unsubscribe}" in lines
        # RFC 8058: the mail client POSTs List-Unsubscribe=One-Click to the header's URL
        one_click = created["List-Unsubscribe"].strip("<>")
        path = urlsplit(one_click).path
        assert (await client.get(path)).status_code == 200  # a GET changes nothing
        assert await db.run(_status, ADDRESS) == "confirmed"
        done = await client.post(path, form={"List-Unsubscribe": "One-Click"})
        assert done.status_code == 200 and await db.run(_status, ADDRESS) is None
        assert (await client.post(path, form={"List-Unsubscribe": "One-Click"})).status_code == 200
        expect(await api.post("/incidents", json={"title": "Again", "monitors": [monitor]}), 201)
        assert await db.run(_notices) == 3
        # an incident on no monitor of the page mails no one
        other = (await create_monitor(api, name="elsewhere"))["id"]
        expect(await api.post("/incidents", json={"title": "Elsewhere", "monitors": [other]}), 201)
        assert await db.run(_notices) == 3


async def _notices(connection: Any) -> int:
    return int(await connection.fetchval("SELECT count(*) FROM page_mails WHERE kind = 'notice'"))


async def test_incidents_a_monitor_opens_and_resolves_are_told_by_display_name(
    client: TestClientProtocol, api: Api, db: Database
) -> None:
    with trio.fail_after(30):
        monitor = await page(api)
        async with mailer(db) as found:
            await _confirmed(client, found, ADDRESS)
            at = int(time.time()) - 600
            await move(db, monitor, "up", at)
            await move(db, monitor, "down", at + 60, "secret-error-42")
            await move(db, monitor, "up", at + 190)
            got = {m["Subject"]: m for m in (await mails(found, 3))[1:]}  # sent concurrently
        opened = got.pop("Acme: New incident: Website is down")
        resolved = got.pop("Acme: Resolved: Website is up again")
        text = resolved.get_body(("plain",)).get_content()
        assert "Website is up again after 2m 10s" in text.splitlines(), text
        for mail in (opened, resolved):
            whole = mail.as_string()
            assert "secret-name-1" not in whole and "secret-error-42" not in whole
            assert mail["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"


async def test_maintenance_scheduled_started_and_ended_are_mailed(
    client: TestClientProtocol, api: Api, db: Database
) -> None:
    with trio.fail_after(30):
        monitor = await page(api)
        start = int(time.time()) + 3600
        async with mailer(db) as found:
            await _confirmed(client, found, ADDRESS)
            window = {
                "title": "Database upgrade",
                "description": "Writes pause for a minute.",
                "monitors": [monitor],
                "starts_at": start,
                "ends_at": start + 1800,
            }
            expect(await api.post("/maintenance-windows", json=window), 201)
            await db.transaction(window_walk.walk_due, start, 10)
            await db.transaction(window_walk.walk_due, start + 1800, 10)
            got = {m["Subject"]: m for m in (await mails(found, 4))[1:]}  # sent concurrently
        scheduled = got.pop("Acme: Scheduled maintenance: Database upgrade")
        started = got.pop("Acme: Maintenance in progress: Database upgrade")
        ended = got.pop("Acme: Maintenance completed: Database upgrade")
        when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(start))
        text = scheduled.get_body(("plain",)).get_content()
        assert f"From {when}" in text and "Writes pause for a minute." in text
        assert "Affected: Website" in text and "secret-name-1" not in scheduled.as_string()
        assert "Maintenance in progress" in started.get_body(("plain",)).get_content()
        assert ended["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
