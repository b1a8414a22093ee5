"""The one-click acknowledge link (docs/alerts.md, "Acknowledge links"): a GET shows the
alert and changes nothing, the form's POST acknowledges on behalf of the member (or
channel) the link was sent to, a dead or unknown link is a plain 404 page, and the page
shows nothing the message did not already say."""

from __future__ import annotations

import time
from typing import Any

import trio
from quart.typing import TestClientProtocol

from store import Database
from tests.api import Api
from tests.web.alert_helpers import (
    account_id,
    alert_row,
    insert_ack_token,
    insert_alert,
    insert_channel,
)
from tests.web.helpers import create_monitor, expect
from tests.web.test_status_public_hostile import down_client

__all__ = ["down_client"]  # the app on a database that is not there (a fixture)

SUMMARY = "Checkout API is down: connection refused"


MEMBER = "mbr_" + "m" * 24


async def _alert_with_link(
    db: Database, resource_id: str = "mon_" + "a" * 24, **fields: Any
) -> tuple[str, int, str, str]:
    """An alert of ``acme`` triggered 10 minutes ago and a link sent to :data:`MEMBER`:
    the account's id, the trigger time (epoch seconds), the alert's id and the token."""
    acme = await account_id(db)
    t = int(time.time()) - 600
    alert = await insert_alert(db, acme, resource_id, created=t, summary=SUMMARY, **fields)
    return acme, t, alert, await insert_ack_token(db, alert, created=t, member_id=MEMBER)


async def _open(client: TestClientProtocol, method: str, token: str) -> tuple[int, str, Any]:
    """``method`` on the link of ``token`` (a POST as the page's form sends it): the
    status, the page and the headers."""
    response = await client.open(f"/alerts/ack/{token}", method=method, form={})
    text = await response.get_data(as_text=True)
    return response.status_code, text, response.headers


async def test_get_shows_the_alert_and_changes_nothing(
    client: TestClientProtocol, api: Api, db: Database
) -> None:
    with trio.fail_after(15):
        _, t, alert, token = await _alert_with_link(db, severity="critical")
        for _ in range(2):  # a mail scanner, then the person
            status, page, headers = await _open(client, "GET", token)
            assert status == 200, page
            assert SUMMARY in page and "Critical" in page
            assert time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(t)) in page
            assert '<form method="post">' in page and "Acknowledge this alert?" in page
        assert headers["Content-Type"] == "text/html; charset=utf-8"
        assert headers["Cache-Control"] == "no-store"
        assert headers["Referrer-Policy"] == "no-referrer"
        csp = headers["Content-Security-Policy"]
        assert "script-src" not in csp and "default-src 'none'" in csp
        assert "form-action 'self'" in csp and "frame-ancestors 'none'" in csp
        assert await alert_row(db, alert, "status") == "triggered"
        assert await alert_row(db, alert, "acknowledged_at") is None
        assert await alert_row(db, alert, "next_step_at") is not None


async def test_post_acknowledges_for_the_member_or_channel_of_the_link(
    client: TestClientProtocol, api: Api, db: Database
) -> None:
    with trio.fail_after(15):
        acme, t, alert, token = await _alert_with_link(db)
        status, page, _ = await _open(client, "POST", token)
        assert status == 200 and "Acknowledged by you" in page and SUMMARY in page
        assert await alert_row(db, alert, "status") == "acknowledged"
        assert await alert_row(db, alert, "next_step_at") is None
        seen = expect(await api.get(f"/alerts/{alert}"))
        assert seen["acknowledged_by"] == {"type": "member", "id": MEMBER}
        assert seen["acknowledged_at"] >= t

        for method in ("POST", "GET"):  # a second click, or the page opened again
            status, page, _ = await _open(client, method, token)
            assert status == 200 and "Already acknowledged" in page, method
            assert "<form" not in page
        assert expect(await api.get(f"/alerts/{alert}")) == seen

        channel = await insert_channel(db, acme, created=t)
        other = await insert_alert(db, acme, "hbt_" + "b" * 24, created=t)
        link = await insert_ack_token(db, other, created=t, channel_id=channel)
        assert (await _open(client, "POST", link))[0] == 200
        acked = expect(await api.get(f"/alerts/{other}"))["acknowledged_by"]
        assert acked == {"type": "token", "id": channel}


async def test_a_dead_or_unknown_link_is_a_404_page(
    client: TestClientProtocol, api: Api, db: Database
) -> None:
    with trio.fail_after(15):
        _, _, alert, token = await _alert_with_link(db)
        assert (await _open(client, "GET", token))[0] == 200
        expect(await api.post(f"/alerts/{alert}/resolve"))  # the link dies with it
        unknown = "0" * 32
        for link in (token, unknown, "short", "x" * 200, "%00" * 20):
            for method in ("GET", "POST"):
                status, page, headers = await _open(client, method, link)
                assert status == 404, (link, method, page)
                assert "Acknowledge link not valid" in page and SUMMARY not in page
                assert headers["Cache-Control"] == "no-store"
        assert await alert_row(db, alert, "acknowledged_at") is None
        assert await alert_row(db, alert, "status") == "resolved"


async def test_the_page_shows_no_private_data(
    client: TestClientProtocol, api: Api, db: Database
) -> None:
    with trio.fail_after(15):
        monitor = await create_monitor(
            api, name="Checkout API", url="https://internal-host.example/health?key=s3cret",
            request_headers={"Authorization": "Bearer hdr-s3cret"},
        )  # fmt: skip
        acme, t, alert, token = await _alert_with_link(db, monitor["id"], severity="minor")
        channel = await insert_channel(db, acme, created=t)
        pages = [(await _open(client, "GET", token))[1], (await _open(client, "POST", token))[1]]
        for page in pages:
            assert SUMMARY in page and "Minor" in page
            for private in (
                "internal-host", "s3cret", "hdr-s3cret", "acme", acme, monitor["id"],
                alert, MEMBER, channel, "hooks.example.com", token,
            ):  # fmt: skip
                assert private not in page, private


async def test_with_the_database_down_the_page_is_a_503_not_a_500(
    down_client: TestClientProtocol,
) -> None:
    with trio.fail_after(30):
        for method in ("GET", "POST"):
            status, page, headers = await _open(down_client, method, "0" * 32)
            assert status == 503 and headers["Retry-After"] == "5", (method, page)
            assert "Temporarily unavailable" in page
            assert headers["Cache-Control"] == "no-store"
