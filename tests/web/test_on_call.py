"""Members, notification channels and escalation policies through the API
(docs/alerts.md): secrets masked, references checked with the param that holds them, one
default policy, a policy in use kept, another account's ids 404, and the test message
sent to a real receiver on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import trio

from tests.api import Api
from tests.web.helpers import assert_error, create_monitor, expect

SECRET_URL = "http://127.0.0.1:9/hook/s3cr3tvalue"


async def _channel(api: Api, url: str = SECRET_URL) -> dict[str, Any]:
    body = {"name": "ops", "type": "webhook", "config": {"url": url}}
    return expect(await api.post("/notification-channels", json=body), 201)  # type: ignore[no-any-return]


def _policy(*targets: dict[str, str], default: bool = False) -> dict[str, Any]:
    return {
        "name": "p",
        "steps": [{"delay_seconds": 0, "targets": list(targets)}],
        "default": default,
    }


async def test_a_channel_secret_never_comes_back_and_a_patch_keeps_it(api: Api) -> None:
    with trio.fail_after(20):
        # a Slack incoming webhook's URL is its secret
        body = {"name": "chat", "type": "slack", "config": {"webhook_url": SECRET_URL}}
        channel = expect(await api.post("/notification-channels", json=body), 201)
        assert channel["config"] == {"webhook_url": "…alue"}
        renamed = expect(
            await api.patch(f"/notification-channels/{channel['id']}", json={"name": "x"})
        )
        listed = expect(await api.get("/notification-channels"))
        fetched = expect(await api.get(f"/notification-channels/{channel['id']}"))
        for shown in (channel, renamed, listed, fetched):
            assert "s3cr3t" not in str(shown)
        assert fetched["config"] == {"webhook_url": "…alue"}
        # a webhook channel's signing secret is made for it, and shown masked only
        hook = await _channel(api, "http://127.0.0.1:9/hook")
        assert hook["config"]["url"] == "http://127.0.0.1:9/hook"
        assert hook["config"]["secret"].startswith("…") and "whsec_" not in str(hook)


async def test_email_without_a_relay_is_refused(api: Api) -> None:
    with trio.fail_after(20):
        body = {"name": "mail", "type": "email", "config": {"address": "a@example.com"}}
        assert_error(
            await api.post("/notification-channels", json=body), 422, "smtp_not_configured"
        )


async def test_a_members_time_zone_must_be_a_zone_not_a_region(api: Api) -> None:
    with trio.fail_after(20):
        for zone in ("Mars/Olympus_Mons", "Europe", "../etc"):  # "Europe" is a directory
            body = {"name": "Ada", "email": "ada@example.com", "time_zone": zone}
            assert_error(
                await api.post("/members", json=body), 422, "invalid_time_zone", param="time_zone"
            )


async def test_policy_targets_must_exist_and_the_param_names_the_target(api: Api) -> None:
    with trio.fail_after(20):
        channel = await _channel(api)
        body = _policy(
            {"type": "channel", "id": channel["id"]}, {"type": "member", "id": "mbr_nope"}
        )
        response = await api.post("/escalation-policies", json=body)
        assert_error(response, 422, "unknown_member", param="steps[0].targets[1].id")
        member_body = {"name": "Ann", "contact_channels": [channel["id"], "nch_gone"]}
        assert_error(
            await api.post("/members", json=member_body),
            422,
            "unknown_channel",
            param="contact_channels[1]",
        )


async def test_one_default_policy_and_a_policy_in_use_is_kept(api: Api) -> None:
    with trio.fail_after(20):
        channel = await _channel(api)
        target = {"type": "channel", "id": channel["id"]}
        first = expect(
            await api.post("/escalation-policies", json=_policy(target, default=True)), 201
        )
        second = expect(
            await api.post("/escalation-policies", json=_policy(target, default=True)), 201
        )
        assert expect(await api.get(f"/escalation-policies/{first['id']}"))["default"] is False
        assert second["default"] is True
        await create_monitor(api, escalation_policy=first["id"])
        error = assert_error(
            await api.delete(f"/escalation-policies/{first['id']}"), 409, "policy_in_use"
        )
        assert error["type"] == "invalid_request_error"
        assert_error(await create_monitor_raw(api, "esc_unknown"), 422, "unknown_escalation_policy")


async def create_monitor_raw(api: Api, policy: str) -> tuple[int, Any, Any]:
    body = {"name": "w", "url": "https://example.com/", "type": "http", "escalation_policy": policy}
    return await api.post("/monitors", json=body)


async def test_another_accounts_ids_are_404(
    api: Api, api_for: Callable[..., Awaitable[Api]]
) -> None:
    with trio.fail_after(20):
        channel = await _channel(api)
        other = await api_for(account="other")
        assert_error(
            await other.get(f"/notification-channels/{channel['id']}"), 404, "resource_missing"
        )
        assert_error(
            await other.post(f"/notification-channels/{channel['id']}/test"),
            404,
            "resource_missing",
        )
        assert_error(
            await other.post("/members", json={"name": "B", "contact_channels": [channel["id"]]}),
            422,
            "unknown_channel",
        )


async def _receiver(status: int, task_status: Any) -> None:
    async def handle(stream: trio.SocketStream) -> None:
        data = b""
        while b"\r\n\r\n" not in data:
            data += await stream.receive_some(65536)
        head, _, body = data.partition(b"\r\n\r\n")
        length = int(
            next(
                line.split(b":")[1]
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length")
            )
        )
        while len(body) < length:
            body += await stream.receive_some(65536)
        await stream.send_all(
            f"HTTP/1.1 {status} X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".encode()
        )
        await stream.aclose()

    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    task_status.started(listeners[0].socket.getsockname()[1])
    await trio.serve_listeners(handle, listeners)


async def test_the_test_message_reports_the_receivers_answer(api: Api) -> None:
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            for status, outcome in ((200, "succeeded"), (500, "failed")):
                port = await nursery.start(_receiver, status)
                channel = await _channel(api, f"http://127.0.0.1:{port}/hook")
                attempt = expect(await api.post(f"/notification-channels/{channel['id']}/test"))
                assert attempt["object"] == "notification_attempt"
                assert attempt["status"] == outcome
                assert attempt["response_status"] == status
            nursery.cancel_scope.cancel()


async def test_a_repeated_walk_needs_a_step_that_waits(api: Api) -> None:
    """With every delay 0, each repeat would go out in the same instant as the first walk
    (docs/alerts.md, "Escalation policies and the walk")."""
    with trio.fail_after(20):
        target = {"type": "channel", "id": (await _channel(api))["id"]}
        burst = {**_policy(target), "repeat": 2}
        assert_error(
            await api.post("/escalation-policies", json=burst), 422, "invalid_value",
            param="repeat",
        )  # fmt: skip
        once = expect(await api.post("/escalation-policies", json=_policy(target)), 201)
        path = f"/escalation-policies/{once['id']}"
        assert_error(
            await api.patch(path, json={"repeat": 1}), 422, "invalid_value", param="repeat"
        )
        assert expect(await api.get(path))["repeat"] == 0  # nothing half-written
        waits = [{"delay_seconds": 300, "targets": [target]}]
        spaced = expect(await api.patch(path, json={"repeat": 1, "steps": waits}))
        assert (spaced["repeat"], spaced["steps"][0]["delay_seconds"]) == (1, 300)
        back = [{"delay_seconds": 0, "targets": [target]}]
        assert_error(
            await api.patch(path, json={"steps": back}), 422, "invalid_value", param="repeat"
        )
