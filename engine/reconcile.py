"""Reconciliation (extensions part 6; issue 14, item 3): the fallback by which a change
made through another node reaches the actors of this one.

Every ``reconcile_seconds`` (5 s by default) the engine's command actor compares the
active monitors of the buckets it holds with the actors it runs. First per bucket, by
one aggregate query (``store.monitors.settings_digests``: how many, and the sum of their
settings digests) against the same sums over its actors' records; then, only in the
buckets that differ, monitor by monitor: an actor whose monitor is gone or paused is
stopped, a monitor with no actor is started, one whose run epoch or settings changed is
restarted or reconfigured. (Reading and comparing all 20,000 monitors every 5 s stalled
the node 0.3 to 0.4 s each time: bench/RESULTS.md, issue 14.) The heartbeats of the
held buckets are read and compared whole (by run epoch, period and grace), and a heartbeat
whose stored ``last_success_at`` is newer than its actor knows is told of that success
(a ping stored by another node whose notification was lost). A change made
through this node was applied at once already (the web layer tells the engine), so
there is nothing left to do for it.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Awaitable, Callable
from functools import partial
from typing import TypeVar

import structlog
import trio

from store import (
    Database,
    DatabaseUnavailable,
    HeartbeatRecord,
    MonitorRecord,
    heartbeats,
    monitors,
)

from .actor import ActorRef
from .heartbeat import HeartbeatConfig
from .monitor import EngineStatistics
from .settings import EngineSettings
from .shard import Shard

__all__ = ["reconcile", "running_digests", "same_settings", "tick"]

log = structlog.get_logger("uptrio.engine")

M = TypeVar("M")

Apply = Callable[[str, MonitorRecord | HeartbeatRecord | None, float, bool], Awaitable[None]]
"""``apply(resource_id, record or None, ask_seconds, stopping)``: ``engine.apply_change``."""


async def tick(ref: ActorRef[M], message: M, every_seconds: float) -> None:
    """Tell ``ref`` ``message`` every ``every_seconds`` until cancelled (a full inbox
    skips a tick: the next one comes)."""
    while True:
        await trio.sleep(every_seconds)
        with contextlib.suppress(trio.WouldBlock):
            ref.tell_nowait(message)


def _settings_of(record: MonitorRecord) -> MonitorRecord:
    """``record`` without what the store changes on its own (status, times)."""
    return dataclasses.replace(record, status="", updated=0, last_checked_at=None)


def same_settings(running: MonitorRecord, stored: MonitorRecord) -> bool:
    """Whether ``stored`` asks nothing new of an actor running ``running`` (the same
    settings and run; status and times aside)."""
    return _settings_of(running) == _settings_of(stored)


def running_digests(shards: list[Shard]) -> dict[int, tuple[int, int]]:
    """Per bucket: how many monitor actors ``shards`` run, and the sum of their records'
    ``settings_digest``, the shape of ``store.monitors.settings_digests``."""
    sums: dict[int, tuple[int, int]] = {}
    for shard in shards:
        for entry in shard.entries.values():
            n, total = sums.get(entry.bucket, (0, 0))
            sums[entry.bucket] = (n + 1, total + entry.record.settings_digest)
    return sums


async def reconcile(
    db: Database,
    shards: list[Shard],
    epochs: dict[int, int],
    apply: Apply,
    settings: EngineSettings,
    stats: EngineStatistics,
) -> None:
    """One comparison (module docstring) of the buckets in ``epochs``; a database that
    does not answer skips it (the next one comes). Adds the buckets whose monitors it
    read again to ``stats.reconciled_buckets``."""
    held = sorted(epochs)
    if not held:
        return
    try:
        digests = await db.run(monitors.settings_digests, held)
        sums = running_digests(shards)
        stale = [b for b in held if digests.get(b, (0, 0)) != sums.get(b, (0, 0))]
        stored = await db.run(monitors.load_active_monitors, stale) if stale else []
        beats = await db.run(heartbeats.load_heartbeats, held)
    except DatabaseUnavailable as exc:
        log.warning("reconciliation skipped", error=str(exc))
        return
    stats.reconciled_buckets += len(stale)
    change = partial(_change, apply, settings.ask_timeout_seconds)
    active = {r.id: r for r in stored}
    running: dict[str, MonitorRecord] = {}
    read = set(stale)
    for shard in shards:
        for monitor_id, entry in list(shard.entries.items()):
            if entry.bucket not in read:
                continue
            running[monitor_id] = entry.record
            if monitor_id not in active:
                await change(monitor_id, None)
    for record in stored:
        known = running.get(record.id)
        if known is None or not same_settings(known, record):
            await change(record.id, record)
    found = {h.id: h for h in beats}
    for shard in shards:
        if shard.heartbeats is None:
            continue
        for heartbeat_id, handle in list(shard.heartbeats.handles.items()):
            beat = found.get(heartbeat_id)
            if beat is None or HeartbeatConfig.of(beat, handle.config.lease_epoch) != handle.config:
                await change(heartbeat_id, beat)
            elif (success := beat.last_success_at) is not None and success > handle.seen_success:
                # a success stored by another node whose notification was lost (or one
                # of this node's own, which its actor knows already and ignores)
                shard.heartbeats.stored_elsewhere(heartbeat_id, "success", success)
    for beat in beats:
        if all(s.heartbeats is None or beat.id not in s.heartbeats.handles for s in shards):
            await change(beat.id, beat)


async def _change(
    apply: Apply,
    ask_seconds: float,
    resource_id: str,
    record: MonitorRecord | HeartbeatRecord | None,
) -> None:
    log.info("reconciled", resource=resource_id, removed=record is None)
    await apply(resource_id, record, ask_seconds, False)
