"""Helpers of the operations tests: monitors inserted straight into the database, a
prober that records every probe without I/O, a Prometheus text parser, and the API calls
the alert stories share (create, wait for a monitor's status or an alert's settled
messages; docs/alerts.md)."""

from __future__ import annotations

import re
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import httpx
import trio
from prometheus_client.parser import text_string_to_metric_families

from engine import Prober, ProbeResult, ProbeSpec
from store import Connection, new_id

ACK_LINK = re.compile(r"http://127\.0\.0\.1:\d+/alerts/ack/[A-Za-z0-9_-]+")
"""An acknowledge link of a service listening on 127.0.0.1 (docs/alerts.md, Acknowledge
links)."""

_INSERT = (
    "INSERT INTO monitors (id, account_id, name, url, type, status, interval_seconds, "
    "timeout_seconds, failure_threshold, success_threshold, created, updated) "
    "SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], "
    "$6::text[], $7::int[], $8::int[], $9::int[], $10::int[], $11::bigint[], $12::bigint[])"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class NewMonitor:
    """A monitor row to insert (tcp unless told)."""

    url: str
    type: str = "tcp"
    status: str = "pending"
    interval_seconds: int = 1
    timeout_seconds: int = 1
    failure_threshold: int = 2
    success_threshold: int = 1


async def insert_monitors(
    connection: Connection, account_id: str, monitors: Sequence[NewMonitor]
) -> list[str]:
    """Insert ``monitors`` for ``account_id`` in one statement (asyncio side); their ids."""
    now = int(time.time())
    ids = [new_id("mon") for _ in monitors]
    await connection.execute(
        _INSERT,
        ids,
        [account_id] * len(ids),
        [f"m{i}" for i in range(len(ids))],
        [m.url for m in monitors],
        [m.type for m in monitors],
        [m.status for m in monitors],
        [m.interval_seconds for m in monitors],
        [m.timeout_seconds for m in monitors],
        [m.failure_threshold for m in monitors],
        [m.success_threshold for m in monitors],
        [now] * len(ids),
        [now] * len(ids),
    )
    return ids


async def count_checks(connection: Connection) -> int:
    """Rows in ``checks`` (asyncio side)."""
    return int(await connection.fetchval("SELECT count(*) FROM checks"))


class RecordingProber(Prober):
    """Answers every probe at once, without I/O: up while ``ok``, else refused. Records
    each probe's start per url: ``(trio time, wall time)`` in seconds."""

    def __init__(self) -> None:
        super().__init__()
        self.ok = True
        self.calls: defaultdict[str, list[tuple[float, float]]] = defaultdict(list)

    async def probe(self, spec: ProbeSpec) -> ProbeResult:
        self.calls[spec.url].append((trio.current_time(), time.time()))
        await trio.lowlevel.checkpoint()
        if self.ok:
            return ProbeResult(
                ok=True, response_time_ms=0.2, status_code=None, error_code=None, error_message=None
            )
        return ProbeResult(
            ok=False,
            response_time_ms=0.2,
            status_code=None,
            error_code="connection_refused",
            error_message="refused (test)",
        )


def scrape(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Prometheus text as ``{(sample name, sorted labels): value}``."""
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


async def until(predicate: Callable[[], bool], what: str, seconds: float = 6) -> None:
    """Wait until ``predicate()`` holds, at most ``seconds``."""
    with trio.move_on_after(seconds) as scope:
        while not predicate():
            await trio.sleep(0.05)
    assert not scope.cancelled_caught, f"{what}: not within {seconds} s"


async def create(api: httpx.AsyncClient, path: str, body: dict[str, Any]) -> dict[str, Any]:
    """POST ``body`` to ``path``; the object created (the answer must be a 201)."""
    answer = await api.post(path, json=body)
    assert answer.status_code == 201, answer.text
    created: dict[str, Any] = answer.json()
    return created


async def wait_monitor(api: httpx.AsyncClient, monitor_id: str, status: str) -> None:
    """Wait until the monitor's ``status`` is ``status``, at most 5 s."""
    with trio.fail_after(5):
        while (await api.get(f"/monitors/{monitor_id}")).json()["status"] != status:
            await trio.sleep(0.05)


async def settled_notifications(api: httpx.AsyncClient, alert_id: str) -> list[dict[str, Any]]:
    """The alert's notifications once none is pending (the last send's record may land
    just after its receiver saw it), at most 5 s."""
    with trio.fail_after(5):
        while True:
            answer = await api.get(f"/alerts/{alert_id}/notifications")
            assert answer.status_code == 200, answer.text
            data: list[dict[str, Any]] = answer.json()["data"]
            if all(n["status"] != "pending" for n in data):
                return data
            await trio.sleep(0.05)
