"""Account isolation (docs/api.md, Error codes: another account's resource is 404
``resource_missing``, exactly as if it did not exist): every endpoint, both resources, lists
and cursors.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import trio

from tests.api import Api
from tests.web.helpers import assert_error, create_incident, create_monitor, expect


def _without_ids(error: dict[str, Any], *ids: str) -> dict[str, Any]:
    """The error without what differs between two requests: its request id and the id
    of the object named in the message."""
    message = error["message"]
    for value in ids:
        message = message.replace(value, "<id>")
    return {**error, "request_id": None, "message": message}


async def test_another_accounts_objects_are_404_exactly_like_missing_ones(
    api: Api, api_for: Callable[..., Awaitable[Api]]
) -> None:
    with trio.fail_after(20):
        other = await api_for(account="globex")
        monitor = await create_monitor(api, metadata={"owner": "acme"})
        incident = await create_incident(api)
        missing = {"mon": "mon_" + "a" * 24, "inc": "inc_" + "a" * 24}
        calls: list[tuple[str, str, str, Any]] = [
            ("GET", "mon", "/monitors/{}", None),
            ("GET", "mon", "/monitors/{}/checks", None),
            ("PATCH", "mon", "/monitors/{}", {"name": "stolen"}),
            ("POST", "mon", "/monitors/{}/pause", None),
            ("POST", "mon", "/monitors/{}/resume", None),
            ("DELETE", "mon", "/monitors/{}", None),
            ("GET", "inc", "/incidents/{}", None),
            ("PATCH", "inc", "/incidents/{}", {"title": "stolen"}),
            ("POST", "inc", "/incidents/{}/resolve", None),
            ("DELETE", "inc", "/incidents/{}", None),
        ]
        owned = {"mon": monitor["id"], "inc": incident["id"]}
        for method, kind, template, body in calls:
            theirs = await other.request(method, template.format(owned[kind]), json=body)
            absent = await other.request(method, template.format(missing[kind]), json=body)
            error = assert_error(theirs, 404, "resource_missing", param="id")
            assert_error(absent, 404, "resource_missing", param="id")
            assert _without_ids(error, owned[kind]) == _without_ids(
                absent[1]["error"], missing[kind]
            ), (method, template)
            assert set(theirs[2].keys()) == set(absent[2].keys())

        # nothing happened to acme's objects
        assert expect(await api.get(f"/monitors/{monitor['id']}")) == monitor
        assert expect(await api.get(f"/incidents/{incident['id']}")) == incident

        # the same calls work for the owner
        expect(await api.post(f"/monitors/{monitor['id']}/pause"))
        expect(await api.post(f"/incidents/{incident['id']}/resolve"))


async def test_lists_and_cursors_never_cross_accounts(
    api: Api, api_for: Callable[..., Awaitable[Api]]
) -> None:
    with trio.fail_after(20):
        other = await api_for(account="globex")
        mine = [await create_monitor(api, name=f"acme{i}") for i in range(3)]
        my_incidents = [await create_incident(api, title=f"acme{i}") for i in range(2)]
        theirs = await create_monitor(other, name="globex0")
        their_incident = await create_incident(other, title="globex0")

        for query in (
            {},
            {"search": "acme"},
            {"type": "http"},
            {"status": "pending"},
            {"sort": "name"},
        ):
            data = expect(await other.get("/monitors", query={**query, "limit": 100}))["data"]
            assert [m["id"] for m in data] == ([theirs["id"]] if "search" not in query else [])
        for query in ({}, {"resolved": "false"}, {"sort": "title"}):
            data = expect(await other.get("/incidents", query={**query, "limit": 100}))["data"]
            assert [i["id"] for i in data] == [their_incident["id"]]
        data = expect(await api.get("/monitors", query={"limit": 100}))["data"]
        assert {m["id"] for m in data} == {m["id"] for m in mine}
        data = expect(await api.get("/incidents", query={"limit": 100}))["data"]
        assert {i["id"] for i in data} == {i["id"] for i in my_incidents}

        # acme's ids are unknown cursors for globex, also once deleted (tombstones)
        expect(await api.delete(f"/monitors/{mine[0]['id']}"), 204)
        expect(await api.delete(f"/incidents/{my_incidents[0]['id']}"), 204)
        for path, objects in (("/monitors", mine), ("/incidents", my_incidents)):
            for obj in objects:
                for name in ("starting_after", "ending_before"):
                    assert_error(
                        await other.get(path, query={name: obj["id"]}),
                        400,
                        "cursor_not_found",
                        param=name,
                    )
        # while the owner may still page on from its deleted object
        page = expect(await api.get("/monitors", query={"starting_after": mine[0]["id"]}))
        assert page["data"] == []
        page = expect(await api.get("/monitors", query={"ending_before": mine[0]["id"]}))
        assert [m["id"] for m in page["data"]] == [m["id"] for m in reversed(mine[1:])]
