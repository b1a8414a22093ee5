"""Escalation to an on-call schedule through the real service tree (docs/alerts.md,
Escalation policies and the walk; docs/on-call.md; README, Alerts and on-call): the second
half of ``tests/ops/test_alert_story.py``, run in the same service so that the suite
starts one service for both.

Ann, Bob and Cid each have a webhook channel on one local receiver, told apart by path
(``/ann``, ``/bob``, ``/cid``). A weekly rotation of the three in Berlin handed off a day
ago has Ann on call now and Bob next week. A policy pages the schedule at once and again
``STEP_1_DELAY`` seconds later. The monitor goes down: step 0 pages Ann; an override then
puts Bob on call for ten minutes, and step 1 pages Bob, not Ann: a schedule target is
resolved when its step runs, not when the alert was raised. Ann, whose shift resumes when
the override ends, is reminded of it (docs/on-call.md, "Shift reminders"). Each body is
checked against the webhook channel's documented shape (``engine/channels/_webhook.py``;
docs/alerts.md, What each provider receives) and its signature against the channel's secret
(docs/webhooks.md).
"""

from __future__ import annotations

import json
import time
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import httpx

from engine.signing import sign
from tests.ops.helpers import (
    ACK_LINK,
    create,
    settled_notifications,
    until,
    wait_monitor,
)
from tests.receiver import Received, Receiver, signatures

__all__ = ["schedule_story"]

STEP_1_DELAY = 6
"""Seconds from step 0 to step 1: time enough to add the override in between on a loaded
machine."""
HOOK_SECRET = "whsec_schedule-story-0123456789abcdefghijklmnop"
"""The signing secret of the three webhook channels (given, so the test can verify)."""
WEEK = 7 * 86_400
ZONE = "Europe/Berlin"


def _hook_body(request: Received, kind: str, alert: dict[str, Any], channel: str) -> str | None:
    """Check one webhook-channel request: signed with ``HOOK_SECRET``, a ``notification``
    of ``kind`` about ``alert`` sent on ``channel``; its ``ack_url`` (None once resolved)."""
    assert request.headers["content-type"].startswith("application/json")
    timestamp, sent = signatures(request.headers["uptrio-signature"])
    assert sign(HOOK_SECRET, timestamp, request.body) in sent
    body = json.loads(request.body)
    assert body["object"] == "notification" and body["kind"] == kind, body
    assert body["channel"] == channel
    assert body["alert"]["object"] == "alert" and body["alert"]["id"] == alert["id"]
    assert body["alert"]["monitor"] == alert["monitor"]
    assert body["alert"]["summary"] == alert["summary"]
    assert body["resource"]["id"] == alert["monitor"]
    ack_url: str | None = body["ack_url"]
    assert ack_url is None or ACK_LINK.fullmatch(ack_url), ack_url
    return ack_url


def _reminder(
    request: Received, channel: str, member: str, schedule: dict[str, Any], start: int
) -> None:
    """Check a shift reminder (docs/on-call.md, "Shift reminders"): signed, no alert and
    no link, the ``shift`` of ``member`` in ``schedule`` starting at ``start``."""
    timestamp, sent = signatures(request.headers["uptrio-signature"])
    assert sign(HOOK_SECRET, timestamp, request.body) in sent
    body = json.loads(request.body)
    assert body["channel"] == channel and body["alert"] is None and body["ack_url"] is None
    assert body["resource"] == {"id": schedule["id"], "name": schedule["name"], "url": None}
    shift = body["shift"]
    assert (shift["schedule"], shift["member"], shift["start"]) == (schedule["id"], member, start)
    assert start < shift["end"] <= start + WEEK and shift["time_zone"] == ZONE


async def _on_call(api: httpx.AsyncClient, schedule_id: str, at: int | None = None) -> list[str]:
    """The ids of the members on call in the schedule at ``at`` (epoch seconds; None: now)."""
    params = {} if at is None else {"at": at}
    answer = await api.get(f"/schedules/{schedule_id}/on-call", params=params)
    assert answer.status_code == 200, answer.text
    return [m["id"] for m in answer.json()["members"]]


async def schedule_story(
    api: httpx.AsyncClient, browser: httpx.AsyncClient, hooks: Receiver, target: Any
) -> None:
    """The story of the module docstring; ``target`` a local HTTP target that is up,
    ``hooks`` a receiver that has received nothing yet."""
    channels, members = {}, {}
    for name in ("ann", "bob", "cid"):
        config = {"url": f"http://127.0.0.1:{hooks.port}/{name}", "secret": HOOK_SECRET}
        channel = await create(
            api, "/notification-channels", {"name": name, "type": "webhook", "config": config}
        )
        channels[name] = channel["id"]
        member = {"name": name.title(), "contact_channels": [channel["id"]]}
        members[name] = (await create(api, "/members", member))["id"]
    # handed off a day ago at this wall time: Ann's week now, Bob's next
    handoff = (datetime.now(ZoneInfo(ZONE)) - timedelta(days=1)).strftime("%Y-%m-%dT%H:%M")
    layer = {
        "name": "weekly",
        "members": [members["ann"], members["bob"], members["cid"]],
        "rotation": {"type": "weekly", "handoff": handoff},
    }
    schedule = await create(
        api, "/schedules", {"name": "billing", "time_zone": ZONE, "layers": [layer]}
    )
    assert await _on_call(api, schedule["id"]) == [members["ann"]]
    assert await _on_call(api, schedule["id"], int(time.time()) + WEEK) == [members["bob"]]
    target_schedule = [{"type": "schedule", "id": schedule["id"]}]
    policy = await create(
        api,
        "/escalation-policies",
        {
            "name": "billing on-call",
            "steps": [
                {"delay_seconds": 0, "targets": target_schedule},
                {"delay_seconds": STEP_1_DELAY, "targets": target_schedule},
            ],
        },
    )
    monitor = await create(
        api,
        "/monitors",
        {
            "name": "billing api",
            "url": target.url("/health"),
            "type": "http",
            "interval_seconds": 1,
            "timeout_seconds": 1,
            "failure_threshold": 1,
            "escalation_policy": policy["id"],
        },
    )
    await wait_monitor(api, monitor["id"], "up")

    # down: step 0 pages Ann, on call in the rotation
    await target.set_mode("error")
    await hooks.wait_for(1)
    [alert] = (await api.get("/alerts", params={"monitor": monitor["id"]})).json()["data"]
    assert alert["escalation_policy"] == policy["id"]
    page = hooks.received[0]
    assert page.path == "/ann"
    ann_link = _hook_body(page, "trigger", alert, channels["ann"])
    assert ann_link is not None

    # between the steps, an override puts Bob on call for ten minutes
    now = int(time.time())
    override = {"member": members["bob"], "start": now, "end": now + 600}
    await create(api, f"/schedules/{schedule['id']}/overrides", override)
    assert await _on_call(api, schedule["id"]) == [members["bob"]]
    # step 1 waits its delay: not walked yet (else the machine lagged the story by more
    # than STEP_1_DELAY, and the override came too late to prove anything)
    current = (await api.get(f"/alerts/{alert['id']}")).json()
    assert current["escalation_step"] == 0, current

    # step 1 runs in Bob's override: Bob is paged, not Ann who was on call at the trigger;
    # and Ann, whose shift resumes when the override ends in ten minutes, is reminded
    await hooks.wait_for(3)
    later = {json.loads(r.body)["kind"]: r for r in hooks.received[1:3]}
    assert set(later) == {"escalation", "shift_starting"}, [r.path for r in hooks.received]
    page = later["escalation"]
    assert page.path == "/bob"
    bob_link = _hook_body(page, "escalation", alert, channels["bob"])
    assert bob_link is not None and bob_link != ann_link
    assert json.loads(page.body)["alert"]["escalation_step"] == 1
    _reminder(later["shift_starting"], channels["ann"], members["ann"], schedule, now + 600)

    # Bob's link acknowledges as Bob
    pressed = await browser.post(bob_link)
    assert pressed.status_code == 200, pressed.text
    acknowledged = (await api.get(f"/alerts/{alert['id']}")).json()
    assert acknowledged["acknowledged_by"] == {"type": "member", "id": members["bob"]}

    # back up: both who were told get the resolution, without a link
    await target.set_mode("ok")
    await until(lambda: len(hooks.received) >= 5, "the resolution notices")
    resolved = {r.path: r for r in hooks.received[3:]}
    assert set(resolved) == {"/ann", "/bob"}, [r.path for r in hooks.received]
    for name in ("ann", "bob"):
        assert _hook_body(resolved[f"/{name}"], "resolved", alert, channels[name]) is None
    notifications = await settled_notifications(api, alert["id"])
    told = [(n["kind"], n["channel"], n["member"], n["step"]) for n in notifications]
    assert told[:2] == [
        ("trigger", channels["ann"], members["ann"], 0),
        ("escalation", channels["bob"], members["bob"], 1),
    ]
    assert sorted(told[2:]) == sorted(
        ("resolved", channels[name], members[name], None) for name in ("ann", "bob")
    )
    assert all(n["status"] == "succeeded" for n in notifications), notifications
    assert not [r for r in hooks.received if r.path == "/cid"]
