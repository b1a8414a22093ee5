"""A monitor's ``depends_on`` through the API (docs/incidents.md, "Dependencies"): shown on
the monitor, set on create and PATCH, at most 10 monitors of the account, no cycle of any
length, and a deleted monitor removed from the others' ``depends_on``."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

import trio

from store import Database
from tests.api import Api
from tests.web.helpers import assert_error, create_monitor
from tests.web.status_helpers import move


async def _patch(api: Api, monitor_id: str, depends_on: list[str]) -> tuple[int, object, object]:
    return await api.patch(f"/monitors/{monitor_id}", json={"depends_on": depends_on})


async def test_depends_on_is_set_on_create_and_patch_and_shown(api: Api) -> None:
    with trio.fail_after(10):
        router = await create_monitor(api, name="router")
        assert router["depends_on"] == [] and router["suppressed_by"] is None
        web = await create_monitor(api, name="web", depends_on=[router["id"], router["id"]])
        assert web["depends_on"] == [router["id"]]
        db = await create_monitor(api, name="db")
        status, patched, _ = await _patch(api, web["id"], [db["id"], router["id"]])
        assert status == 200, patched
        assert patched["depends_on"] == [db["id"], router["id"]]
        status, got, _ = await api.get(f"/monitors/{web['id']}")
        assert got["depends_on"] == [db["id"], router["id"]]
        status, emptied, _ = await _patch(api, web["id"], [])
        assert status == 200 and emptied["depends_on"] == []
        assert_error(
            await api.patch(f"/monitors/{web['id']}", json={"depends_on": None}),
            422,
            "invalid_type",
            param="depends_on",
        )


async def test_a_monitor_depending_on_itself_is_a_cycle(api: Api) -> None:
    with trio.fail_after(10):
        a = await create_monitor(api, name="a")
        other = await create_monitor(api, name="other")
        error = assert_error(
            await _patch(api, a["id"], [other["id"], a["id"]]),
            422,
            "dependency_cycle",
            param="depends_on[1]",
        )
        assert a["id"] in error["message"]
        _, got, _ = await api.get(f"/monitors/{a['id']}")
        assert got["depends_on"] == []


async def test_cycles_of_two_and_three_are_refused_and_a_chain_is_not(api: Api) -> None:
    with trio.fail_after(10):
        a, b, c = [await create_monitor(api, name=n) for n in "abc"]
        assert (await _patch(api, a["id"], [b["id"]]))[0] == 200
        assert_error(
            await _patch(api, b["id"], [a["id"]]), 422, "dependency_cycle", param="depends_on[0]"
        )
        assert (await _patch(api, b["id"], [c["id"]]))[0] == 200
        assert_error(
            await _patch(api, c["id"], [a["id"]]), 422, "dependency_cycle", param="depends_on[0]"
        )
        # a diamond is no cycle: c may depend on nothing a reaches ... d on both a and b
        d = await create_monitor(api, name="d", depends_on=[a["id"], b["id"]])
        assert d["depends_on"] == [a["id"], b["id"]]
        _, got, _ = await api.get(f"/monitors/{c['id']}")
        assert got["depends_on"] == []


async def test_depends_on_names_only_monitors_of_the_account(
    api: Api, api_for: Callable[..., Awaitable[Api]]
) -> None:
    with trio.fail_after(10):
        own = await create_monitor(api, name="own")
        other = await api_for(account="globex")
        theirs = await create_monitor(other, name="theirs")
        status, beat, _ = await api.post("/heartbeats", json={"name": "job", "period_seconds": 60})
        assert status == 201, beat
        assert_error(
            await api.post(
                "/monitors",
                json={
                    "name": "w",
                    "url": "https://example.com/",
                    "type": "http",
                    "depends_on": [own["id"], theirs["id"]],
                },
            ),
            422,
            "unknown_monitor",
            param="depends_on[1]",
        )
        assert_error(
            await _patch(api, own["id"], ["mon_nosuchone"]),
            422,
            "unknown_monitor",
            param="depends_on[0]",
        )
        error = assert_error(await _patch(api, own["id"], [beat["id"]]), 422, "invalid_value")
        assert "depends_on[0]" in error["message"]


async def test_at_most_ten_dependencies(api: Api) -> None:
    with trio.fail_after(20):
        parents = [(await create_monitor(api, name=f"p{i}"))["id"] for i in range(11)]
        child = await create_monitor(api, name="child", depends_on=parents[:10])
        assert child["depends_on"] == parents[:10]
        assert_error(
            await _patch(api, child["id"], parents), 422, "value_too_long", param="depends_on"
        )


async def test_deleting_a_monitor_removes_it_from_its_dependents(api: Api) -> None:
    with trio.fail_after(10):
        router, db = await create_monitor(api, name="router"), await create_monitor(api, name="db")
        web = await create_monitor(api, name="web", depends_on=[router["id"], db["id"]])
        assert (await api.delete(f"/monitors/{router['id']}"))[0] == 204
        _, got, _ = await api.get(f"/monitors/{web['id']}")
        assert got["depends_on"] == [db["id"]]
        status, events, _ = await api.get("/events", query={"type": "monitor.updated"})
        assert status == 200, events
        (updated,) = [e for e in events["data"] if e["data"]["object"]["id"] == web["id"]]
        assert updated["data"]["previous_attributes"] == {"depends_on": [router["id"], db["id"]]}


async def test_the_suppressed_down_shows_why_on_the_monitor_and_in_its_event(
    api: Api, db: Database
) -> None:
    with trio.fail_after(10):
        router = await create_monitor(api, name="router")
        web = await create_monitor(api, name="web", depends_on=[router["id"]])
        at = int(time.time()) - 30
        await move(db, router["id"], "down", at)
        await move(db, web["id"], "down", at + 10)
        why = {"type": "dependency", "id": router["id"]}
        _, got, _ = await api.get(f"/monitors/{web['id']}")
        assert (got["status"], got["suppressed_by"]) == ("down", why)
        _, events, _ = await api.get("/events", query={"type": "monitor.down"})
        shown = {
            e["data"]["object"]["id"]: e["data"]["object"]["suppressed_by"] for e in events["data"]
        }
        assert shown == {router["id"]: None, web["id"]: why}
        _, incidents, _ = await api.get("/incidents")
        assert [i["monitors"] for i in incidents["data"]] == [[router["id"]]]
