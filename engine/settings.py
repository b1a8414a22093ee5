"""The engine's settings (``uptrio serve`` flags; every default of the engine is defined
here). Read by the engine (:mod:`engine.engine`) and its shards (:mod:`engine.shard`).
"""

from __future__ import annotations

from dataclasses import dataclass

from .supervision import Backoff, Intensity

__all__ = ["EngineSettings"]

_MONITOR_INTENSITY = Intensity(max_restarts=50, period_seconds=60.0)
_MONITOR_BACKOFF = Backoff(min_seconds=0.5, max_seconds=30.0, random_factor=0.2)
_SHARD_INTENSITY = Intensity(max_restarts=5, period_seconds=60.0)


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineSettings:
    """Engine settings (command-line flags of ``uptrio serve``).

    Attributes:
        max_probes_in_flight: global cap on concurrent probes (default 1,000).
        shard_count: monitor supervisors (default 8).
        monitor_intensity: restarts of monitor actors one shard tolerates per period.
        monitor_backoff: back-off before restarting a crashed monitor actor.
        shard_intensity: shard restarts the engine supervisor tolerates per period.
        ask_timeout_seconds: how long a web request waits for the engine's acknowledgement.
        gc_young_threshold: the garbage collector's young-generation threshold while the
            engine runs (`young_gc_threshold`); None leaves the interpreter's (700).
        gc_freeze_every_seconds: seconds between two collections of the young generation
            whose survivors are then frozen (`keep_heap_frozen`; docs/design-notes.md); the heap is
            also frozen once the shards have loaded their monitors. None never freezes.
            Each collection walks what was allocated since the last one and still lives:
            at 2,000 checks/s about 2 ms every 0.05 s, 13 ms every 0.25 s (the pause is
            what lateness sees; the total is the same: bench/RESULTS.md).
        heartbeat_inbox_size: messages a heartbeat actor's mailbox holds; past it a ping
            is refused (500, retry) rather than queued. An empty mailbox costs the same
            whatever its bound; pings of one key come one at a time (the per-key rate
            limit), so only a burst of concurrent pings of one key (a flood with the limit
            lifted) ever fills one.
        ping_timeout_seconds: how long a ping waits for its heartbeat's actor to hand it
            to the store before it is answered 500 (retry), seconds.
        reconcile_seconds: how often the engine compares the monitors and heartbeats of
            its buckets in the database with the actors it runs, seconds (default 5): the
            fallback by which a change made through another node reaches this one
            (docs/several-nodes.md).
        ping_ack_committed: answer a ping only once the batch holding it is committed
            (``--ping-ack committed``), instead of once the store actor has it
            (``buffered``, the default; docs/heartbeats.md, No database round
            trip on a ping, and no ping lost: the durability choice).
        region: this node's region (the service gives it its leases' ``--region``): every check
            records it, and on a monitor with ``regions`` the node's monitor actor keeps
            that region's view (docs/regions.md).
    """

    max_probes_in_flight: int = 1000
    shard_count: int = 8
    monitor_intensity: Intensity = _MONITOR_INTENSITY
    monitor_backoff: Backoff = _MONITOR_BACKOFF
    shard_intensity: Intensity = _SHARD_INTENSITY
    ask_timeout_seconds: float = 10.0
    monitor_inbox_size: int = 16
    gc_young_threshold: int | None = 50_000
    gc_freeze_every_seconds: float | None = 0.05
    heartbeat_inbox_size: int = 256
    ping_timeout_seconds: float = 5.0
    ping_ack_committed: bool = False
    reconcile_seconds: float = 5.0
    region: str = "default"
