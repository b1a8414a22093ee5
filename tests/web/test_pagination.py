"""Cursor pagination and list query parameters (docs/api.md, Conventions and decisions:
sort, cursors; docs/api.md, Error codes).

The order of a list is its sort key, then insertion order (``seq``): objects created in
the same second tie on ``created``, so the tests give ``created`` and ``updated`` values
with many ties and an order unrelated to insertion (by SQL, as the API cannot backdate),
and names with duplicates, then compute the expected order as ``(key, insertion index)``.
Walks go forward with ``starting_after`` and backward with ``ending_before``, also with
objects inserted and deleted between pages (the cursor object itself included).
"""

from __future__ import annotations

import math
import random
from typing import Any

import pytest
import trio

from store import Database, accounts
from tests.api import Api
from tests.web.helpers import (
    assert_error,
    create_incident,
    create_monitor,
    expect,
    set_times,
    sql,
)
from web.api.incidents import IncidentList
from web.api.monitors import MonitorList

BASE = 1_700_000_000
WORDS = ("delta", "alpha", "echo", "charlie", "bravo")
SORTS = ("created", "updated", "name")

MonitorRow = dict[str, Any]


async def _seed_monitors(api: Api, db: Database, count: int) -> list[MonitorRow]:
    """``count`` monitors, in insertion order, with tied and scrambled sort keys."""
    rows: list[MonitorRow] = []
    for i in range(count):
        name = f"{WORDS[i % len(WORDS)]}{(i * 7) % 4:02d}"  # duplicates on purpose
        monitor = await create_monitor(api, name=name)
        created = BASE + (i * 7) % 5
        updated = BASE + 100 + (i * 3) % 4
        await set_times(db, "monitors", monitor["id"], created=created, updated=updated)
        rows.append({"id": monitor["id"], "created": created, "updated": updated, "name": name})
    return rows


def flat(pages: Any) -> list[str]:
    """The pages' ids, one list."""
    return [i for page in pages for i in page]


def _expected(rows: list[MonitorRow], sort: str) -> list[str]:
    """Ids in list order for ``sort`` (rows are in insertion order)."""
    field = sort.removeprefix("-")
    ordered = [r["id"] for _, r in sorted(enumerate(rows), key=lambda p: (p[1][field], p[0]))]
    return ordered[::-1] if sort.startswith("-") else ordered


async def _page(api: Api, path: str, **query: Any) -> dict[str, Any]:
    page = expect(await api.get(path, query=query))
    (MonitorList if path == "/monitors" else IncidentList).model_validate(page)
    assert page["object"] == "list" and page["url"] == path
    return page  # type: ignore[no-any-return]


async def _walk_forward(api: Api, path: str, **query: Any) -> list[list[str]]:
    """Every page from the start, following ``starting_after``; checks has_more."""
    pages: list[list[str]] = []
    page = await _page(api, path, **query)
    while True:
        pages.append([o["id"] for o in page["data"]])
        if not page["has_more"]:
            return pages
        assert page["data"], "has_more with an empty page"
        page = await _page(api, path, starting_after=page["data"][-1]["id"], **query)


async def _walk_backward(api: Api, path: str, last: str, **query: Any) -> list[list[str]]:
    """Every page before ``last``, following ``ending_before``; pages in fetch order."""
    pages: list[list[str]] = []
    cursor = last
    while True:
        page = await _page(api, path, ending_before=cursor, **query)
        pages.append([o["id"] for o in page["data"]])
        if not page["has_more"]:
            return pages
        cursor = page["data"][0]["id"]


async def test_walks_in_both_directions_yield_every_monitor_once_for_every_sort(
    api: Api, db: Database
) -> None:
    with trio.fail_after(30):
        rows = await _seed_monitors(api, db, 25)
        for sort in (*SORTS, *(f"-{s}" for s in SORTS)):
            expected = _expected(rows, sort)
            for limit in (5, 7):
                pages = await _walk_forward(api, "/monitors", sort=sort, limit=limit)
                assert len(pages) == math.ceil(25 / limit), (sort, limit)
                assert all(len(p) == limit for p in pages[:-1])
                assert flat(pages) == expected, (sort, limit)

                back = await _walk_backward(api, "/monitors", expected[-1], sort=sort, limit=limit)
                assert len(back) == math.ceil(24 / limit)
                assert all(len(p) == limit for p in back[:-1])
                assert flat(reversed(back)) == expected[:-1], (sort, limit)

            # the ends: nothing after the last, nothing before the first
            for cursor_name, cursor in (
                ("starting_after", expected[-1]),
                ("ending_before", expected[0]),
            ):
                page = await _page(api, "/monitors", sort=sort, **{cursor_name: cursor})
                assert page["data"] == [] and page["has_more"] is False
            # one page holds them all
            page = await _page(api, "/monitors", sort=sort, limit=100)
            assert [m["id"] for m in page["data"]] == expected and page["has_more"] is False

        # the default sort is -created
        default = await _walk_forward(api, "/monitors")
        assert flat(default) == _expected(rows, "-created")
        assert [len(p) for p in default] == [10, 10, 5]


async def test_incident_walks_follow_created_updated_and_title(api: Api, db: Database) -> None:
    with trio.fail_after(30):
        rows: list[MonitorRow] = []
        for i in range(12):
            title = f"{WORDS[i % len(WORDS)]}{i % 3}"
            incident = await create_incident(api, title=title)
            created, updated = BASE + (i * 5) % 3, BASE + (i * 7) % 4
            await set_times(db, "incidents", incident["id"], created=created, updated=updated)
            rows.append(
                {"id": incident["id"], "created": created, "updated": updated, "name": title}
            )
        for sort in ("created", "-created", "updated", "-updated", "title", "-title"):
            expected = _expected(rows, sort.replace("title", "name"))
            pages = await _walk_forward(api, "/incidents", sort=sort, limit=5)
            assert [len(p) for p in pages] == [5, 5, 2]
            assert flat(pages) == expected, sort
            back = await _walk_backward(api, "/incidents", expected[-1], sort=sort, limit=5)
            assert flat(reversed(back)) == expected[:-1], sort


def _check_walk(
    seen: list[str], expected: list[str], deleted_unseen: set[str], deleted_seen: set[str]
) -> None:
    assert len(seen) == len(set(seen)), "an object came twice"
    assert not set(seen) & deleted_unseen, "an object deleted before its page came"
    survivors = [i for i in expected if i not in deleted_unseen and i not in deleted_seen]
    assert set(survivors) <= set(seen), "an object that existed throughout was skipped"
    original = set(expected)
    assert [i for i in seen if i in original] == [i for i in expected if i in set(seen)], (
        "objects came out of order"
    )


@pytest.mark.parametrize("sort", ["created", "-created", "name", "-name", "updated"])
async def test_walks_survive_inserts_and_deletes_between_pages(
    api: Api, db: Database, sort: str
) -> None:
    with trio.fail_after(30):
        rng = random.Random(sort)
        rows = await _seed_monitors(api, db, 16)
        expected = _expected(rows, sort)

        async def mutate(cursor: str, seen: list[str], unseen: list[str]) -> None:
            # delete the cursor object itself, an object not seen yet and one already
            # seen, and insert a new one that may land anywhere in a name sort
            expect(await api.delete(f"/monitors/{cursor}"), 204)
            deleted_seen.add(cursor)
            if unseen:
                victim = unseen[min(1, len(unseen) - 1)]
                expect(await api.delete(f"/monitors/{victim}"), 204)
                deleted_unseen.add(victim)
            for old in seen:
                if old not in deleted_seen:
                    expect(await api.delete(f"/monitors/{old}"), 204)
                    deleted_seen.add(old)
                    break
            await create_monitor(api, name=f"{rng.choice(WORDS)}{rng.randrange(100):02d}")

        # forward
        deleted_seen: set[str] = set()
        deleted_unseen: set[str] = set()
        seen: list[str] = []
        page = await _page(api, "/monitors", sort=sort, limit=4)
        while True:
            seen += [m["id"] for m in page["data"]]
            if not page["has_more"]:
                break
            cursor = page["data"][-1]["id"]
            unseen = [i for i in expected if i not in seen and i not in deleted_unseen]
            await mutate(cursor, seen, unseen)
            page = await _page(api, "/monitors", sort=sort, limit=4, starting_after=cursor)
        _check_walk(seen, expected, deleted_unseen, deleted_seen)
        assert len(deleted_unseen) >= 2 and len(deleted_seen) >= 4

        # backward, from the end of what is left now
        everything = [
            m["id"] for m in (await _page(api, "/monitors", sort=sort, limit=100))["data"]
        ]
        expected = everything[:-1]
        deleted_seen, deleted_unseen = set(), set()
        pages: list[list[str]] = []
        cursor = everything[-1]
        while True:
            page = await _page(api, "/monitors", sort=sort, limit=3, ending_before=cursor)
            pages.append([m["id"] for m in page["data"]])
            if not page["has_more"]:
                break
            cursor = page["data"][0]["id"]
            seen = flat(reversed(pages))
            unseen = [i for i in reversed(expected) if i not in seen and i not in deleted_unseen]
            await mutate(cursor, seen, unseen)
        seen = flat(reversed(pages))
        _check_walk(seen, expected, deleted_unseen, deleted_seen)
        assert len(pages) >= 3


async def test_monitor_filters_combine_with_pagination(api: Api, db: Database) -> None:
    with trio.fail_after(30):
        names = [
            "Load_Balancer",
            "load%balancer",
            "LOADXBALANCER",
            "payload balancer",
            "back\\slash load",
            "api",
            "unloaded",
            "LoAd",
        ]
        ids = {name: (await create_monitor(api, name=name))["id"] for name in names}
        for kind, url in (("tcp", "db.example.com:5432"), ("ping", "192.0.2.1")):
            for n in range(3):
                ids[f"{kind}{n}"] = (
                    await create_monitor(api, name=f"{kind}{n}", type=kind, url=url)
                )["id"]
        order = list(ids)  # insertion order; default sort is -created: newest first

        def newest_first(selected: list[str]) -> list[str]:
            return [ids[n] for n in reversed(order) if n in selected]

        searches = {
            "load": [
                "Load_Balancer",
                "load%balancer",
                "LOADXBALANCER",
                "payload balancer",
                "back\\slash load",
                "unloaded",
                "LoAd",
            ],
            "LOAD": [
                "Load_Balancer",
                "load%balancer",
                "LOADXBALANCER",
                "payload balancer",
                "back\\slash load",
                "unloaded",
                "LoAd",
            ],
            "d_b": ["Load_Balancer"],
            "_": ["Load_Balancer"],
            "%": ["load%balancer"],
            "d%b": ["load%balancer"],
            "\\": ["back\\slash load"],
            "xbal": ["LOADXBALANCER"],
            "nothing": [],
        }
        for search, matching in searches.items():
            pages = await _walk_forward(api, "/monitors", search=search, limit=2)
            assert flat(pages) == newest_first(matching), search
            assert all(len(p) == 2 for p in pages[:-1])

        # statuses: pause some, and let SQL play the engine for up and down
        for name in ("tcp0", "tcp2", "api"):
            expect(await api.post(f"/monitors/{ids[name]}/pause"))
        await sql(
            db, "UPDATE monitors SET status = 'up' WHERE id = ANY($1)", [ids["ping0"], ids["LoAd"]]
        )
        await sql(db, "UPDATE monitors SET status = 'down' WHERE id = $1", ids["ping1"])
        cases: list[tuple[dict[str, str], list[str]]] = [
            ({"status": "paused"}, ["tcp0", "tcp2", "api"]),
            ({"status": "paused", "type": "tcp"}, ["tcp0", "tcp2"]),
            ({"status": "up"}, ["ping0", "LoAd"]),
            ({"status": "up", "search": "load"}, ["LoAd"]),
            ({"status": "down", "type": "ping"}, ["ping1"]),
            ({"status": "down", "type": "tcp"}, []),
            ({"status": "pending", "type": "ping"}, ["ping2"]),
            (
                {"type": "http", "search": "balancer"},
                ["Load_Balancer", "load%balancer", "LOADXBALANCER", "payload balancer"],
            ),
            ({"type": "tcp"}, ["tcp0", "tcp1", "tcp2"]),
        ]
        for query, matching in cases:
            pages = await _walk_forward(api, "/monitors", limit=1, **query)
            assert flat(pages) == newest_first(matching), query
            if matching:
                back = await _walk_backward(
                    api, "/monitors", newest_first(matching)[-1], limit=1, **query
                )
                assert flat(reversed(back)) == newest_first(matching)[:-1], query
        # the cursor object may leave the filter between pages: the walk goes on from it
        page = await _page(api, "/monitors", status="pending", search="l", limit=2)
        first = [m["id"] for m in page["data"]]
        assert first == newest_first(["unloaded", "back\\slash load"])
        expect(await api.post(f"/monitors/{first[-1]}/pause"))
        page = await _page(
            api, "/monitors", status="pending", search="l", limit=2, starting_after=first[-1]
        )
        assert [m["id"] for m in page["data"]] == newest_first(
            ["payload balancer", "LOADXBALANCER"]
        )
        assert page["has_more"] is True
        # a filtered walk in name order
        pages = await _walk_forward(api, "/monitors", type="tcp", sort="-name", limit=2)
        assert flat(pages) == [ids["tcp2"], ids["tcp1"], ids["tcp0"]]


async def test_incident_filters_combine_with_pagination(api: Api) -> None:
    with trio.fail_after(30):
        specs = [
            ("investigating", "critical"),
            ("identified", "major"),
            ("monitoring", "critical"),
            ("resolved", "minor"),
            ("investigating", "maintenance"),
            ("resolved", "critical"),
            ("monitoring", "critical"),
            ("identified", "minor"),
        ]
        made = [await create_incident(api, status=s, severity=v) for s, v in specs]
        # resolved through resolve, and reopened through PATCH
        expect(await api.post(f"/incidents/{made[0]['id']}/resolve"))
        expect(await api.patch(f"/incidents/{made[5]['id']}", json={"status": "monitoring"}))
        current = [dict(zip(("status", "severity"), s, strict=True)) for s in specs]
        current[0]["status"], current[5]["status"] = "resolved", "monitoring"

        def newest_first(**want: Any) -> list[str]:
            out = []
            for index in reversed(range(len(made))):
                c = current[index]
                resolved = c["status"] == "resolved"
                if all((resolved == v) if k == "resolved" else c[k] == v for k, v in want.items()):
                    out.append(made[index]["id"])
            return out

        cases: list[dict[str, Any]] = [
            {"resolved": True},
            {"resolved": False},
            {"status": "resolved"},
            {"status": "monitoring"},
            {"severity": "critical"},
            {"severity": "critical", "resolved": False},
            {"status": "monitoring", "severity": "critical"},
            {"status": "identified", "severity": "minor"},
            {"severity": "maintenance", "resolved": True},
        ]
        for want in cases:
            query = {
                k: ("true" if v is True else "false" if v is False else v) for k, v in want.items()
            }
            pages = await _walk_forward(api, "/incidents", limit=2, **query)
            assert flat(pages) == newest_first(**want), want
            assert all(len(p) == 2 for p in pages[:-1])
        page = await _page(api, "/incidents", resolved="true", limit=100)
        assert all(i["resolved_at"] is not None for i in page["data"]) and page["data"]


async def _insert_incidents(connection: Any, account_id: str, count: int) -> None:
    await connection.execute(
        "INSERT INTO incidents (id, account_id, title, status, severity, created, updated) "
        "SELECT 'inc_bulk' || n, $1, 'bulk ' || n, 'investigating', 'major', $2, $2 "
        "FROM generate_series(1, $3) AS n",
        account_id,
        BASE,
        count,
    )


async def test_limit_bounds_and_malformed_limits(api: Api, db: Database) -> None:
    with trio.fail_after(20):
        account = await db.run(accounts.get_account, "acme")
        assert account is not None
        await db.run(_insert_incidents, account.id, 101)
        for _ in range(2):
            await create_monitor(api)
        for limit, size, has_more in ((1, 1, True), (100, 100, True), (None, 10, True)):
            query = {} if limit is None else {"limit": limit}
            page = await _page(api, "/incidents", **query)
            assert len(page["data"]) == size and page["has_more"] is has_more
        page = await _page(api, "/incidents", limit=1, starting_after="inc_bulk2")
        assert [i["id"] for i in page["data"]] == ["inc_bulk1"] and page["has_more"] is False
        page = await _page(api, "/monitors", limit=1)
        assert len(page["data"]) == 1 and page["has_more"] is True
        page = await _page(api, "/monitors", limit=2)
        assert len(page["data"]) == 2 and page["has_more"] is False

        for path in ("/monitors", "/incidents"):
            for raw in ("0", "101", "-1", "abc", "1.5", "", " 5", "1e2", "99999999"):
                assert_error(
                    await api.get(f"{path}?limit={raw}"), 400, "invalid_parameter", param="limit"
                )
            assert_error(
                await api.get(f"{path}?limit=1&limit=2"), 400, "invalid_parameter", param="limit"
            )


async def test_sort_values_and_other_query_parameter_errors(api: Api) -> None:
    with trio.fail_after(20):
        monitor = await create_monitor(api)
        incident = await create_incident(api)
        valid = {
            "/monitors": ("created", "updated", "name"),
            "/incidents": ("created", "updated", "title"),
        }
        for path, fields in valid.items():
            for field in fields:
                for sort in (field, f"-{field}"):
                    assert (await _page(api, path, sort=sort))["data"]
            bad = ["--created", "+created", "Created", "created ", "status", "id", "seq", "-"]
            bad.append("title" if path == "/monitors" else "name")
            for sort in bad:
                assert_error(
                    await api.get(path, query={"sort": sort}),
                    400,
                    "invalid_parameter",
                    param="sort",
                )
            assert_error(
                await api.get(f"{path}?sort=name&sort=created"),
                400,
                "invalid_parameter",
                param="sort",
            )
            for name in (
                "page",
                "offset",
                "Limit",
                "expand[]",
                "search" if path == "/incidents" else "resolved",
            ):
                assert_error(
                    await api.get(path, query={name: "1"}), 400, "unknown_parameter", param=name
                )
        filters = {
            "/monitors": {"status": "open", "type": "smtp", "search": ""},
            "/incidents": {"status": "open", "severity": "low", "resolved": "yes"},
        }
        for path, values in filters.items():
            for name, value in values.items():
                assert_error(
                    await api.get(path, query={name: value}), 400, "invalid_parameter", param=name
                )
        assert_error(
            await api.get("/monitors", query={"search": "x" * 201}),
            400,
            "invalid_parameter",
            param="search",
        )
        assert_error(await api.get("/incidents?resolved=True"), 400, "invalid_parameter")

        # cursors: both at once, unknown ids, ids of another kind, malformed
        for path, own, other in (
            ("/monitors", monitor["id"], incident["id"]),
            ("/incidents", incident["id"], monitor["id"]),
        ):
            assert_error(
                await api.get(path, query={"starting_after": own, "ending_before": own}),
                400,
                "cursor_conflict",
            )
            prefix = own.split("_")[0]
            for name in ("starting_after", "ending_before"):
                for cursor in (f"{prefix}_doesnotexist", other, "garbage", "", f"{prefix}_UPPER"):
                    assert_error(
                        await api.get(path, query={name: cursor}),
                        400,
                        "cursor_not_found",
                        param=name,
                    )
