"""What a bench run does: its parameters (`BenchParams`) and the monitors it creates
(`MonitorPlan`), each pointed at a local target that can tell it apart.

Pure: nothing here opens a socket or starts a process. A monitor's index ``i`` (0 to
``monitors - 1``) is carried by what it probes, so the targets log arrivals per monitor:

======  =========================================================  ====================
type    url (behaviour ok)                                         target identifies i
======  =========================================================  ====================
http    ``http://127.0.0.1:PORT/m/<i>/o``                          by the request path
tcp     ``127.16.B.C:PORT`` (`tcp_address`)                        by the accepting address
dns     ``m<i>.bench.test`` (the service asks the bench's server)  by the name asked
ping    ``127.A.B.C`` (`ping_address`, A random per run)           by the echo's address
======  =========================================================  ====================

Behaviours, as shares of the monitors (the rest are ``ok``), and what they become per
type (``n/a``: the type has no such behaviour on loopback and the monitor stays ok):

==========  ===================  ==========================  ===============  =====
behaviour   http                 tcp                         dns              ping
==========  ===================  ==========================  ===============  =====
failing     500 (path ``/f``)    refused (no listener)       NXDOMAIN         n/a
slow        200 after            n/a                         answer after     n/a
            ``slow_seconds``                                 ``slow_seconds``
refusing    refused (a closed    refused (no listener)       REFUSED          n/a
            port)
flapping    200 and 500 in       n/a                         n/a              n/a
            turn (path ``/p``)
==========  ===================  ==========================  ===============  =====

A flapping http target (`bench.targets.servers`) answers 200 for one interval and 500
for the next, for ever; it flips half an interval after its monitor's grid points (the
harness tells the target each monitor's grid once the monitors exist), so each check
sees the state opposite to the previous check's, and flips are spread over the interval
as the monitors' phases are. With ``failure_threshold`` 1 every check of a flapping
monitor is a status change. Like slow targets, they are served by a built-in worker
(nginx cannot answer by the clock).

A refused connection never reaches a target process, so those monitors are not
*observable*: the report counts their checks from the service's side only.

The monitor types are the service's (`engine.PROBE_TYPES`, the one list of them: the
one import of the service this module makes, allowed by the import contract in
``pyproject.toml``), so ``--type mix`` covers every type; the tables above are what the
harness knows of each (`MonitorPlan.with_ports`, `_NOT_APPLICABLE`), and
tests/bench/test_plan.py fails for a type they lack.

Echo requests are seen by every raw ICMP socket on the host, so two benches running at
once (two test runs) would see each other's pings: the block of ping addresses is drawn
at random for each run (`TargetPorts.ping_base`).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, get_args

from engine import PROBE_TYPES

__all__ = [
    "BEHAVIOURS",
    "MONITOR_TYPES",
    "Behaviour",
    "BenchParams",
    "MonitorPlan",
    "MonitorType",
    "TargetPorts",
    "make_plan",
    "parse_type_mix",
    "pick_ping_base",
    "ping_address",
    "split_counts",
    "tcp_address",
]

MonitorType = str
"""A monitor type: a name in `MONITOR_TYPES`."""
Behaviour = Literal["ok", "failing", "slow", "refusing", "flapping"]
MONITOR_TYPES: tuple[MonitorType, ...] = tuple(PROBE_TYPES)
"""The monitor types, in the service's order (`engine.PROBE_TYPES`)."""
BEHAVIOURS: tuple[Behaviour, ...] = get_args(Behaviour)

DNS_ZONE = "bench.test"
"""The zone the bench's DNS server answers for."""


@dataclass(frozen=True, slots=True, kw_only=True)
class BenchParams:
    """Everything one run depends on (written verbatim into the report).

    Attributes:
        monitors: monitors created through the API.
        type_mix: ``(type, weight)`` pairs; one type alone, or the ``mix``.
        interval_seconds: every monitor's check interval, seconds (1 to 86,400).
        timeout_seconds: every monitor's check timeout, seconds (at most the interval).
        duration_seconds: the measured window, rounded to whole intervals (at least one).
        warmup_seconds: seconds between the last monitor created and the window;
            ``None``: one interval plus 2 s, so every monitor has left its creation check
            for its grid.
        failing_share, slow_share, refusing_share, flapping_share: shares of monitors (0
            to 1, summing to at most 1) with that behaviour (see the module docstring).
        slow_seconds: how long slow targets wait before answering, seconds.
        failure_threshold: the monitors' ``failure_threshold`` (``None``: the API's
            default, 2).
        postgres_settings: ``(name, value)`` server settings the bench gives the
            embedded Postgres before the service starts (``ALTER SYSTEM``, restart).
        http_target: ``"builtin"`` (Python workers), ``"nginx"``, or ``"auto"`` (nginx
            when installed).
        http_workers: processes of the built-in http target.
        create_concurrency: concurrent POST /monitors requests while creating.
        api_rps: requests per second of the concurrent API client during the window
            (half ``GET /monitors/:id``, half ``GET /monitors``); 0 turns it off.
        max_probes_in_flight, batch_size, batch_age_ms: ``uptrio serve`` flags
            (``None``: the service's default).
        serve_args: further ``uptrio serve`` flags, verbatim.
        service_log_level: the service's ``--log-level``.
        database_url: an external Postgres for the service (``None``: embedded in a
            temporary data directory).
        baseline: also run the bare-trio baseline on the same targets and schedule.
        seed: seeds the assignment of types and behaviours to monitor indices.
        output_dir: where report.json, chart.png and the logs go.
        progress: show the live display (on stderr).
        keep_data: keep the temporary data directory (the database) after the run.
        profile: sample the service (and the baseline) with py-spy during the window.
        nodes: ``uptrio serve`` processes on one Postgres (docs/several-nodes.md): 1 is
            the single service of every earlier run; more run `bench.cluster`.
        kill_node: with ``nodes`` >= 2, the node (1 to ``nodes``) SIGKILLed in the
            middle of the window (`bench.cluster`), or ``None``.
        lease_seconds: the nodes' ``--lease-seconds`` (``None``: the service's default,
            10 s).
        regions: with ``nodes`` >= 2, the regions ``r1`` to ``rR`` the nodes are spread
            over in turn (``uptrio serve --region``), every monitor created with all of
            them (docs/regions.md; `bench.regions`); 0: no regions, as before.
        probe_source_addresses: with ``nodes`` >= 2, node ``k`` probes from
            ``127.0.0.(k+1)`` (``uptrio serve --probe-source-address``; loopback only).
    """

    monitors: int = 1000
    type_mix: tuple[tuple[MonitorType, float], ...] = (("http", 1.0),)
    interval_seconds: int = 10
    timeout_seconds: int = 5
    duration_seconds: float = 30.0
    warmup_seconds: float | None = None
    failing_share: float = 0.0
    slow_share: float = 0.0
    refusing_share: float = 0.0
    flapping_share: float = 0.0
    slow_seconds: float = 2.0
    failure_threshold: int | None = None
    postgres_settings: tuple[tuple[str, str], ...] = ()
    http_target: Literal["auto", "builtin", "nginx"] = "auto"
    http_workers: int = 2
    create_concurrency: int = 8
    api_rps: float = 4.0
    max_probes_in_flight: int | None = None
    batch_size: int | None = None
    batch_age_ms: float | None = None
    serve_args: tuple[str, ...] = ()
    service_log_level: str = "info"
    database_url: str | None = None
    baseline: bool = False
    seed: int = 1
    output_dir: Path = field(default_factory=lambda: Path("bench-results"))
    progress: bool = True
    keep_data: bool = False
    profile: bool = False
    nodes: int = 1
    kill_node: int | None = None
    lease_seconds: float | None = None
    regions: int = 0
    probe_source_addresses: bool = False

    def __post_init__(self) -> None:
        if self.monitors < 1:
            raise ValueError("monitors must be at least 1")
        if not 1 <= self.interval_seconds <= 86_400:
            raise ValueError("interval_seconds must be 1 to 86,400")
        if not 1 <= self.timeout_seconds <= min(60, self.interval_seconds):
            raise ValueError("timeout_seconds must be 1 to 60 and at most the interval")
        shares = self.shares
        if any(s < 0 for s in shares) or sum(shares) > 1 + 1e-9:
            raise ValueError("behaviour shares must be >= 0 and sum to at most 1")
        if self.duration_seconds <= 0:
            raise ValueError("duration_seconds must be positive")
        if not 1 <= self.nodes <= 16:
            raise ValueError("nodes must be 1 to 16")
        if self.kill_node is not None and not (
            self.nodes >= 2 and 1 <= self.kill_node <= self.nodes
        ):
            raise ValueError("--kill-node needs --nodes 2 or more and names a node 1 to --nodes")
        if self.lease_seconds is not None and self.lease_seconds <= 0:
            raise ValueError("lease_seconds must be positive")
        if self.regions and not (1 <= self.regions <= min(10, self.nodes) and self.nodes >= 2):
            raise ValueError("--regions needs --nodes 2 or more and is 1 to min(10, --nodes)")
        if self.probe_source_addresses and self.nodes < 2:
            raise ValueError("--probe-source-addresses needs --nodes 2 or more")

    @property
    def shares(self) -> tuple[float, float, float, float]:
        """The shares of the behaviours after ``ok``, in `BEHAVIOURS` order."""
        return (self.failing_share, self.slow_share, self.refusing_share, self.flapping_share)

    @property
    def warmup(self) -> float:
        """The warm-up in seconds (``warmup_seconds`` or its default: one interval plus 2 s,
        plus 5 s with several nodes, the reconciliation period by which a monitor created
        through one node reaches its owner; docs/several-nodes.md, Changes made through
        another node)."""
        if self.warmup_seconds is not None:
            return self.warmup_seconds
        return float(self.interval_seconds) + 2.0 + (5.0 if self.nodes > 1 else 0.0)

    @property
    def window_intervals(self) -> int:
        """Whole intervals in the measured window (at least 1)."""
        return max(1, round(self.duration_seconds / self.interval_seconds))

    @property
    def window_seconds(self) -> float:
        """The measured window's length, seconds: ``window_intervals * interval``."""
        return float(self.window_intervals * self.interval_seconds)

    @property
    def type_label(self) -> str:
        """``http`` for one type, ``mix(http=1,tcp=1,...)`` for several."""
        if len(self.type_mix) == 1:
            return self.type_mix[0][0]
        return "mix(" + ",".join(f"{t}={w:g}" for t, w in self.type_mix) + ")"


@dataclass(frozen=True, slots=True)
class TargetPorts:
    """Where the targets listen: the http (TCP) port, the port of slow and flapping http
    targets (the same unless nginx serves http), a refusing TCP port, the tcp targets' port, the
    dns (UDP) port, and the second octet of the run's ping addresses."""

    http: int
    refused: int
    tcp: int
    dns: int
    http_slow: int = 0
    ping_base: int = 64


@dataclass(frozen=True, slots=True, kw_only=True)
class MonitorPlan:
    """One monitor to create.

    Attributes:
        index: 0 to ``monitors - 1``, carried by ``url`` (module docstring).
        type: the monitor type.
        behaviour: the behaviour it really gets (``n/a`` cases already turned to ok).
        url: the monitor's url (needs the `TargetPorts`: see `MonitorPlan.with_ports`).
        observable: whether a target process sees its probes.
    """

    index: int
    type: MonitorType
    behaviour: Behaviour
    url: str = ""
    observable: bool = True

    def with_ports(self, ports: TargetPorts) -> MonitorPlan:
        """This plan with its ``url`` and ``observable`` filled in."""
        i = self.index
        url: str
        observable = True
        match self.type, self.behaviour:
            case "http", "refusing":
                url, observable = f"http://127.0.0.1:{ports.refused}/m/{i}/o", False
            case "http", _:
                mode = {"ok": "o", "failing": "f", "slow": "s", "flapping": "p"}[self.behaviour]
                port = ports.http_slow if mode in ("s", "p") and ports.http_slow else ports.http
                url = f"http://127.0.0.1:{port}/m/{i}/{mode}"
            case "tcp", _:
                url = f"{tcp_address(i)}:{ports.tcp}"
                observable = self.behaviour == "ok"
            case "dns", _:
                mode = {"ok": "m", "failing": "f", "slow": "s", "refusing": "r"}[self.behaviour]
                url = f"{mode}{i}.{DNS_ZONE}"
            case "ping", _:
                url = ping_address(i, ports.ping_base)
            case _:
                raise ValueError(f"the harness has no target for {self.type} monitors")
        return MonitorPlan(
            index=i, type=self.type, behaviour=self.behaviour, url=url, observable=observable
        )


def _loopback(base: int, index: int) -> str:
    """A distinct loopback address per index: ``127.<base + i // 62500>.B.C`` with B and
    C in 1..250 (never a .0 or .255 octet)."""
    second = base + index // 62_500
    if second > 255:
        raise ValueError(f"monitor index {index} is too large for a loopback address")
    rest = index % 62_500
    return f"127.{second}.{rest // 250 + 1}.{rest % 250 + 1}"


def tcp_address(index: int) -> str:
    """The loopback address the tcp monitor ``index`` connects to (127.16.0.0 and up)."""
    return _loopback(16, index)


def ping_address(index: int, base: int = 64) -> str:
    """The loopback address the ping monitor ``index`` pings (127.<base>.0.0 and up)."""
    return _loopback(base, index)


def pick_ping_base(monitors: int) -> int:
    """A random second octet (64 to 254) with room for ``monitors`` ping addresses."""
    blocks = monitors // 62_500 + 1
    return random.SystemRandom().randrange(64, 256 - blocks)


def parse_type_mix(text: str) -> tuple[tuple[MonitorType, float], ...]:
    """One of `MONITOR_TYPES` (``http``, ``tcp``, ``dns``, ``ping``), ``mix`` (equal
    shares of them all), or weights such as ``http=70,tcp=10,dns=10,ping=10``.

    Raises:
        ValueError: an unknown type or a weight that is not a positive number.
    """
    text = text.strip()
    if text == "mix":
        return tuple((t, 1.0) for t in MONITOR_TYPES)
    pairs: list[tuple[MonitorType, float]] = []
    for part in text.split(","):
        name, _, weight = part.partition("=")
        name = name.strip()
        if name not in MONITOR_TYPES:
            raise ValueError(
                f"unknown monitor type {name!r}; one of {', '.join(MONITOR_TYPES)}, mix"
            )
        value = float(weight) if weight else 1.0
        if not value > 0:
            raise ValueError(f"the weight of {name} must be positive")
        pairs.append((name, value))
    return tuple(pairs)


def split_counts(total: int, weights: list[float]) -> list[int]:
    """Split ``total`` in proportion to ``weights`` (largest remainders; sums to
    ``total``)."""
    whole = sum(weights)
    exact = [total * w / whole for w in weights]
    counts = [math.floor(x) for x in exact]
    order = sorted(range(len(weights)), key=lambda k: exact[k] - counts[k], reverse=True)
    for k in order[: total - sum(counts)]:
        counts[k] += 1
    return counts


_NOT_APPLICABLE: dict[MonitorType, frozenset[Behaviour]] = {
    "http": frozenset(),
    "tcp": frozenset({"slow", "flapping"}),
    "dns": frozenset({"flapping"}),
    "ping": frozenset({"failing", "slow", "refusing", "flapping"}),
}


def make_plan(params: BenchParams) -> list[MonitorPlan]:
    """The monitors of a run, by index, types and behaviours spread at random (seeded by
    ``params.seed``); urls are empty until `MonitorPlan.with_ports`."""
    rng = random.Random(params.seed)
    n = params.monitors
    type_counts = split_counts(n, [w for _, w in params.type_mix])
    types: list[MonitorType] = []
    for (kind, _), count in zip(params.type_mix, type_counts, strict=True):
        types += [kind] * count
    rng.shuffle(types)
    shares = list(params.shares)
    ok_share = max(0.0, 1.0 - sum(shares))
    behaviour_counts = split_counts(n, [ok_share, *shares]) if n else [0] * len(BEHAVIOURS)
    behaviours: list[Behaviour] = []
    for kind_b, count in zip(BEHAVIOURS, behaviour_counts, strict=True):
        behaviours += [kind_b] * count
    rng.shuffle(behaviours)
    plans = []
    for i in range(n):
        behaviour = behaviours[i]
        if behaviour in _NOT_APPLICABLE[types[i]]:
            behaviour = "ok"
        plans.append(MonitorPlan(index=i, type=types[i], behaviour=behaviour))
    return plans
