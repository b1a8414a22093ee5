"""The harness's plan (bench/plan.py) covers every probe type: the types are the
service's (`engine.PROBE_TYPES`), and every type and behaviour gets a url its type
accepts. Its checks of ``--regions`` and each node's region and
probe source. Pure: no process, no socket."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.nodes import node_command, node_region
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


def test_regions_need_a_node_each_and_nodes_take_them_in_turn() -> None:
    for nodes, regions in ((1, 1), (3, 4), (11, 11), (2, -1)):
        with pytest.raises(ValueError, match="--regions needs --nodes 2 or more"):
            BenchParams(nodes=nodes, regions=regions)
    with pytest.raises(ValueError, match="--probe-source-addresses needs --nodes 2"):
        BenchParams(probe_source_addresses=True)
    params = BenchParams(nodes=5, regions=2, probe_source_addresses=True)
    assert [node_region(k, params.regions) for k in range(1, 6)] == ["r1", "r2", "r1", "r2", "r1"]
    command = node_command(params, Path("/data"), "postgresql://db", 4, 53)
    assert command[command.index("--region") + 1] == "r2"
    assert command[command.index("--probe-source-address") + 1] == "127.0.0.5"
    plain = node_command(BenchParams(nodes=2), Path("/d"), "postgresql://db", 1, 53)
    assert "--region" not in plain and "--probe-source-address" not in plain
