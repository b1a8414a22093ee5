"""Helpers of the operations tests: monitors inserted straight into the database, a
prober that records every probe without I/O, and a Prometheus text parser."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import trio
from prometheus_client.parser import text_string_to_metric_families

from engine import Prober, ProbeResult, ProbeSpec
from store import Connection, new_id

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
