"""An alert's whole story through the real service tree, as a user lives it (docs/alerts.md;
README, "From nothing to an alert"): a member with an email contact channel, a Slack
channel, a policy telling the member at once and the channel a few seconds later, a
monitor with a secret request header on a local HTTP target; the target fails, the mail
and then the Slack escalation arrive, the acknowledge link is opened and pressed, the walk
stops, the target comes back and the resolution notices arrive. Then, in the same service,
a policy pages an on-call schedule and each step reaches whoever is on call when it runs
(``tests/ops/schedule_story.py``).

Everything is real and on 127.0.0.1: ``web.process.service.open_service`` runs store,
engine, notifier, escalation walker and web server on the test's database; the mail relay
is aiosmtpd (https://aiosmtpd.aio-libs.org/) served on the trio-asyncio loop the database
already runs on; the Slack stand-in is ``tests.receiver.Receiver`` behind
``--provider-base slack=…`` (``NotifierSettings.provider_bases``), and it checks each body
against Slack's incoming-webhook shape (https://api.slack.com/messaging/webhooks: ``text``
and Block Kit ``blocks``).
"""

from __future__ import annotations

import asyncio
import email
import email.policy
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from email.message import EmailMessage
from typing import Any

import httpx
import trio
import trio_asyncio
from aiosmtpd.smtp import SMTP

from engine import Apply, EngineSettings, NotifierSettings
from store import Connection, Database, StoreSettings
from tests.api import SECRET, mint_token
from tests.ops.helpers import ACK_LINK, create, settled_notifications, until, wait_monitor
from tests.ops.schedule_story import schedule_story
from tests.receiver import Receiver
from tests.targets import open_http_target
from web.http.deps import Dependencies, PingVerb, WebSettings
from web.process.service import ServiceSettings, WebOptions, open_service

HEADER_SECRET = "hdr-s3cret-7f1e9c"
"""The value of the monitor's request header: it must reach the target and no message."""
SLACK_HOOK = "https://hooks.slack.com/services/T0001/B0001/abcdEFGH1234"
"""The Slack channel's webhook url: its path is kept under the provider base."""
STEP_1_DELAY = 3
"""Seconds from the member's page to the Slack escalation (and from the reminder to the
next one): long enough to acknowledge in between on a loaded machine."""


@dataclass
class MailSink:
    """An aiosmtpd handler keeping every message it accepts, parsed."""

    port: int = 0
    mails: list[EmailMessage] = field(default_factory=list)
    raw: list[bytes] = field(default_factory=list)

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.raw.append(envelope.original_content)
        parsed = email.message_from_bytes(envelope.original_content, policy=email.policy.default)
        assert isinstance(parsed, EmailMessage)
        self.mails.append(parsed)
        return "250 Message accepted"


@asynccontextmanager
async def mail_sink() -> AsyncIterator[MailSink]:
    """An SMTP relay on 127.0.0.1 (no TLS, no login) on the current trio-asyncio loop."""
    sink = MailSink()

    async def start() -> asyncio.AbstractServer:
        loop = asyncio.get_running_loop()
        return await loop.create_server(
            lambda: SMTP(sink, hostname="localhost"), host="127.0.0.1", port=0
        )

    server = await trio_asyncio.aio_as_trio(start)()
    sink.port = server.sockets[0].getsockname()[1]
    try:
        yield sink
    finally:
        server.close()
        await trio_asyncio.aio_as_trio(server.wait_closed)()


def parts(mail: EmailMessage) -> tuple[str, str]:
    """The plain-text and the HTML body of ``mail``."""
    plain, html = mail.get_body(("plain",)), mail.get_body(("html",))
    assert plain is not None and html is not None, mail
    return str(plain.get_content()), str(html.get_content())


def ack_link(mail: EmailMessage) -> str:
    """The one acknowledge link of ``mail``, the same in both parts."""
    plain, html = parts(mail)
    in_plain, in_html = set(ACK_LINK.findall(plain)), set(ACK_LINK.findall(html))
    assert len(in_plain) == 1 and in_plain == in_html, (in_plain, in_html)
    assert f'href="{next(iter(in_html))}"' in html
    return in_plain.pop()


def slack_body(body: bytes) -> dict[str, Any]:
    """A Slack incoming-webhook body, checked against the documented shape."""
    message = json.loads(body)
    assert isinstance(message, dict) and set(message) <= {"text", "blocks"}, message
    assert isinstance(message["text"], str) and message["text"]
    assert isinstance(message["blocks"], list) and 1 <= len(message["blocks"]) <= 50
    for block in message["blocks"]:
        assert block["type"] in {"header", "section", "actions", "context", "divider"}, block
        if block["type"] == "header":
            assert block["text"]["type"] == "plain_text" and len(block["text"]["text"]) <= 150
        if block["type"] == "section":
            assert "text" in block or "fields" in block, block
            assert len(block.get("fields", [])) <= 10
        if block["type"] == "actions":
            for element in block["elements"]:
                assert element["type"] == "button" and element["text"]["type"] == "plain_text"
    return message


def slack_buttons(message: dict[str, Any]) -> list[str]:
    """The urls of a Slack message's buttons."""
    return [
        element["url"]
        for block in message["blocks"]
        if block["type"] == "actions"
        for element in block["elements"]
    ]


async def test_an_alert_pages_escalates_is_acknowledged_and_resolves(
    db: Database, nursery: trio.Nursery
) -> None:
    with trio.fail_after(40):
        slack, hooks = Receiver(), Receiver()
        await nursery.start(slack.serve)
        await nursery.start(hooks.serve)
        _, token = await mint_token(db, "acme")
        async with (
            mail_sink() as sink,
            open_http_target() as target,
            open_http_target() as billing,
        ):
            notifier = NotifierSettings(
                smtp_url=f"smtp://127.0.0.1:{sink.port}",
                smtp_from="uptrio@127.0.0.1",
                provider_bases={"slack": f"http://127.0.0.1:{slack.port}"},
                retry_base_seconds=0.2,
                poll_seconds=0.05,
            )
            settings = ServiceSettings(
                engine=EngineSettings(shard_count=2),
                store=StoreSettings(batch_age_seconds=0.05),
                webhooks=None,
                notifier=notifier,
                maintenance=None,
                shutdown_seconds=5,
            )

            def make_deps(apply: Apply, ping: PingVerb) -> Dependencies:
                return Dependencies(
                    db=db,
                    apply=apply,
                    ping=ping,
                    jwt_secret=SECRET,
                    settings=WebSettings(),
                    channels=notifier.channel_settings(settings.target_policy),
                )

            web = WebOptions(bind=["127.0.0.1:0"], make_deps=make_deps)
            async with open_service(db, settings, web=web) as service:
                base = service.binds[0]
                headers = {"Authorization": f"Bearer {token}"}
                async with (
                    httpx.AsyncClient(base_url=base, headers=headers, timeout=10) as api,
                    httpx.AsyncClient(timeout=10) as browser,  # no token: the link is it
                ):
                    await _story(api, browser, db, sink, slack, target)
                    await schedule_story(api, browser, hooks, billing)


async def _story(
    api: httpx.AsyncClient,
    browser: httpx.AsyncClient,
    db: Database,
    sink: MailSink,
    slack: Receiver,
    target: Any,
) -> None:
    mail_channel = await create(
        api,
        "/notification-channels",
        {"name": "Ada by mail", "type": "email", "config": {"address": "ada@example.com"}},
    )
    chat = await create(
        api,
        "/notification-channels",
        {"name": "ops chat", "type": "slack", "config": {"webhook_url": SLACK_HOOK}},
    )
    assert chat["config"] == {"webhook_url": "…1234"}  # write-only secret, read back masked
    ada = await create(
        api,
        "/members",
        {"name": "Ada", "email": "ada@example.com", "contact_channels": [mail_channel["id"]]},
    )
    policy = await create(
        api,
        "/escalation-policies",
        {
            "name": "web on-call",
            "repeat": 1,
            "steps": [
                {"delay_seconds": 0, "targets": [{"type": "member", "id": ada["id"]}]},
                {
                    "delay_seconds": STEP_1_DELAY,
                    "targets": [{"type": "channel", "id": chat["id"]}],
                },
            ],
        },
    )
    monitor = await create(
        api,
        "/monitors",
        {
            "name": "checkout api",
            "url": target.url("/health"),
            "type": "http",
            "interval_seconds": 1,
            "timeout_seconds": 1,
            "failure_threshold": 1,
            "request_headers": {"X-Api-Key": HEADER_SECRET},
            "escalation_policy": policy["id"],
        },
    )
    await wait_monitor(api, monitor["id"], "up")
    assert target.requests[-1].headers["x-api-key"] == HEADER_SECRET  # it is in use

    # the target fails: the member is paged by mail at once
    await target.set_mode("error")
    await until(lambda: len(sink.mails) >= 1, "the trigger mail")
    trigger = sink.mails[0]
    assert trigger["To"] == "ada@example.com" and trigger["From"] == "uptrio@127.0.0.1"
    assert trigger["Subject"] == "[DOWN] checkout api"  # short: what is down
    plain, html = parts(trigger)
    link = ack_link(trigger)
    assert "checkout api is down" in plain and "checkout api is down" in html
    alerts = (await api.get("/alerts", params={"monitor": monitor["id"]})).json()["data"]
    assert len(alerts) == 1
    alert = alerts[0]
    assert alert["status"] == "triggered" and alert["escalation_policy"] == policy["id"]
    assert alert["summary"].startswith("checkout api is down: ")
    assert len(slack.received) == 0  # step 1 waits its delay

    # step 1: the Slack channel, then step 0 again (repeat 1, its delay 0): a reminder
    received = await slack.wait_for(1)
    assert received[0].path == "/services/T0001/B0001/abcdEFGH1234"  # under the base
    assert received[0].headers["content-type"].startswith("application/json")
    escalation = slack_body(received[0].body)
    assert "checkout api" in escalation["text"]
    (chat_link,) = slack_buttons(escalation)
    assert ACK_LINK.fullmatch(chat_link) and chat_link != link  # one token per recipient
    await until(lambda: len(sink.mails) >= 2, "the reminder mail")
    reminder_link = ack_link(sink.mails[1])
    assert reminder_link not in (link, chat_link)

    # the link: GET shows the page and changes nothing, POST acknowledges
    page = await browser.get(link)
    assert page.status_code == 200 and page.headers["cache-control"] == "no-store"
    assert "checkout api is down" in page.text and "<form" in page.text
    assert target.url("/health") not in page.text  # only what the message said
    assert (await api.get(f"/alerts/{alert['id']}")).json()["status"] == "triggered"
    pressed = await browser.post(link)
    assert pressed.status_code == 200, pressed.text
    acknowledged = (await api.get(f"/alerts/{alert['id']}")).json()
    assert acknowledged["status"] == "acknowledged"
    assert acknowledged["acknowledged_by"] == {"type": "member", "id": ada["id"]}
    assert acknowledged["acknowledged_at"] is not None

    # the walk stopped: the reminder's step 1 would have come STEP_1_DELAY after it
    await trio.sleep(STEP_1_DELAY + 1)
    assert len(sink.mails) == 2 and len(slack.received) == 1

    # the target comes back: the alert resolves, both channels get the notice
    await target.set_mode("ok")
    await wait_monitor(api, monitor["id"], "up")
    await until(lambda: len(sink.mails) >= 3, "the resolution mail")
    resolved_mail = sink.mails[2]
    assert resolved_mail["Subject"].startswith("[RESOLVED]")
    assert "checkout api" in resolved_mail["Subject"] and len(resolved_mail["Subject"]) <= 78
    assert not any(ACK_LINK.search(text) for text in parts(resolved_mail))  # its link is dead
    received = await slack.wait_for(2)
    resolved_chat = slack_body(received[1].body)
    assert slack_buttons(resolved_chat) == []
    final = (await api.get(f"/alerts/{alert['id']}")).json()
    assert final["status"] == "resolved" and final["resolved_at"] is not None
    assert final["acknowledged_by"] == {"type": "member", "id": ada["id"]}
    assert (await browser.get(link)).status_code == 404  # dead once resolved

    # every message of the alert, with its attempt
    notifications = await settled_notifications(api, alert["id"])
    told = [(n["kind"], n["channel"], n["member"], n["step"]) for n in notifications]
    assert told[:3] == [
        ("trigger", mail_channel["id"], ada["id"], 0),
        ("escalation", chat["id"], None, 1),
        ("reminder", mail_channel["id"], ada["id"], 0),
    ]
    assert sorted(told[3:]) == sorted(
        [("resolved", mail_channel["id"], ada["id"], None), ("resolved", chat["id"], None, None)]
    ), told
    for n in notifications:
        assert n["object"] == "notification" and n["alert"] == alert["id"]
        assert n["status"] == "succeeded" and n["attempts"] == 1, n
        (attempt,) = n["attempt_history"]
        assert attempt["object"] == "notification_attempt" and attempt["status"] == "succeeded"
        assert n["last_attempt"] == attempt and n["next_attempt_at"] is None
    shown = json.dumps(notifications)
    assert all(t.rsplit("/", 1)[1] not in shown for t in (link, chat_link, reminder_link))

    # the alert's changes are events, in the store and in GET /events
    stored = await db.run(_event_types, alert["id"])
    assert stored == {
        "alert.triggered",
        "alert.escalated",
        "alert.acknowledged",
        "alert.resolved",
    }
    listed = (await api.get("/events", params={"type": "alert.*", "limit": 100})).json()
    assert {e["type"] for e in listed["data"]} == stored
    assert {e["data"]["object"]["id"] for e in listed["data"]} == {alert["id"]}

    # the monitor's secret header is in no message, page or record shown
    everything = [
        *sink.raw,
        *(r.body for r in slack.received),
        page.content,
        pressed.content,
        shown.encode(),
        json.dumps(final).encode(),
    ]
    assert not [m for m in everything if HEADER_SECRET.encode() in m]


async def _event_types(connection: Connection, alert_id: str) -> set[str]:
    """The types of the events written about ``alert_id`` (asyncio side)."""
    rows = await connection.fetch("SELECT type FROM events WHERE resource_id = $1", alert_id)
    return {str(r["type"]) for r in rows}
