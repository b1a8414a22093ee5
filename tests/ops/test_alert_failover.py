"""An escalation walk survives a node's SIGKILL (docs/alerts.md, Escalation policies and
the walk, The outbox and retries; docs/several-nodes.md): two real ``uptrio serve``
processes on one Postgres (the fixture of ``tests/ops/test_nodes.py``: 2 s leases), a
monitor (http, every second, ``failure_threshold`` 1) on a local target the test makes
fail, and a policy of three steps (0 s, then 5 s, then 3 s), each step telling its own
``webhook`` channel: a receiver on 127.0.0.1 started by the test, one path per step,
that records every request. A webhook message carries its acknowledge link, whose base
is the sending node's address, so the receiver tells which node sent each message.

- Killed between two steps: once step 0 is recorded as sent, the node that raised the
  alert (the monitor's owner, whose batch walked step 0) is SIGKILLed with no send in
  flight. The survivor walks steps 1 and 2 (each arrives once, sent by the survivor),
  raises no second alert when it takes the monitor over, and resolves the alert when the
  target answers again (one resolution notice per channel); every message is recorded
  as sent at the first attempt.
- Killed mid-send: the node sending step 1 is SIGKILLed while the receiver holds the
  request unanswered (the provider got the message; the node never learned it). The
  claim lapses and the survivor sends step 1 again: the outbox is at least once, and this
  is the duplicate it allows (same notification, same acknowledge token; one recorded
  attempt, the killed one never recorded). The claim's lease (60 s, no flag) is made to
  lapse by moving the row's due time to now in SQL, as the passing of that time would.

Loopback only.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import trio

from store import Database, accounts, leases
from tests.ops.test_nodes import _BASES, _two_nodes
from tests.ops.test_nodes_notify import _client
from tests.receiver import HANG, Received, Receiver
from tests.targets import HttpTarget

_DELAYS = (0, 5, 3)
"""Each step's delay, seconds: step 1 is due 5 s after step 0, time enough (on a loaded
machine) for step 0 to be sent and recorded before the kill."""


@dataclass(frozen=True, slots=True)
class _Message:
    """One request the receiver got: its path (``/s<step>``), kind, step, the node whose
    acknowledge link it carries (None: no link), the link's token, and when it was sent
    (``sent_at``, epoch seconds)."""

    path: str
    kind: str
    step: int | None
    node: str | None
    token: str | None
    sent_at: int


def _read(received: Received) -> _Message:
    body = json.loads(received.body)
    link = body["ack_url"]
    node = None
    if link is not None:
        (node,) = [name for name, base in _BASES.items() if link.startswith(base + "/")]
    return _Message(
        path=received.path,
        kind=body["kind"],
        step=body["alert"]["escalation_step"],
        node=node,
        token=None if link is None else link.rsplit("/", 1)[1],
        sent_at=body["sent_at"],
    )


@dataclass(slots=True)
class _Paged:
    """Two nodes and a monitor paged through three webhook channels (module docstring),
    whose alert is raised and its step 0 sent and recorded."""

    db: Database
    nodes: dict[str, trio.Process]
    target: HttpTarget
    receiver: Receiver
    http: httpx.AsyncClient
    monitor_id: str
    channels: list[str]
    alert_id: str = ""

    async def through(self, node: str) -> None:
        """Make the API calls through ``node`` from now on."""
        await self.http.aclose()
        self.http = await _client(self.db, node)

    async def kill(self, node: str) -> str:
        """SIGKILL ``node`` (API calls then go through the other); the other's name."""
        (survivor,) = set(self.nodes) - {node}
        await self.through(survivor)
        self.nodes[node].kill()
        await self.nodes[node].wait()
        return survivor

    async def alerts(self) -> list[dict[str, Any]]:
        """The monitor's alerts, newest first."""
        page = await self.http.get("/alerts", params={"monitor": self.monitor_id})
        assert page.status_code == 200, page.text
        return page.json()["data"]  # type: ignore[no-any-return]

    async def alert(self) -> dict[str, Any]:
        """The monitor's one alert, once raised."""
        while not (found := await self.alerts()):
            await trio.sleep(0.1)
        (alert,) = found
        return alert

    async def notifications(self) -> list[dict[str, Any]]:
        """Every message of the alert, oldest first, with its attempts."""
        page = await self.http.get(f"/alerts/{self.alert_id}/notifications")
        assert page.status_code == 200, page.text
        return page.json()["data"]  # type: ignore[no-any-return]

    async def settled(self, count: int) -> list[dict[str, Any]]:
        """The alert's messages once there are ``count`` and none is pending (more than
        ``count`` fails at once: a step written twice)."""
        while True:
            found = await self.notifications()
            assert len(found) <= count, found
            if len(found) == count and all(n["status"] != "pending" for n in found):
                return found
            await trio.sleep(0.1)

    async def arrived(self, path: str, count: int) -> list[_Message]:
        """The messages to ``path`` once ``count`` arrived there (more may follow)."""
        received = self.receiver.received
        while len(found := [m for m in map(_read, received) if m.path == path]) < count:
            await self.receiver.wait_for(len(received) + 1)
        return found


@asynccontextmanager
async def _paged(
    tmp_path: Path, database_url: str, db: Database, nursery: trio.Nursery
) -> AsyncIterator[_Paged]:
    """Account ``default``, nodes ``a`` and ``b`` holding 128 buckets each, and through
    ``a``: three webhook channels (``/s0``, ``/s1``, ``/s2`` on the receiver), the policy
    of :data:`_DELAYS` (step i tells channel i), and the monitor of the target using it;
    then the target fails. Yields once the alert is raised and its step 0 sent and
    recorded."""
    target, receiver = HttpTarget(), Receiver()
    await nursery.start(target.run)
    await nursery.start(receiver.serve)
    await db.transaction(
        accounts.create_first_token, "default", ["monitors.read"], now=1, current_version="v1"
    )
    async with _two_nodes(tmp_path, database_url, db) as (a, b):
        http = await _client(db, "a")
        paged: _Paged | None = None
        try:
            with trio.fail_after(30):
                channels = []
                for step in range(len(_DELAYS)):
                    url = f"http://127.0.0.1:{receiver.port}/s{step}"
                    made = await http.post(
                        "/notification-channels",
                        json={"name": f"step {step}", "type": "webhook", "config": {"url": url}},
                    )
                    assert made.status_code == 201, made.text
                    channels.append(made.json()["id"])
                steps = [
                    {"delay_seconds": delay, "targets": [{"type": "channel", "id": channel}]}
                    for delay, channel in zip(_DELAYS, channels, strict=True)
                ]
                policy = await http.post(
                    "/escalation-policies", json={"name": "ops", "steps": steps}
                )
                assert policy.status_code == 201, policy.text
                monitor = await http.post(
                    "/monitors",
                    json={
                        "name": "web",
                        "url": target.url("/"),
                        "type": "http",
                        "interval_seconds": 1,
                        "timeout_seconds": 1,
                        "failure_threshold": 1,
                        "escalation_policy": policy.json()["id"],
                    },
                )
                assert monitor.status_code == 201, monitor.text
                paged = _Paged(
                    db, {"a": a, "b": b}, target, receiver, http, monitor.json()["id"], channels
                )
                await target.set_mode("error")
                paged.alert_id = (await paged.alert())["id"]
                (sent,) = await paged.settled(1)
                assert (sent["step"], sent["status"]) == (0, "succeeded")
            yield paged
        finally:
            await (http if paged is None else paged.http).aclose()


async def _owner(db: Database, resource_id: str) -> str:
    """The node holding ``resource_id``'s bucket now."""

    async def fetch(connection: Any) -> str:
        return str(
            await connection.fetchval(
                "SELECT node FROM bucket_leases WHERE bucket = $1 AND expires_at > now()",
                leases.bucket_of(resource_id),
            )
        )

    return await db.run(fetch)


async def test_a_node_killed_between_two_steps_loses_and_repeats_none(
    tmp_path: Path, database_url: str, db: Database, nursery: trio.Nursery
) -> None:
    async with _paged(tmp_path, database_url, db, nursery) as paged:
        with trio.fail_after(60):
            killed = await _owner(db, paged.monitor_id)  # its batch raised and walked step 0
            # mid-escalation: step 1 not walked yet, nothing in flight
            assert (await paged.alert())["escalation_step"] == 0
            survivor = await paged.kill(killed)

            await paged.arrived("/s2", 1)  # the survivor walked steps 1 and 2
            await paged.settled(3)
            await paged.target.set_mode("ok")  # up: the alert resolves, every channel is told
            while (await paged.alert())["status"] != "resolved":
                await trio.sleep(0.1)
            done = await paged.settled(6)
            await trio.sleep(1.0)  # time for a duplicate to show

            messages = [_read(r) for r in paged.receiver.received]
            assert sorted((m.path, m.kind, m.step) for m in messages) == [
                ("/s0", "resolved", None),
                ("/s0", "trigger", 0),
                ("/s1", "escalation", 1),
                ("/s1", "resolved", None),
                ("/s2", "escalation", 2),
                ("/s2", "resolved", None),
            ], messages
            assert all(m.node == survivor for m in messages if m.step in (1, 2)), messages
            # and not early: each step its delay after the one before (the first's trigger)
            due = (await paged.alert())["triggered_at"]
            for step, delay in enumerate(_DELAYS):
                due += delay
                (sent,) = [m for m in messages if m.step == step]
                assert sent.sent_at >= due, (step, sent, due)
            assert len(await paged.alerts()) == 1  # the takeover raised no second alert
            kinds = ["trigger", "escalation", "escalation"]
            assert [(n["channel"], n["kind"], n["step"]) for n in done[:3]] == [
                (channel, kind, step)
                for step, (channel, kind) in enumerate(zip(paged.channels, kinds, strict=True))
            ]
            assert sorted(n["channel"] for n in done[3:]) == sorted(paged.channels)
            for n in done:
                assert (n["status"], n["attempts"]) == ("succeeded", 1), n
                assert [a["status"] for a in n["attempt_history"]] == ["succeeded"], n


async def test_a_node_killed_mid_send_is_sent_again_by_the_survivor(
    tmp_path: Path, database_url: str, db: Database, nursery: trio.Nursery
) -> None:
    async with _paged(tmp_path, database_url, db, nursery) as paged:
        with trio.fail_after(60):
            paged.receiver.script = [HANG]  # step 1's request is held, never answered
            (held,) = await paged.arrived("/s1", 1)
            assert held.node is not None
            killed = held.node
            survivor = await paged.kill(killed)  # the provider got step 1; its sender never knew
            (claimed,) = [n for n in await paged.notifications() if n["step"] == 1]
            assert (claimed["status"], claimed["attempts"]) == ("pending", 0)
            # the claim's lease (60 s) lapses: what the passing of that time would do
            await db.run(_lapse, claimed["id"])

            again = await paged.arrived("/s1", 2)
            await paged.arrived("/s2", 1)
            done = await paged.settled(3)
            await trio.sleep(1.0)  # time for another duplicate to show

            # at least once: the message the killed node sent is sent again, the same one
            assert [(m.kind, m.step, m.node) for m in again] == [
                ("escalation", 1, killed),
                ("escalation", 1, survivor),
            ]
            assert again[0].token == again[1].token
            paths = sorted(m.path for m in map(_read, paged.receiver.received))
            assert paths == ["/s0", "/s1", "/s1", "/s2"]
            for n in done:  # the killed attempt was never recorded
                assert (n["status"], n["attempts"]) == ("succeeded", 1), n


async def _lapse(connection: Any, notification_id: str) -> None:
    await connection.execute(
        "UPDATE notifications SET next_attempt_at = extract(epoch FROM clock_timestamp()) "
        "WHERE id = $1 AND status = 'pending'",
        notification_id,
    )
