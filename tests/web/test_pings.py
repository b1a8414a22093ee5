"""The public ping endpoints with a real engine (docs/heartbeats.md, The ping endpoints): a
ping brings a heartbeat up, /fail takes it down at once with its incident, /start gives the
next ping a duration; unknown keys get 404; a flood on one key gets 429 while other keys go
on; a paused heartbeat's pings are recorded; the pings list. Real app, real engine and store
actor, real Postgres; no deadline is waited for here (tests/engine/test_heartbeat_actor.py
drives those with MockClock).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator
from functools import partial
from typing import TYPE_CHECKING, Any

import pytest
import trio

from engine import Engine, EngineSettings, Prober, run_engine
from store import Database, StoreSettings, StoreWriter, run_store_writer
from tests.api import Api, web_deps
from tests.web.helpers import assert_error, expect
from tests.web.test_heartbeats import create_heartbeat
from web.api.heartbeats import PingList
from web.http.deps import Dependencies, apply_nothing, no_pings
from web.process.app import create_app

if TYPE_CHECKING:
    from quart.typing import TestClientProtocol


@pytest.fixture
async def writer(db: Database, nursery: trio.Nursery) -> AsyncIterator[StoreWriter]:
    writer: StoreWriter = await nursery.start(
        partial(run_store_writer, db, StoreSettings(batch_age_seconds=0.02))
    )
    yield writer


@pytest.fixture
async def engine(db: Database, nursery: trio.Nursery, writer: StoreWriter) -> Engine:
    engine: Engine = await nursery.start(
        run_engine, db, writer, Prober(), EngineSettings(shard_count=2)
    )
    return engine


@pytest.fixture
def deps(deps: Dependencies) -> Dependencies:
    """The app's dependencies, with 10 pings a minute per key (a short flood)."""
    return dataclasses.replace(
        deps, settings=dataclasses.replace(deps.settings, pings_per_minute=10)
    )


async def ping(
    client: TestClientProtocol, url: str, suffix: str = "", method: str = "GET"
) -> tuple[int, Any, Any]:
    """A ping without a token: (status, body text or JSON, headers)."""
    response = await client.open(url.removeprefix("http://localhost") + suffix, method=method)
    raw = await response.get_data(as_text=True)
    body: Any = raw
    if response.content_type == "application/json":
        body = json.loads(raw)
    return response.status_code, body, response.headers


async def status_of(api: Api, writer: StoreWriter, heartbeat_id: str) -> dict[str, Any]:
    await writer.flush()
    return expect(await api.get(f"/heartbeats/{heartbeat_id}"))  # type: ignore[no-any-return]


async def test_ping_up_fail_down_start_duration_and_the_pings_list(
    api: Api, client: TestClientProtocol, writer: StoreWriter
) -> None:
    with trio.fail_after(20):
        beat = await create_heartbeat(api, name="nightly backup")
        url = beat["ping_url"]
        status, body, headers = await ping(client, url)
        assert (status, body) == (200, "OK\n")
        assert headers["Request-Id"].startswith("req_") and "Service-Version" in headers
        up = await status_of(api, writer, beat["id"])
        assert up["status"] == "up" and up["last_ping_at"] is not None

        assert (await ping(client, url, "/fail", method="POST"))[0] == 200
        down = await status_of(api, writer, beat["id"])
        assert down["status"] == "down"
        incidents = expect(await api.get("/incidents"))["data"]
        assert [(i["title"], i["monitor"], i["status"]) for i in incidents] == [
            ("nightly backup is down", beat["id"], "investigating")
        ]
        assert "/fail" in incidents[0]["description"]

        assert (await ping(client, url, "/start", method="HEAD"))[0] == 200
        await trio.sleep(0.05)
        assert (await ping(client, url))[0] == 200
        again = await status_of(api, writer, beat["id"])
        assert again["status"] == "up"
        resolved = expect(await api.get(f"/incidents/{incidents[0]['id']}"))
        assert resolved["status"] == "resolved"
        assert resolved["resolution_message"].startswith("nightly backup is up again after ")

        listed = expect(await api.get(f"/heartbeats/{beat['id']}/pings"))
        PingList.model_validate(listed)
        assert [p["kind"] for p in listed["data"]] == ["success", "start", "fail", "success"]
        latest = listed["data"][0]
        assert latest["duration_ms"] is not None and latest["duration_ms"] >= 50
        assert latest["source_ip"] is not None and latest["heartbeat"] == beat["id"]
        assert all(p["duration_ms"] is None for p in listed["data"][1:])
        fails = expect(await api.get(f"/heartbeats/{beat['id']}/pings", query={"kind": "fail"}))
        assert [p["kind"] for p in fails["data"]] == ["fail"]
        page = expect(await api.get(f"/heartbeats/{beat['id']}/pings", query={"limit": 2}))
        rest = expect(
            await api.get(
                f"/heartbeats/{beat['id']}/pings",
                query={"starting_after": page["data"][-1]["id"]},
            )
        )
        assert page["has_more"] and not rest["has_more"]
        assert [p["id"] for p in page["data"] + rest["data"]] == [p["id"] for p in listed["data"]]
        events = expect(await api.get("/events", query={"type": "heartbeat.*"}))["data"]
        assert [e["type"] for e in events] == [
            "heartbeat.up",
            "heartbeat.down",
            "heartbeat.up",
            "heartbeat.created",
        ]


async def test_unknown_and_malformed_keys_get_404_and_a_deleted_key_too(
    api: Api, client: TestClientProtocol, writer: StoreWriter
) -> None:
    with trio.fail_after(20):
        for path in ("/ping/" + "0" * 32, "/ping/" + "0" * 32 + "/fail", "/ping/XYZ", "/ping/"):
            status, body, headers = await ping(client, path)
            if path == "/ping/":
                assert status == 404
                continue
            assert_error((status, body, headers), 404, "resource_missing", param="key")
        beat = await create_heartbeat(api)
        assert (await ping(client, beat["ping_url"]))[0] == 200
        assert (await api.delete(f"/heartbeats/{beat['id']}"))[0] == 204
        status, body, headers = await ping(client, beat["ping_url"])
        assert_error((status, body, headers), 404, "resource_missing", param="key")
        assert_error(await ping(client, beat["ping_url"], "/nope"), 404, "route_not_found")


async def test_a_flood_on_one_key_is_limited_and_other_keys_are_not(
    api: Api, client: TestClientProtocol, writer: StoreWriter
) -> None:
    with trio.fail_after(30):
        flooded = await create_heartbeat(api, name="flooded")
        quiet = await create_heartbeat(api, name="quiet")
        answers = [(await ping(client, flooded["ping_url"]))[0] for _ in range(25)]
        assert answers == [200] * 10 + [429] * 15
        status, body, headers = await ping(client, flooded["ping_url"], "/start")
        assert_error((status, body, headers), 429, "rate_limited", type="rate_limit_error")
        assert int(headers["Retry-After"]) >= 1 and headers["X-RateLimit-Remaining"] == "0"
        assert [(await ping(client, quiet["ping_url"]))[0] for _ in range(10)] == [200] * 10
        await writer.flush()
        counted = expect(await api.get(f"/heartbeats/{flooded['id']}/pings", query={"limit": 100}))
        assert len(counted["data"]) == 10  # a refused ping is not recorded


async def test_a_paused_heartbeat_records_pings_and_stays_paused(
    api: Api, client: TestClientProtocol, writer: StoreWriter
) -> None:
    with trio.fail_after(20):
        beat = await create_heartbeat(api)
        expect(await api.post(f"/heartbeats/{beat['id']}/pause"))
        assert (await ping(client, beat["ping_url"], "/fail"))[0] == 200
        paused = await status_of(api, writer, beat["id"])
        assert paused["status"] == "paused" and paused["last_ping_at"] is not None
        assert expect(await api.get("/incidents"))["data"] == []
        expect(await api.post(f"/heartbeats/{beat['id']}/resume"))
        assert (await ping(client, beat["ping_url"]))[0] == 200
        assert (await status_of(api, writer, beat["id"]))["status"] == "up"


async def test_without_an_engine_a_ping_is_not_recorded(api: Api, deps: Dependencies) -> None:
    with trio.fail_after(20):
        beat = await create_heartbeat(api)
        app = create_app(dataclasses.replace(deps, apply=apply_nothing, ping=no_pings))
        async with app.test_app() as test_app:
            status, body, headers = await ping(test_app.test_client(), beat["ping_url"])
            assert_error((status, body, headers), 500, "ping_not_recorded")


async def test_with_committed_acknowledgements_a_ping_is_stored_before_its_200(
    api: Api, db: Database, deps: Dependencies, nursery: trio.Nursery
) -> None:
    with trio.fail_after(20):
        beat = await create_heartbeat(api)
        slow = StoreSettings(batch_age_seconds=0.5)  # buffered, the 200 would come first
        writer = await nursery.start(partial(run_store_writer, db, slow))
        settings = EngineSettings(shard_count=1, ping_ack_committed=True)
        committing = await nursery.start(run_engine, db, writer, Prober(), settings)
        app = create_app(web_deps(db, committing, settings=deps.settings))
        async with app.test_app() as test_app:
            began = trio.current_time()
            status, _, _ = await ping(test_app.test_client(), beat["ping_url"])
            assert status == 200 and trio.current_time() - began >= 0.4  # a batch's age
            stored = expect(await api.get(f"/heartbeats/{beat['id']}/pings"))["data"]
            assert [p["kind"] for p in stored] == ["success"]  # no flush: committed already
