"""Webhook endpoints through the API (docs/webhooks.md): create, read, list, update, delete,
rotate the secret, list deliveries; validation, isolation between accounts, idempotency.
Deliveries are made by the database's fan-out trigger when events are written (``POST
/incidents``, ``POST /monitors``); nothing is sent here (no sender runs).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import trio

from store import Database
from store.webhooks import MAX_ENDPOINTS
from tests.api import Api
from tests.web.helpers import assert_error, create_incident, create_monitor, expect, sql
from web.api.events import EVENT_TYPES
from web.api.webhooks import WebhookDeliveryList, WebhookEndpointList, WebhookEndpointObject
from web.http.auth import EVENT_READ_PERMISSIONS
from web.routes import PERMISSIONS

URL = "https://hooks.example.com/uptrio"


async def create(api: Api, **fields: Any) -> dict[str, Any]:
    body = {"url": URL, "enabled_events": ["*"], **fields}
    created: dict[str, Any] = expect(await api.post("/webhook-endpoints", json=body), 201)
    WebhookEndpointObject.model_validate(created)
    return created


async def test_create_shows_the_secret_once(api: Api) -> None:
    with trio.fail_after(10):
        created = await create(
            api, description="pager", metadata={"team": "ops"}, enabled_events=["monitor.*"]
        )
        assert created["id"].startswith("we_") and created["object"] == "webhook_endpoint"
        assert created["secret"].startswith("whsec_") and len(created["secret"]) > 40
        assert created["status"] == "enabled" and created["enabled_events"] == ["monitor.*"]
        assert created["description"] == "pager" and created["metadata"] == {"team": "ops"}
        assert created["created"] == created["updated"]
        fetched = expect(await api.get(f"/webhook-endpoints/{created['id']}"))
        assert "secret" not in fetched
        assert fetched == {k: v for k, v in created.items() if k != "secret"}
        listed = expect(await api.get("/webhook-endpoints"))
        WebhookEndpointList.model_validate(listed)
        assert listed["url"] == "/webhook-endpoints" and listed["data"] == [fetched]


async def test_update_changes_only_what_is_sent_and_merges_metadata(api: Api) -> None:
    with trio.fail_after(10):
        created = await create(api, description="d", metadata={"a": "1", "b": "2"})
        path = f"/webhook-endpoints/{created['id']}"
        updated = expect(
            await api.patch(
                path,
                json={
                    "url": "http://hooks.example.com/v2",
                    "enabled_events": ["incident.created", "monitor.down", "monitor.down"],
                    "description": None,
                    "status": "disabled",
                    "metadata": {"a": "", "c": "3"},
                },
            )
        )
        assert updated["url"] == "http://hooks.example.com/v2"
        assert updated["enabled_events"] == ["incident.created", "monitor.down"]
        assert updated["description"] is None and updated["status"] == "disabled"
        assert updated["metadata"] == {"b": "2", "c": "3"}
        assert "secret" not in updated
        assert expect(await api.patch(path, json={"enabled_events": ["*", "monitor.up"]}))[
            "enabled_events"
        ] == ["*"]


async def test_rotating_gives_a_new_secret_and_keeps_the_old_one_a_day(
    api: Api, db: Database
) -> None:
    with trio.fail_after(10):
        created = await create(api)
        rotated = expect(await api.post(f"/webhook-endpoints/{created['id']}/rotate-secret"))
        assert rotated["secret"] != created["secret"] and rotated["secret"].startswith("whsec_")
        assert rotated["id"] == created["id"]
        row = await db.run(_endpoint_row, created["id"])
        assert row["previous_secret"] == created["secret"]
        assert row["previous_secret_expires_at"] - rotated["updated"] == 86_400
        missing = await api.post("/webhook-endpoints/we_nothere/rotate-secret")
        assert_error(missing, 404, "resource_missing", param="id")


async def _endpoint_row(connection: Any, endpoint_id: str) -> Any:
    return await connection.fetchrow("SELECT * FROM webhook_endpoints WHERE id = $1", endpoint_id)


async def test_delete_removes_the_endpoint_and_its_deliveries(api: Api, db: Database) -> None:
    with trio.fail_after(10):
        created = await create(api)
        await create_incident(api)
        path = f"/webhook-endpoints/{created['id']}"
        assert len(expect(await api.get(f"{path}/deliveries"))["data"]) == 1
        status, body, _ = await api.delete(path)
        assert status == 204 and body is None
        assert_error(await api.get(path), 404, "resource_missing")
        assert_error(await api.get(f"{path}/deliveries"), 404, "resource_missing")
        assert_error(await api.delete(path), 404, "resource_missing")
        assert await db.run(_count, "webhook_deliveries") == 0
        # the deleted endpoint still works as a cursor (nothing is older than it)
        newer = await create(api)
        page = expect(await api.get("/webhook-endpoints", query={"starting_after": created["id"]}))
        assert page["data"] == []
        page = expect(await api.get("/webhook-endpoints", query={"ending_before": created["id"]}))
        assert [e["id"] for e in page["data"]] == [newer["id"]]


async def _count(connection: Any, table: str) -> int:
    return int(await connection.fetchval(f"SELECT count(*) FROM {table}"))


@pytest.mark.parametrize(
    ("body", "code", "param"),
    [
        ({"url": "ftp://hooks.example.com/"}, "invalid_url", "url"),
        ({"url": "hooks.example.com/x"}, "invalid_url", "url"),
        ({"url": "http://169.254.169.254/latest"}, "target_not_allowed", "url"),
        ({"url": "http://metadata.google.internal/"}, "target_not_allowed", "url"),
        ({"url": "http://0xa9fea9fe/"}, "target_not_allowed", "url"),  # 169.254.169.254
        ({"url": "http://0xa9.0xfe.0xa9.0xfe/"}, "target_not_allowed", "url"),
        ({"url": "https://x.example/" + "a" * 2048}, "value_too_long", "url"),
        ({"enabled_events": []}, "value_too_short", "enabled_events"),
        ({"enabled_events": ["monitor.exploded"]}, "unknown_event_type", "enabled_events"),
        ({"enabled_events": ["webhook.*"]}, "unknown_event_type", "enabled_events"),
        ({"enabled_events": ["monitor."]}, "unknown_event_type", "enabled_events"),
        ({"enabled_events": "*"}, "invalid_type", "enabled_events"),
        ({"enabled_events": ["x"] * 101}, "value_too_long", "enabled_events"),
        ({"status": "disabled"}, "parameter_unknown", "status"),
        ({"secret": "whsec_mine"}, "parameter_unknown", "secret"),
        ({"metadata": {"k" * 41: "v"}}, "metadata_key_too_long", "metadata"),
    ],
)
async def test_create_refuses_invalid_bodies(
    api: Api, body: dict[str, Any], code: str, param: str
) -> None:
    with trio.fail_after(10):
        full = {"url": URL, "enabled_events": ["*"], **body}
        assert_error(await api.post("/webhook-endpoints", json=full), 422, code, param=param)
        assert expect(await api.get("/webhook-endpoints"))["data"] == []


async def test_create_requires_url_and_events(api: Api) -> None:
    with trio.fail_after(10):
        response = await api.post("/webhook-endpoints", json={"url": URL})
        assert_error(response, 422, "parameter_missing", param="enabled_events")
        response = await api.post("/webhook-endpoints", json={"enabled_events": ["*"]})
        assert_error(response, 422, "parameter_missing", param="url")


@pytest.mark.parametrize(
    ("body", "code", "param"),
    [
        ({"url": "http://169.254.169.254/"}, "target_not_allowed", "url"),
        ({"url": "http://169.254.0xa9fe/"}, "target_not_allowed", "url"),
        ({"url": "mailto:ops@example.com"}, "invalid_url", "url"),
        ({"status": "paused"}, "invalid_value", "status"),
        ({"url": None}, "invalid_type", "url"),
        ({"enabled_events": None}, "invalid_type", "enabled_events"),
        ({"enabled_events": ["nope"]}, "unknown_event_type", "enabled_events"),
    ],
)
async def test_update_refuses_invalid_bodies(
    api: Api, body: dict[str, Any], code: str, param: str
) -> None:
    with trio.fail_after(10):
        created = await create(api)
        path = f"/webhook-endpoints/{created['id']}"
        assert_error(await api.patch(path, json=body), 422, code, param=param)
        after = expect(await api.get(path))
        assert after == {k: v for k, v in created.items() if k != "secret"}


async def test_deliveries_follow_subscriptions_newest_first_with_filters_and_cursors(
    api: Api, db: Database
) -> None:
    with trio.fail_after(15):
        everything = await create(api)
        monitors_only = await create(api, enabled_events=["monitor.*"])
        exact = await create(api, enabled_events=["incident.resolved"])
        disabled = await create(api)
        expect(await api.patch(f"/webhook-endpoints/{disabled['id']}", json={"status": "disabled"}))
        incidents = [await create_incident(api, title=f"i{n}") for n in range(3)]
        await create_monitor(api)
        path = f"/webhook-endpoints/{everything['id']}/deliveries"
        page = expect(await api.get(path))
        WebhookDeliveryList.model_validate(page)
        assert page["url"] == path and not page["has_more"]
        assert len(page["data"]) == 4
        events = [expect(await api.get(f"/events/{d['event']}")) for d in page["data"]]
        assert [e["type"] for e in events] == ["monitor.created"] + ["incident.created"] * 3
        assert [e["data"]["object"]["id"] for e in events[1:]] == [i["id"] for i in incidents][::-1]
        first = page["data"][0]
        assert first["status"] == "pending" and first["attempts"] == 0
        assert first["last_attempt"] is None and isinstance(first["next_attempt_at"], int)
        assert first["endpoint"] == everything["id"]

        monitors_page = expect(
            await api.get(f"/webhook-endpoints/{monitors_only['id']}/deliveries")
        )
        assert len(monitors_page["data"]) == 1
        for hook in (exact, disabled):
            assert (
                expect(await api.get(f"/webhook-endpoints/{hook['id']}/deliveries"))["data"] == []
            )

        two = expect(await api.get(path, query={"limit": 2}))
        assert two["has_more"] and [d["id"] for d in two["data"]] == [
            d["id"] for d in page["data"][:2]
        ]
        rest = expect(await api.get(path, query={"starting_after": two["data"][1]["id"]}))
        assert [d["id"] for d in rest["data"]] == [d["id"] for d in page["data"][2:]]
        back = expect(await api.get(path, query={"ending_before": rest["data"][0]["id"]}))
        assert [d["id"] for d in back["data"]] == [d["id"] for d in page["data"][:2]]

        await sql(
            db,
            "UPDATE webhook_deliveries SET status = 'succeeded', next_attempt_at = NULL, "
            "attempts = 1, last_attempt_at = created, last_response_status = 204, "
            "last_duration_ms = 12.5 WHERE id = $1",
            first["id"],
        )
        done = expect(await api.get(path, query={"status": "succeeded"}))["data"]
        assert [d["id"] for d in done] == [first["id"]]
        assert done[0]["next_attempt_at"] is None
        assert done[0]["last_attempt"] == {
            "at": first["created"],
            "response_status": 204,
            "error": None,
            "duration_ms": 12.5,
        }
        assert len(expect(await api.get(path, query={"status": "pending"}))["data"]) == 3
        for query, param in (
            ({"status": "done"}, "status"),
            ({"sort": "created"}, "sort"),
            ({"starting_after": "we_x"}, "starting_after"),
        ):
            response = await api.get(path, query=query)
            assert response[0] == 400 and response[1]["error"]["param"] == param, response


async def test_another_account_sees_nothing(
    api: Api, api_for: Callable[..., Awaitable[Api]]
) -> None:
    with trio.fail_after(10):
        created = await create(api)
        other = await api_for(account="other")
        path = f"/webhook-endpoints/{created['id']}"
        assert expect(await other.get("/webhook-endpoints"))["data"] == []
        for method, suffix in (
            ("GET", ""),
            ("PATCH", ""),
            ("DELETE", ""),
            ("POST", "/rotate-secret"),
            ("GET", "/deliveries"),
        ):
            body = {"description": "x"} if method == "PATCH" else None
            response = await other.request(method, path + suffix, json=body)
            assert_error(response, 404, "resource_missing", param="id")
        # other's events do not reach this account's endpoint
        await create_incident(other)
        assert expect(await api.get(f"{path}/deliveries"))["data"] == []


async def test_an_idempotency_key_replays_the_create(api: Api) -> None:
    with trio.fail_after(10):
        headers = {"Idempotency-Key": "5b3f2c1e-8f0a-4d6b-9a1c-2e7d4f6a8b90"}
        body = {"url": URL, "enabled_events": ["*"]}
        first = await api.post("/webhook-endpoints", json=body, headers=headers)
        second = await api.post("/webhook-endpoints", json=body, headers=headers)
        assert first[0] == second[0] == 201
        assert first[1] == second[1]
        assert second[2]["Idempotent-Replayed"] == "true"
        assert len(expect(await api.get("/webhook-endpoints"))["data"]) == 1


WEBHOOKS = ["webhooks.read", "webhooks.create", "webhooks.update", "webhooks.delete"]


async def test_an_endpoint_subscribes_only_to_events_its_token_may_read(
    api: Api, api_for: Callable[..., Awaitable[Api]]
) -> None:
    # a token that is refused GET /monitors would otherwise read monitors (their
    # request_headers, bearer secrets included) through an endpoint of its own
    with trio.fail_after(15):
        hooks_only = await api_for(permissions=WEBHOOKS)
        assert_error(await hooks_only.get("/monitors"), 403, "missing_permission")
        incidents = await api_for(permissions=[*WEBHOOKS, "incidents.read"])
        for who, events, lacking in (
            (hooks_only, ["*"], "monitors.read"),
            (hooks_only, ["monitor.*"], "monitors.read"),
            (hooks_only, ["heartbeat.down"], "heartbeats.read"),
            (hooks_only, ["incident.created"], "incidents.read"),
            (incidents, ["*"], "monitors.read"),
            (incidents, ["incident.*", "monitor.down"], "monitors.read"),
        ):
            body = {"url": URL, "enabled_events": events}
            response = await who.post("/webhook-endpoints", json=body)
            error = assert_error(response, 403, "missing_permission", param="enabled_events")
            assert lacking in error["message"], (events, error)
        assert expect(await api.get("/webhook-endpoints"))["data"] == []
        mine = expect(
            await incidents.post(
                "/webhook-endpoints", json={"url": URL, "enabled_events": ["incident.*"]}
            ),
            201,
        )
        # checked again on PATCH: on what the endpoint would subscribe to afterwards
        path = f"/webhook-endpoints/{mine['id']}"
        for body in ({"enabled_events": ["*"]}, {"enabled_events": ["heartbeat.up"]}):
            response = await incidents.patch(path, json=body)
            assert_error(response, 403, "missing_permission", param="enabled_events")
        expect(await incidents.patch(path, json={"enabled_events": ["incident.resolved"]}))
        # an endpoint that takes everything (made by a token that reads everything) is
        # not the narrower token's to point elsewhere, rename or re-key
        everything = await create(api)
        path = f"/webhook-endpoints/{everything['id']}"
        for method, suffix, body in (
            ("PATCH", "", {"url": "https://attacker.example/"}),
            ("PATCH", "", {"status": "disabled"}),
            ("PATCH", "", {"description": "mine now"}),
            ("POST", "/rotate-secret", None),
        ):
            response = await incidents.request(method, path + suffix, json=body)
            assert_error(response, 403, "missing_permission", param="enabled_events")
        after = expect(await api.get(path))
        assert after == {k: v for k, v in everything.items() if k != "secret"}
        # it may still read, list and delete it (webhooks.read, webhooks.delete)
        expect(await incidents.get(f"{path}/deliveries"))
        assert (await incidents.delete(path))[0] == 204


def test_every_event_family_has_a_read_permission() -> None:
    # a family without one would be a 500 at subscription, and unreadable by /events
    assert {t.split(".")[0] for t in EVENT_TYPES} == set(EVENT_READ_PERMISSIONS)
    assert set(EVENT_READ_PERMISSIONS.values()) <= set(PERMISSIONS)


async def test_an_account_has_at_most_16_endpoints(
    api: Api, api_for: Callable[..., Awaitable[Api]]
) -> None:
    with trio.fail_after(30):
        assert MAX_ENDPOINTS == 16  # docs/webhooks.md's figure
        # created concurrently: the count and the insert are one step
        results: list[int] = []

        async def attempt(n: int) -> None:
            body = {"url": f"{URL}/{n}", "enabled_events": ["incident.*"]}
            results.append((await api.post("/webhook-endpoints", json=body))[0])

        async with trio.open_nursery() as nursery:
            for n in range(MAX_ENDPOINTS + 4):
                nursery.start_soon(attempt, n)
        assert sorted(results) == [201] * MAX_ENDPOINTS + [422] * 4
        response = await api.post("/webhook-endpoints", json={"url": URL, "enabled_events": ["*"]})
        error = assert_error(response, 422, "endpoint_limit_reached", param=None)
        assert "16" in error["message"]
        page = expect(await api.get("/webhook-endpoints", query={"limit": 100}))
        assert len(page["data"]) == MAX_ENDPOINTS
        # disabled ones count too; deleting one makes room
        first = page["data"][-1]["id"]
        expect(await api.patch(f"/webhook-endpoints/{first}", json={"status": "disabled"}))
        assert (await api.post("/webhook-endpoints", json={"url": URL, "enabled_events": ["*"]}))[
            0
        ] == 422
        assert (await api.delete(f"/webhook-endpoints/{first}"))[0] == 204
        await create(api)
        # another account has its own 16
        await create(await api_for(account="other"))
