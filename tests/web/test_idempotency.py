"""Idempotency keys on POST (docs/api.md, Idempotency keys; web/http/idempotency.py):
replay, reuse, keys in use, failures not stored, 24-hour expiry with an injected clock,
replay after a restart, 50 concurrent identical POSTs, atomicity of the write and the stored
response, and the engine told exactly once, after the commit.
"""

from __future__ import annotations

import dataclasses
import json
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import pytest
import trio

from store import Connection, Database, MonitorRecord, incidents, monitors, new_id, open_database
from tests.api import Api, MakeToken, web_deps
from tests.web.helpers import HTTP_MONITOR, assert_error, expect
from web.api.incidents import incident_object
from web.http.deps import Dependencies
from web.http.idempotency import run_idempotency_purge
from web.http.pipeline import ApiResponse, RequestContext, Route
from web.process.app import create_app
from web.routes import ROUTES

if TYPE_CHECKING:
    from quart.typing import TestClientProtocol

DAY_SECONDS = 24 * 3600


class RecordingEngine:
    """The engine's verb, recording what it is told and whether the monitor was
    committed by then (read through another pooled connection)."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.saved: list[tuple[str, bool]] = []

    async def __call__(self, resource_id: str, record: MonitorRecord | None) -> None:
        if record is None:
            self.saved.append((resource_id, False))
            return
        visible = await self.db.run(monitors.get_monitor, None, record.id)
        self.saved.append((record.id, visible is not None))


@pytest.fixture
def engine(db: Database) -> RecordingEngine:
    """Replaces the root conftest's engine: the app tells this one."""
    return RecordingEngine(db)


def key() -> str:
    return str(uuid.uuid4())


async def _count(db: Database, table: str) -> int:
    async def count(connection: Connection) -> int:
        return int(await connection.fetchval(f"SELECT count(*) FROM {table}"))

    return await db.run(count)


@asynccontextmanager
async def open_client(
    deps: Dependencies, routes: tuple[Route, ...] = ROUTES
) -> AsyncIterator[TestClientProtocol]:
    """A test client of an app built on ``deps`` (a restart, another clock...)."""
    app = create_app(deps, routes=routes)
    async with app.test_app() as test_app:
        yield test_app.test_client()


async def test_same_key_same_request_replays_status_body_with_header_and_new_request_id(
    api: Api, db: Database, engine: RecordingEngine
) -> None:
    with trio.fail_after(10):
        k = key()
        first = await api.post("/monitors", json=HTTP_MONITOR, headers={"Idempotency-Key": k})
        status, body, headers = first
        assert status == 201, body
        assert "Idempotent-Replayed" not in headers

        # key order and whitespace do not matter: same canonical JSON
        reordered = json.dumps(dict(reversed(list(HTTP_MONITOR.items()))), indent=3).encode()
        again = await api.post(
            "/monitors",
            data=reordered,
            headers={"Idempotency-Key": k, "Content-Type": "application/json"},
        )
        assert again[0] == 201
        assert again[1] == body
        assert again[2]["Idempotent-Replayed"] == "true"
        assert again[2]["Request-Id"].startswith("req_")
        assert again[2]["Request-Id"] != headers["Request-Id"]
        assert await _count(db, "monitors") == 1
        assert engine.saved == [(body["id"], True)], "told once, after the commit"


async def test_same_key_on_another_request_is_409_reused(api: Api, db: Database) -> None:
    with trio.fail_after(10):
        k = key()
        expect(await api.post("/monitors", json=HTTP_MONITOR, headers={"Idempotency-Key": k}), 201)
        other_body = await api.post(
            "/monitors", json={**HTTP_MONITOR, "name": "other"}, headers={"Idempotency-Key": k}
        )
        assert_error(
            other_body,
            409,
            "idempotency_key_reused",
            param="Idempotency-Key",
            type="idempotency_error",
        )
        other_path = await api.post(
            "/incidents", json={"title": "outage"}, headers={"Idempotency-Key": k}
        )
        assert_error(other_path, 409, "idempotency_key_reused", type="idempotency_error")
        assert await _count(db, "monitors") == 1
        assert await _count(db, "incidents") == 0


async def test_keys_are_scoped_to_the_account(
    api: Api, api_for: Callable[..., Awaitable[Api]], db: Database
) -> None:
    with trio.fail_after(10):
        k = key()
        mine = expect(
            await api.post("/monitors", json=HTTP_MONITOR, headers={"Idempotency-Key": k}), 201
        )
        # another token of the same account replays
        colleague = await api_for(account="acme")
        replay = await colleague.post(
            "/monitors", json=HTTP_MONITOR, headers={"Idempotency-Key": k}
        )
        assert replay[1] == mine and replay[2]["Idempotent-Replayed"] == "true"
        # another account's identical key is a different key
        other = await api_for(account="globex")
        theirs = await other.post("/monitors", json=HTTP_MONITOR, headers={"Idempotency-Key": k})
        assert theirs[0] == 201 and theirs[1]["id"] != mine["id"]
        assert "Idempotent-Replayed" not in theirs[2]
        assert await _count(db, "monitors") == 2


async def test_a_failed_request_is_not_stored_and_a_corrected_retry_runs(
    api: Api, db: Database
) -> None:
    with trio.fail_after(10):
        k = key()
        bad = await api.post(
            "/monitors",
            json={**HTTP_MONITOR, "interval_seconds": 0},
            headers={"Idempotency-Key": k},
        )
        assert_error(bad, 422, "value_out_of_range", param="interval_seconds")
        unparsable = await api.post(
            "/monitors",
            data=b"{nope",
            headers={"Idempotency-Key": k, "Content-Type": "application/json"},
        )
        assert_error(unparsable, 400, "invalid_json")
        good = await api.post("/monitors", json=HTTP_MONITOR, headers={"Idempotency-Key": k})
        assert good[0] == 201 and "Idempotent-Replayed" not in good[2]
        missing = await api.post(
            "/monitors/mon_" + "a" * 24 + "/pause", headers={"Idempotency-Key": key()}
        )
        assert_error(missing, 404, "resource_missing")
        assert await _count(db, "idempotency_keys") == 1


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("", "empty"),
        ("   ", "only spaces"),
        ("k" * 256, "256 characters"),
        ("abc\x01def", "a control character"),
        ("abc\x7fdef", "DEL"),
        ("abc\tdef", "a tab"),
    ],
)
async def test_malformed_keys_are_400(api: Api, db: Database, value: str, why: str) -> None:
    with trio.fail_after(10):
        response = await api.post(
            "/monitors", json=HTTP_MONITOR, headers={"Idempotency-Key": value}
        )
        assert_error(response, 400, "idempotency_key_invalid", param="Idempotency-Key")
        assert await _count(db, "monitors") == 0, why


async def test_a_key_of_255_characters_and_any_printable_text_is_accepted(api: Api) -> None:
    with trio.fail_after(10):
        for value in ("k" * 255, "order 42 / retry é"):
            first = await api.post(
                "/incidents", json={"title": "a"}, headers={"Idempotency-Key": value}
            )
            again = await api.post(
                "/incidents", json={"title": "a"}, headers={"Idempotency-Key": value}
            )
            assert first[0] == again[0] == 201
            assert again[1] == first[1] and again[2]["Idempotent-Replayed"] == "true"


async def test_the_header_is_ignored_on_get_patch_and_delete(api: Api) -> None:
    with trio.fail_after(10):
        k = key()
        created = expect(await api.post("/monitors", json=HTTP_MONITOR), 201)
        path = f"/monitors/{created['id']}"
        for _ in range(2):
            got = await api.get(path, headers={"Idempotency-Key": k})
            assert got[0] == 200 and "Idempotent-Replayed" not in got[2]
        renamed = await api.patch(path, json={"name": "x"}, headers={"Idempotency-Key": k})
        assert renamed[0] == 200 and "Idempotent-Replayed" not in renamed[2]
        deleted = await api.delete(path, headers={"Idempotency-Key": k})
        assert deleted[0] == 204


async def test_fifty_concurrent_identical_posts_create_exactly_one(
    api: Api, db: Database, engine: RecordingEngine
) -> None:
    with trio.fail_after(30):
        k = key()
        results: list[tuple[int, Any, Any]] = []

        async def post() -> None:
            results.append(
                await api.post("/monitors", json=HTTP_MONITOR, headers={"Idempotency-Key": k})
            )

        async with trio.open_nursery() as nursery:
            for _ in range(50):
                nursery.start_soon(post)

        created = [r for r in results if r[0] == 201 and "Idempotent-Replayed" not in r[2]]
        replayed = [r for r in results if r[0] == 201 and "Idempotent-Replayed" in r[2]]
        in_use = [r for r in results if r[0] == 409]
        assert len(results) == 50
        assert len(created) == 1, [r[0] for r in results]
        assert len(replayed) + len(in_use) == 49
        for response in replayed:
            assert response[1] == created[0][1]
        for response in in_use:
            assert_error(response, 409, "idempotency_key_in_use", type="idempotency_error")
            assert response[2]["Retry-After"] == "1"
        assert await _count(db, "monitors") == 1
        assert engine.saved == [(created[0][1]["id"], True)]
        # once the first has finished, every retry replays
        after = await api.post("/monitors", json=HTTP_MONITOR, headers={"Idempotency-Key": k})
        assert after[1] == created[0][1] and after[2]["Idempotent-Replayed"] == "true"


def _incident_route(name: str, path: str, before_response: Callable[[], Awaitable[None]]) -> Route:
    """A POST route that writes an incident through ``ctx.deps.db.transaction``, then
    awaits ``before_response`` (which may block or raise) before answering 201."""

    async def handler(ctx: RequestContext) -> ApiResponse:
        now = int(time.time())
        values = {
            "id": new_id("inc"),
            "account_id": ctx.account_id,
            "title": "written",
            "description": None,
            "status": "investigating",
            "severity": "major",
            "resolved_at": None,
            "resolution_message": None,
            "created": now,
            "updated": now,
            "metadata": {},
        }
        record = await ctx.deps.db.transaction(incidents.insert_incident, values)
        await before_response()
        return ApiResponse(201, incident_object(record))

    return Route(
        name=name,
        method="POST",
        path=path,
        handler=handler,
        permission="incidents.create",
        summary=name,
        success_status=201,
    )


async def test_a_key_in_use_is_409_with_retry_after_until_the_first_finishes(
    deps: Dependencies, make_token: MakeToken, db: Database
) -> None:
    with trio.fail_after(10):
        entered, release = trio.Event(), trio.Event()

        async def hold() -> None:
            entered.set()
            await release.wait()

        route = _incident_route("slow_create", "/slow-incidents", hold)
        async with open_client(deps, (*ROUTES, route)) as client:
            api = Api(client, await make_token())
            k = key()
            first: list[tuple[int, Any, Any]] = []

            async def post_first() -> None:
                first.append(await api.post("/slow-incidents", headers={"Idempotency-Key": k}))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(post_first)
                await entered.wait()
                busy = await api.post("/slow-incidents", headers={"Idempotency-Key": k})
                assert_error(busy, 409, "idempotency_key_in_use", type="idempotency_error")
                assert busy[2]["Retry-After"] == "1"
                assert await _count(db, "incidents") == 0, "the write is not committed yet"
                release.set()
            assert first[0][0] == 201
            assert await _count(db, "incidents") == 1
            replay = await api.post("/slow-incidents", headers={"Idempotency-Key": k})
            assert replay[1] == first[0][1] and replay[2]["Idempotent-Replayed"] == "true"


async def test_a_crash_after_the_write_leaves_neither_the_write_nor_the_key(
    deps: Dependencies, make_token: MakeToken, db: Database
) -> None:
    with trio.fail_after(10):
        crash = [True]

        async def maybe_crash() -> None:
            if crash[0]:
                raise RuntimeError("crash between the write and the response")

        route = _incident_route("crashy_create", "/crashy-incidents", maybe_crash)
        async with open_client(deps, (*ROUTES, route)) as client:
            api = Api(client, await make_token())
            k = key()
            failed = await api.post("/crashy-incidents", headers={"Idempotency-Key": k})
            assert_error(failed, 500, "internal_error")
            assert await _count(db, "incidents") == 0
            assert await _count(db, "idempotency_keys") == 0

            # cancelled mid-request (a client gone, a shutdown): also nothing
            async def never() -> None:
                await trio.sleep_forever()

            crash[0] = False
            hang = _incident_route("hang_create", "/hanging-incidents", never)
        async with open_client(deps, (*ROUTES, route, hang)) as client:
            api = Api(client, api.token)
            with trio.move_on_after(0.5):
                await api.post("/hanging-incidents", headers={"Idempotency-Key": k})
            assert await _count(db, "incidents") == 0
            assert await _count(db, "idempotency_keys") == 0

            retried = await api.post("/crashy-incidents", headers={"Idempotency-Key": k})
            assert retried[0] == 201 and "Idempotent-Replayed" not in retried[2]
            assert await _count(db, "incidents") == 1
            assert await _count(db, "idempotency_keys") == 1


async def test_replay_after_a_restart_of_the_service(
    deps: Dependencies, database_url: str, make_token: MakeToken, engine: RecordingEngine
) -> None:
    with trio.fail_after(15):
        token = await make_token()
        k = key()
        async with open_client(deps) as client:
            first = await Api(client, token).post(
                "/monitors", json=HTTP_MONITOR, headers={"Idempotency-Key": k}
            )
        assert first[0] == 201
        # a new process: its own pool, app and in-memory state, the same database
        async with open_database(database_url, min_size=1, max_size=2) as fresh_db:
            restarted = web_deps(fresh_db, engine, settings=deps.settings)
            async with open_client(restarted) as client:
                again = await Api(client, token).post(
                    "/monitors", json=HTTP_MONITOR, headers={"Idempotency-Key": k}
                )
        assert again[0] == 201 and again[1] == first[1]
        assert again[2]["Idempotent-Replayed"] == "true"
        assert len(engine.saved) == 1, "a replay does not tell the engine again"


async def test_keys_expire_after_24_hours_and_then_run_anew(
    deps: Dependencies, make_token: MakeToken, db: Database
) -> None:
    with trio.fail_after(15):
        now = [1_800_000_000.0]
        timed = dataclasses.replace(deps, clock=lambda: now[0])
        async with open_client(timed) as client:
            api = Api(client, await make_token())
            k = key()
            first = expect(
                await api.post("/monitors", json=HTTP_MONITOR, headers={"Idempotency-Key": k}), 201
            )
            now[0] += DAY_SECONDS - 1
            replay = await api.post("/monitors", json=HTTP_MONITOR, headers={"Idempotency-Key": k})
            assert replay[1] == first and replay[2]["Idempotent-Replayed"] == "true"
            now[0] += 2  # 24 hours and 1 second after the first use
            anew = await api.post("/monitors", json=HTTP_MONITOR, headers={"Idempotency-Key": k})
            assert anew[0] == 201 and "Idempotent-Replayed" not in anew[2]
            assert anew[1]["id"] != first["id"]
            # the key now holds the new response, and a changed body is a reuse again
            now[0] += 10
            again = await api.post("/monitors", json=HTTP_MONITOR, headers={"Idempotency-Key": k})
            assert again[1] == anew[1]
            assert await _count(db, "monitors") == 2


async def test_the_purge_task_deletes_expired_keys(api: Api, db: Database) -> None:
    with trio.fail_after(10):
        for _ in range(3):
            expect(
                await api.post(
                    "/incidents", json={"title": "a"}, headers={"Idempotency-Key": key()}
                ),
                201,
            )
        assert await _count(db, "idempotency_keys") == 3
        async with trio.open_nursery() as nursery:
            # the clock says a day has passed: every key is expired
            await nursery.start(
                lambda task_status: run_idempotency_purge(
                    db, clock=lambda: time.time() + DAY_SECONDS + 1, task_status=task_status
                )
            )
            while await _count(db, "idempotency_keys"):
                await trio.sleep(0.01)
            nursery.cancel_scope.cancel()
