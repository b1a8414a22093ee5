"""Status pages through the API (docs/status-pages.md, API): CRUD, the conventions of
docs/api.md (ids, metadata, pagination, idempotency, errors) and the rules of
docs/status-pages.md (slugs, components). Real app, real Postgres; a time limit inside each
test.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import trio

from tests.api import Api
from tests.web.helpers import assert_error, create_monitor, expect
from web.api.status_pages import StatusPageList, StatusPageObject


async def create_page(api: Api, **fields: Any) -> dict[str, Any]:
    """POST /status-pages; asserts 201 and the object's shape."""
    body = expect(
        await api.post("/status-pages", json={"name": "Acme", "slug": "acme", **fields}), 201
    )
    StatusPageObject.model_validate(body)
    return body  # type: ignore[no-any-return]


async def test_status_page_crud_round_trip(api: Api) -> None:
    with trio.fail_after(15):
        web = await create_monitor(api, name="web-1")
        db = await create_monitor(api, name="db-1")
        components = [
            {"monitor": web["id"], "name": "Website", "group": None},
            {"monitor": db["id"], "name": "Database", "group": "Backend"},
        ]
        page = await create_page(
            api, description="Our services", components=components, metadata={"team": "ops"}
        )
        assert page["id"].startswith("stp_") and page["object"] == "status_page"
        assert page["slug"] == "acme" and page["components"] == components
        assert page["created"] == page["updated"]
        assert expect(await api.get(f"/status-pages/{page['id']}")) == page

        listed = expect(await api.get("/status-pages"))
        StatusPageList.model_validate(listed)
        assert listed["url"] == "/status-pages" and [p["id"] for p in listed["data"]] == [
            page["id"]
        ]

        patched = expect(
            await api.patch(
                f"/status-pages/{page['id']}",
                json={
                    "components": components[1:],
                    "description": None,
                    "metadata": {"team": "", "tier": "1"},
                    "slug": "acme-status",
                },
            )
        )
        assert patched["components"] == components[1:]
        assert patched["description"] is None and patched["metadata"] == {"tier": "1"}
        assert patched["slug"] == "acme-status"
        unchanged = expect(await api.patch(f"/status-pages/{page['id']}", json={"name": "Acme"}))
        assert unchanged["updated"] == patched["updated"]

        assert (await api.delete(f"/status-pages/{page['id']}"))[0] == 204
        assert_error(await api.get(f"/status-pages/{page['id']}"), 404, "resource_missing")
        assert_error(await api.delete(f"/status-pages/{page['id']}"), 404, "resource_missing")
        assert_error(await api.get("/status-pages/mon_nothing"), 404, "resource_missing")


async def test_slugs_are_3_to_60_of_lowercase_digits_and_inner_hyphens(api: Api) -> None:
    with trio.fail_after(15):
        for bad in ("ab", "a" * 61, "-abc", "abc-", "Acme", "ac_me", "ac me", "acmé", ""):
            assert_error(
                await api.post("/status-pages", json={"name": "n", "slug": bad}),
                422,
                "invalid_slug",
                param="slug",
            )
        assert_error(
            await api.post("/status-pages", json={"name": "n", "slug": 123}),
            422,
            "invalid_type",
            param="slug",
        )
        for good in ("abc", "a" * 60, "a-b", "0-9-z", "a--b"):
            await create_page(api, slug=good)
        page = await create_page(api, slug="fine")
        assert_error(
            await api.patch(f"/status-pages/{page['id']}", json={"slug": "Bad"}),
            422,
            "invalid_slug",
        )
        assert_error(
            await api.patch(f"/status-pages/{page['id']}", json={"slug": None}),
            422,
            "invalid_type",
        )


async def test_a_slug_is_unique_over_the_whole_service(
    api: Api, api_for: Callable[..., Awaitable[Api]]
) -> None:
    with trio.fail_after(15):
        other = await api_for(account="globex")
        mine = await create_page(api, slug="shared")
        assert_error(
            await other.post("/status-pages", json={"name": "G", "slug": "shared"}),
            422,
            "slug_taken",
            param="slug",
        )
        theirs = await create_page(other, slug="globex")
        assert_error(
            await other.patch(f"/status-pages/{theirs['id']}", json={"slug": "shared"}),
            422,
            "slug_taken",
            param="slug",
        )
        # keeping one's own slug is no conflict; another account's page is a 404
        expect(await api.patch(f"/status-pages/{mine['id']}", json={"slug": "shared"}))
        assert_error(await other.get(f"/status-pages/{mine['id']}"), 404, "resource_missing")
        assert_error(
            await other.patch(f"/status-pages/{mine['id']}", json={"name": "x"}),
            404,
            "resource_missing",
        )


async def test_racing_creates_of_one_slug_give_one_page_and_slug_taken_never_500(
    api: Api,
) -> None:
    with trio.fail_after(20):
        statuses: list[tuple[int, Any]] = []

        async def attempt(k: int) -> None:
            status, body, _ = await api.post(
                "/status-pages", json={"name": f"racer {k}", "slug": "contested"}
            )
            statuses.append((status, body))

        async with trio.open_nursery() as nursery:
            for k in range(8):
                nursery.start_soon(attempt, k)
        assert sorted(s for s, _ in statuses) == [201] + [422] * 7
        assert {b["error"]["code"] for s, b in statuses if s == 422} == {"slug_taken"}
        assert len(expect(await api.get("/status-pages"))["data"]) == 1


async def test_components_are_the_accounts_own_monitors_at_most_100(
    api: Api, api_for: Callable[..., Awaitable[Api]]
) -> None:
    with trio.fail_after(15):
        other = await api_for(account="globex")
        foreign = await create_monitor(other)
        mine = await create_monitor(api)

        def body(*components: dict[str, Any]) -> dict[str, Any]:
            return {"name": "n", "slug": "comp", "components": list(components)}

        assert_error(
            await api.post("/status-pages", json=body({"monitor": foreign["id"], "name": "X"})),
            422,
            "unknown_monitor",
            param="components",
        )
        assert_error(
            await api.post("/status-pages", json=body({"monitor": "mon_missing", "name": "X"})),
            422,
            "unknown_monitor",
            param="components",
        )
        cases = [
            ({"monitor": "inc_abc", "name": "X"}, "invalid_value"),
            ({"monitor": mine["id"], "name": ""}, "value_too_short"),
            ({"monitor": mine["id"], "name": "x" * 201}, "value_too_long"),
            ({"monitor": mine["id"], "name": "X", "group": "g" * 201}, "value_too_long"),
            ({"monitor": mine["id"], "name": "X", "url": "u"}, "parameter_unknown"),
            ({"name": "X"}, "parameter_missing"),
        ]
        for component, code in cases:
            assert_error(await api.post("/status-pages", json=body(component)), 422, code)
        many = [{"monitor": mine["id"], "name": f"c{k}"} for k in range(101)]
        assert_error(await api.post("/status-pages", json=body(*many)), 422, "value_too_long")
        page = await create_page(api, slug="comp", components=many[:100])
        assert len(page["components"]) == 100 and page["components"][0]["group"] is None
        assert_error(
            await api.patch(
                f"/status-pages/{page['id']}",
                json={"components": [{"monitor": foreign["id"], "name": "X"}]},
            ),
            422,
            "unknown_monitor",
            param="components",
        )


async def test_create_is_idempotent_and_lists_page_by_cursor(api: Api) -> None:
    with trio.fail_after(15):
        key = {"Idempotency-Key": "5d0f3a2e-8c1b-4e7a-9f00-3c2d1b0a9e8f"}
        first = await api.post("/status-pages", json={"name": "B", "slug": "bee"}, headers=key)
        again = await api.post("/status-pages", json={"name": "B", "slug": "bee"}, headers=key)
        assert first[0] == again[0] == 201 and first[1] == again[1]
        assert again[2]["Idempotent-Replayed"] == "true"
        await create_page(api, name="A", slug="aye")
        await create_page(api, name="C", slug="cee")
        by_name = expect(await api.get("/status-pages", query={"sort": "name", "limit": 2}))
        assert [p["name"] for p in by_name["data"]] == ["A", "B"] and by_name["has_more"]
        rest = expect(
            await api.get(
                "/status-pages",
                query={"sort": "name", "starting_after": by_name["data"][-1]["id"]},
            )
        )
        assert [p["name"] for p in rest["data"]] == ["C"] and not rest["has_more"]
        assert_error(
            await api.get("/status-pages", query={"sort": "slug"}), 400, "invalid_parameter"
        )
