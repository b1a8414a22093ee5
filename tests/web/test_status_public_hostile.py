"""What an account cannot make its public status page do (docs/status-pages.md, Bounds and
Abuse): grow without bound (the latest updates of each incident within a byte budget), stall
the event loop (renders on worker threads), answer outside the error shape (503 when the
page cannot be read and no copy is cached), or show a private name (titles and recovery
messages of incidents a monitor or a heartbeat opened are built from the display name and
the stored opener, whatever the name's length, a rename or a person's edit). Real app on
real Postgres, moves written by the store's batch path; the clock is injected. A time limit
inside each test.
"""

from __future__ import annotations

import dataclasses
import json
import socket
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import pytest
import trio

from store import Database, HeartbeatChange, new_id, open_database, pings, status_pages
from tests.api import Api, EngineLike
from tests.web.helpers import assert_error, create_incident, create_monitor, expect, sql
from tests.web.status_helpers import Clock, fetch, move, parse, status_deps
from web.http.deps import Dependencies
from web.process.app import create_app

if TYPE_CHECKING:
    from quart.typing import TestClientProtocol

UPDATE_BYTES = 10_000
"""The attack's update: 10 KB of text."""
NAME_A = "secret-monitor-a-" + "a" * 183
NAME_B = "secret-monitor-b-" + "b" * 183
HEARTBEAT = "secret-heartbeat-" + "h" * 183
"""Private names of 200 characters (the longest allowed): the engine's title
``"<name> is down"`` is cut at 200 characters, so it holds the name alone."""


@pytest.fixture
def clock() -> Clock:
    """Wall clock and cache clock at once: an hour after the real now."""
    return Clock(float(int(time.time()) + 3600))


@pytest.fixture
def deps(db: Database, engine: EngineLike, clock: Clock) -> Dependencies:
    return status_deps(db, engine, clock)


async def _add_updates(db: Database, incident_id: str, count: int) -> None:
    """Append ``count`` updates of :data:`UPDATE_BYTES` bytes to the incident's timeline,
    by SQL (the API refuses more than 1,000): ``"<n> xxxx…"``, n from 1, in order."""
    await sql(
        db,
        "INSERT INTO incident_updates (id, account_id, incident_id, status, message, created) "
        "SELECT 'inu_' || md5(random()::text), i.account_id, i.id, 'investigating', "
        "rpad(n || ' ', $3, 'x'), i.created + n "
        "FROM incidents i, generate_series(1, $2) AS n WHERE i.id = $1",
        incident_id,
        count,
        UPDATE_BYTES,
    )


async def _worst_case_page(api: Api, db: Database, incidents: int = 0) -> dict[str, Any]:
    """A page over one monitor with ``incidents`` incidents of 10 updates of 10 KB each,
    then (the newest) one of 2,000: the attack's 20 MB page. Returns the newest one."""
    monitor = (await create_monitor(api))["id"]
    components = [{"monitor": monitor, "name": "Website"}]
    page = {"name": "Big", "slug": "big", "components": components}
    expect(await api.post("/status-pages", json=page), 201)
    for _ in range(incidents):
        small = await create_incident(api, monitors=[monitor])
        await _add_updates(db, small["id"], 10)
    big = await create_incident(api, title="Flood", monitors=[monitor])
    await _add_updates(db, big["id"], 2000)
    return big


async def test_a_page_shows_the_latest_updates_of_each_incident_within_a_byte_budget(
    api: Api, db: Database, client: TestClientProtocol
) -> None:
    with trio.fail_after(60):
        await _worst_case_page(api, db, incidents=40)
        status, _, body = await fetch(client, "/status/big/summary.json")
        assert status == 200 and len(body) < 1_000_000, len(body)
        shown = json.loads(body)["incidents"]["open"]
        assert len(shown) == 41
        flood = shown[0]
        assert flood["title"] == "Flood" and flood["updates_omitted"] == 2001 - 10
        assert [int(u["message"].split()[0]) for u in flood["updates"]] == list(
            range(1991, 2001)
        )  # the latest ten, oldest first
        spent = 0
        for incident in shown:
            updates = incident["updates"]
            assert len(updates) <= status_pages.UPDATES_PER_INCIDENT
            assert len(updates) + incident["updates_omitted"] == (2001 if incident is flood else 11)
            spent += sum(len(u["message"].encode()) for u in updates if u["message"])
        assert 2 * UPDATE_BYTES * 10 < spent <= status_pages.UPDATE_BYTES_PER_PAGE
        assert shown[-1]["updates"] == [] and shown[-1]["updates_omitted"] == 11

        status, _, html = await fetch(client, "/status/big")
        assert status == 200 and len(html) < 1_000_000, len(html)
        first = parse(html).one("incidents-open").find("incident")[0]
        assert len(first.find("incident-update")) == 10
        assert first.one("incident-omitted").words == "1,991 earlier updates are not shown."


async def test_a_worst_case_page_never_stalls_the_event_loop(
    api: Api, db: Database, client: TestClientProtocol
) -> None:
    """The cold render of the attack's page, with a task ticking every 5 ms beside it:
    the longest the event loop went without running it (the render is bounded, and runs
    on a worker thread)."""
    with trio.fail_after(60):
        await _worst_case_page(api, db)
        longest = 0.0
        done = trio.Event()

        async def tick() -> None:
            nonlocal longest
            while not done.is_set():
                before = time.perf_counter()
                await trio.sleep(0.005)
                longest = max(longest, time.perf_counter() - before - 0.005)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(tick)
            await trio.sleep(0.05)
            for path in ("/status/big", "/status/big/summary.json"):
                assert (await fetch(client, path))[0] == 200
            done.set()
        print(f"\nlongest event-loop stall during a cold render: {longest * 1000:.1f} ms")
        assert longest < 0.25, longest


async def test_a_render_waits_for_a_worker_thread_of_the_render_limiter(
    api: Api, db: Database, client: TestClientProtocol, deps: Dependencies
) -> None:
    with trio.fail_after(30):
        await _worst_case_page(api, db)
        limiter = deps.status_render_limiter
        answers: list[int] = []

        async def read() -> None:
            answers.append((await fetch(client, "/status/big"))[0])

        async with trio.open_nursery() as nursery:
            tokens = [object() for _ in range(int(limiter.total_tokens))]
            for token in tokens:
                await limiter.acquire_on_behalf_of(token)
            nursery.start_soon(read)
            while limiter.statistics().tasks_waiting == 0:
                await trio.sleep(0.01)
            assert answers == []
            for token in tokens:
                limiter.release_on_behalf_of(token)
        assert answers == [200]


def _refused_port() -> int:
    """A loopback port nothing listens on (bound by the OS, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
async def down_client(deps: Dependencies, asyncio_loop: None) -> AsyncIterator[TestClientProtocol]:
    """The app on a database whose server is not there (connections are refused)."""
    url = f"postgresql://uptrio@127.0.0.1:{_refused_port()}/uptrio"
    async with open_database(url, min_size=0, deadline_seconds=5) as down:
        app = create_app(dataclasses.replace(deps, db=down))
        async with app.test_app() as test_app:
            yield test_app.test_client()


async def test_with_the_database_down_and_nothing_cached_the_routes_answer_503(
    down_client: TestClientProtocol,
) -> None:
    with trio.fail_after(30):
        response = await down_client.get("/status/acme/summary.json")
        body = json.loads(await response.get_data())
        error = assert_error(
            (response.status_code, body, response.headers),
            503,
            "status_page_unavailable",
            param=None,
            type="api_error",
        )
        assert "retry" in error["message"]
        assert response.headers["Retry-After"] == "5"
        assert response.headers["Access-Control-Allow-Origin"] == "*"
        assert response.headers["Cache-Control"] == "no-store"

        status, headers, html = await fetch(down_client, "/status/acme")
        assert status == 503 and headers["Retry-After"] == "5"
        assert headers["Content-Type"] == "text/html; charset=utf-8"
        assert "default-src 'none'" in headers["Content-Security-Policy"]
        assert parse(html).one("status-unavailable").attrs["data-state"] == "unavailable"
        for feed in ("feed.atom", "feed.rss"):  # the page's 503 (docs/status-pages.md, Feeds)
            got_status, got_headers, got_html = await fetch(down_client, f"/status/acme/{feed}")
            assert (got_status, got_html) == (status, html)
            for name in ("Retry-After", "Content-Type", "Cache-Control"):
                assert got_headers[name] == headers[name]


async def _page(api: Api) -> str:
    """A page whose one component "Checkout" is a monitor named :data:`NAME_A`."""
    monitor = (await create_monitor(api, name=NAME_A))["id"]
    components = [{"monitor": monitor, "name": "Checkout"}]
    page = {"name": "Shop", "slug": "shop", "components": components}
    expect(await api.post("/status-pages", json=page), 201)
    return monitor


async def _public(client: TestClientProtocol, clock: Clock) -> tuple[str, str, dict[str, Any]]:
    """The page's HTML and summary after the cache's 10 s, and its first incident."""
    clock.t += 10
    _, _, html = await fetch(client, "/status/shop")
    _, _, body = await fetch(client, "/status/shop/summary.json")
    for secret in (NAME_A, NAME_B, HEARTBEAT, "secret-"):
        assert secret not in html and secret not in body, secret
    (article,) = parse(html).find("incident")
    return html, body, {"title": article.one("incident-title").words, "article": article}


async def test_a_long_monitor_name_renamed_and_a_title_edited_never_reach_the_page(
    api: Api, db: Database, client: TestClientProtocol, clock: Clock
) -> None:
    with trio.fail_after(30):
        monitor = await _page(api)
        at = int(clock()) - 600
        await move(db, monitor, "up", at)
        await move(db, monitor, "down", at + 60)
        (incident,) = expect(await api.get("/incidents"))["data"]
        assert incident["title"] == NAME_A and incident["monitor"] == monitor
        _, _, shown = await _public(client, clock)
        assert shown["title"] == "Checkout is down"

        expect(await api.patch(f"/monitors/{monitor}", json={"name": NAME_B}))
        _, _, shown = await _public(client, clock)
        assert shown["title"] == "Checkout is down"
        # a person's title stays internal on an incident a monitor opened: it was
        # written from private names; what is public is posted as an update
        iid = incident["id"]
        expect(await api.patch(f"/incidents/{iid}", json={"title": NAME_B[:190] + " flaps"}))
        post = {"message": "Payments are retried."}
        expect(await api.post(f"/incidents/{iid}/updates", json=post), 201)
        await move(db, monitor, "up", at + 180)
        _, _, shown = await _public(client, clock)
        assert shown["title"] == "Checkout is down"
        messages = [m.words for m in shown["article"].find("update-message")]
        assert messages == ["Checkout is up again after 2m 0s", "Payments are retried."]


async def _heartbeat_moves(db: Database, heartbeat_id: str, to: str, at: int) -> None:
    """A move of the heartbeat into ``to`` at ``at`` through the store's batch path."""

    async def current(connection: Any) -> Any:
        return await connection.fetchrow(
            "SELECT status, run_epoch FROM heartbeats WHERE id = $1", heartbeat_id
        )

    row = await db.run(current)
    change = HeartbeatChange(
        heartbeat_id=heartbeat_id,
        move_id=new_id("hbm"),
        from_status=row["status"],
        to_status=to,
        run_epoch=row["run_epoch"],
        created=at,
        detail="No ping for 90 s (period 60 s + grace 30 s)",
    )
    await db.transaction(pings.write_ping_batch, [], [change])


async def test_a_heartbeats_incident_shows_a_background_job_never_its_name(
    api: Api, db: Database, client: TestClientProtocol, clock: Clock
) -> None:
    with trio.fail_after(30):
        monitor = await _page(api)
        body = {"name": HEARTBEAT, "period_seconds": 60}
        heartbeat = expect(await api.post("/heartbeats", json=body), 201)["id"]
        at = int(clock()) - 600
        await _heartbeat_moves(db, heartbeat, "down", at)
        (incident,) = expect(await api.get("/incidents"))["data"]
        assert incident["monitor"] == heartbeat and incident["title"] == HEARTBEAT
        affected = {"monitors": [heartbeat, monitor]}  # a person links it to the page
        expect(await api.patch(f"/incidents/{incident['id']}", json=affected))
        _, _, shown = await _public(client, clock)
        assert shown["title"] == "A background job is down"
        assert shown["article"].one("incident-components").words == "Affects: Checkout"
        await _heartbeat_moves(db, heartbeat, "up", at + 120)
        _, _, shown = await _public(client, clock)
        assert shown["title"] == "A background job is down"
        messages = [m.words for m in shown["article"].find("update-message")]
        assert messages == ["A background job is up again after 2m 0s"]
