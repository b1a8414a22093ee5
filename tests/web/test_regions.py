"""Monitors with regions through the API (docs/regions.md): ``regions`` and
``region_quorum`` on create and PATCH with their 422s, ``region_status`` on the monitor,
and the ``region`` filters of ``GET /monitors/:id/checks`` and ``/availability``."""

from __future__ import annotations

import time
from typing import Any

import trio

from store import CheckRecord, Database, StatusChange, checks, new_check_id
from tests.api import Api
from tests.store.helpers import run_epoch
from tests.web.helpers import assert_error, expect, set_times
from web.api.monitors import MonitorObject

TCP = {
    "name": "api",
    "url": "127.0.0.1:1",
    "type": "tcp",
    "interval_seconds": 10,
    "timeout_seconds": 5,
}
T0 = int(time.time()) // 3600 * 3600 - 2 * 3600
"""An hour boundary two to three hours ago: inside the raw checks' retention."""


async def test_regions_and_quorum_on_create_and_patch(api: Api) -> None:
    with trio.fail_after(15):
        plain = expect(await api.post("/monitors", json=TCP), 201)
        MonitorObject.model_validate(plain)
        assert (plain["regions"], plain["region_quorum"], plain["region_status"]) == (
            None,
            None,
            None,
        )
        three = expect(
            await api.post("/monitors", json={**TCP, "regions": ["us-east", "eu-west", "ap-1"]}),
            201,
        )
        assert three["regions"] == ["us-east", "eu-west", "ap-1"]
        assert three["region_quorum"] == 2  # a majority
        assert three["region_status"] == {
            "ap-1": "pending",
            "eu-west": "pending",
            "us-east": "pending",
        }
        path = f"/monitors/{three['id']}"
        one = expect(await api.patch(path, json={"region_quorum": 1}))
        assert one["region_quorum"] == 1
        # new regions without a quorum: the new list's majority; the views follow
        four = expect(await api.patch(path, json={"regions": ["a", "b", "c", "d"]}))
        assert four["region_quorum"] == 3
        assert sorted(four["region_status"]) == ["a", "b", "c", "d"]
        cleared = expect(await api.patch(path, json={"regions": None}))
        assert (cleared["regions"], cleared["region_quorum"], cleared["region_status"]) == (
            None,
            None,
            None,
        )
        made = expect(await api.patch(f"/monitors/{plain['id']}", json={"regions": ["x"]}))
        assert (made["region_quorum"], made["region_status"]) == (1, {"x": "pending"})


async def test_region_validation_errors_are_422_naming_the_field(api: Api) -> None:
    cases: list[tuple[dict[str, Any], str, str]] = [
        ({"regions": []}, "value_too_short", "regions"),
        ({"regions": [f"r{i}" for i in range(11)]}, "value_too_long", "regions"),
        ({"regions": ["EU"]}, "invalid_value", "regions"),
        ({"regions": ["a" * 33]}, "invalid_value", "regions"),
        ({"regions": ["a", "b_c"]}, "invalid_value", "regions"),
        ({"regions": "eu"}, "invalid_type", "regions"),
        ({"regions": ["a", "b", "a"]}, "invalid_value", "regions[2]"),
        ({"regions": ["a", "b"], "region_quorum": 3}, "invalid_value", "region_quorum"),
        ({"regions": ["a"], "region_quorum": 0}, "value_out_of_range", "region_quorum"),
        ({"region_quorum": 1}, "invalid_value", "region_quorum"),
    ]
    with trio.fail_after(15):
        for fields, code, param in cases:
            response = await api.post("/monitors", json={**TCP, **fields})
            assert_error(response, 422, code, param=param)
        made = expect(await api.post("/monitors", json={**TCP, "regions": ["a", "b"]}), 201)
        path = f"/monitors/{made['id']}"
        assert_error(
            await api.patch(path, json={"region_quorum": 3}),
            422,
            "invalid_value",
            param="region_quorum",
        )
        assert_error(
            await api.patch(path, json={"regions": ["a"], "region_quorum": 2}),
            422,
            "invalid_value",
            param="region_quorum",
        )
        assert_error(
            await api.patch(path, json={"regions": None, "region_quorum": 1}),
            422,
            "invalid_value",
            param="region_quorum",
        )
        assert expect(await api.get(path))["regions"] == ["a", "b"]


def _check(monitor_id: str, region: str | None, status: str, at: int) -> CheckRecord:
    return CheckRecord(
        id=new_check_id(at),
        monitor_id=monitor_id,
        status=status,
        response_time_ms=10.0 if region == "a" else 30.0,
        status_code=None,
        error_code=None if status == "up" else "timeout",
        error_message=None,
        created=at,
        region=region,
    )


async def test_checks_and_availability_by_region(api: Api, db: Database) -> None:
    with trio.fail_after(20):
        made = expect(await api.post("/monitors", json={**TCP, "regions": ["a", "b"]}), 201)
        mid, epoch = made["id"], await run_epoch(db, made["id"])
        await set_times(db, "monitors", mid, created=T0 - 60, updated=T0 - 60)
        await db.run(checks.ensure_partitions, T0, T0 + 86_400, 86_400)
        batch = [_check(mid, None, "up", T0 - 5)]  # history before checks had regions
        changes = []
        for at in range(T0, T0 + 600, 10):  # a up; b down from T0 + 300
            batch.append(_check(mid, "a", "up", at))
            batch.append(_check(mid, "b", "down" if at >= T0 + 300 else "up", at + 1))
        for region, check_id, before, after, at in (
            ("a", batch[1].id, "pending", "up", T0),
            ("b", batch[2].id, "pending", "up", T0 + 1),
            ("b", batch[62].id, "up", "down", T0 + 301),
        ):
            changes.append(
                StatusChange(
                    monitor_id=mid,
                    check_id=check_id,
                    from_status=before,
                    to_status=after,
                    run_epoch=epoch,
                    created=at,
                    region=region,
                )
            )
        await db.transaction(checks.write_check_batch, batch, changes, [c.region for c in batch])
        path = f"/monitors/{mid}/checks"
        page = expect(await api.get(path, query={"region": "b", "limit": 100}))
        assert len(page["data"]) == 60 and {c["region"] for c in page["data"]} == {"b"}
        down = expect(await api.get(path, query={"region": "b", "status": "down", "limit": 100}))
        assert len(down["data"]) == 30
        everything = expect(await api.get(path, query={"limit": 100}))
        assert {c["region"] for c in everything["data"]} == {"a", "b"}
        assert len(expect(await api.get(path, query={"region": "c"}))["data"]) == 0
        assert_error(
            await api.get(path, query={"region": "B!"}), 400, "invalid_parameter", param="region"
        )
        window = {"start": T0, "end": T0 + 600}
        avail = f"/monitors/{mid}/availability"
        b = expect(await api.get(avail, query={**window, "region": "b"}))
        assert (b["up_seconds"], b["down_seconds"]) == (300, 299)
        assert (b["checks"], b["failed_checks"]) == (60, 30)
        a = expect(await api.get(avail, query={**window, "region": "a"}))
        assert (a["up_seconds"], a["down_seconds"], a["checks"]) == (600, 0, 60)
        assert a["response_time_ms"]["mean"] == 10.0
        quorum = expect(await api.get(avail, query=window))  # 1 of 2 down: up (quorum 2)
        assert quorum["down_seconds"] == 0 and quorum["checks"] == 120
        assert_error(
            await api.get(avail, query={"region": ""}), 400, "invalid_parameter", param="region"
        )
        # Whole hours come from each region's own rollups: the same figures once the raw
        # checks are gone (past their retention), the quorum's row keeping both regions'.
        hour = {"start": T0, "end": T0 + 3600}
        before = expect(await api.get(avail, query={**hour, "region": "b"}))
        await db.run(lambda c: c.execute("DELETE FROM checks WHERE monitor_id = $1", mid))
        after = expect(await api.get(avail, query={**hour, "region": "b"}))
        assert (
            (after["checks"], after["failed_checks"])
            == (60, 30)
            == (
                before["checks"],
                before["failed_checks"],
            )
        )
        assert after["response_time_ms"] == before["response_time_ms"]
        assert expect(await api.get(avail, query={**hour, "region": "a"}))["checks"] == 60
        assert expect(await api.get(avail, query=hour))["checks"] == 120
