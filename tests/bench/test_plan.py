"""The harness's plan (bench/plan.py) covers every probe type: the types are the
service's (`engine.PROBE_TYPES`), and every type and behaviour gets a url its type
accepts. Pure: no process, no socket."""

from __future__ import annotations

import pytest

from bench.plan import (
    BEHAVIOURS,
    MONITOR_TYPES,
    BenchParams,
    TargetPorts,
    make_plan,
    parse_type_mix,
)
from engine import PROBE_TYPES, parse_target

PORTS = TargetPorts(http=8001, refused=8002, tcp=8003, dns=8004, http_slow=8005, ping_base=70)


def test_the_types_are_the_services() -> None:
    assert tuple(PROBE_TYPES) == MONITOR_TYPES
    assert parse_type_mix("mix") == tuple((name, 1.0) for name in PROBE_TYPES)
    with pytest.raises(ValueError, match=f"one of {', '.join(PROBE_TYPES)}, mix"):
        parse_type_mix("smtp")


def test_every_type_and_behaviour_gets_a_url_of_its_type() -> None:
    params = BenchParams(
        monitors=400,
        type_mix=parse_type_mix("mix"),
        failing_share=0.2,
        slow_share=0.2,
        refusing_share=0.2,
        flapping_share=0.2,
    )
    plans = [plan.with_ports(PORTS) for plan in make_plan(params)]
    assert {plan.type for plan in plans} == set(PROBE_TYPES)
    assert {plan.behaviour for plan in plans} == set(BEHAVIOURS)
    for plan in plans:
        assert parse_target(plan.type, plan.url).type == plan.type, plan
