"""The stories of docs/checks.md, Assertions and TLS expiry, told through the API with a
real engine and real local targets: a keyword assertion failing when the page changes, a
JSONPath assertion failing when a health endpoint reports ``degraded``, and https monitors
whose certificates (made by the test's CA) expire in 3 and in 60 days.

The engine's prober trusts the test CA (the ``ssl_context`` seam of `Prober`); intervals
are 1 s on the real clock, as in tests/engine/test_story.py, since every check is real I/O.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
import trio

from engine import Engine, EngineSettings, Prober, run_engine
from store import Database, StoreWriter
from tests.api import Api
from tests.engine.test_assertions import server_context
from tests.engine.test_story import checks_of, wait_status
from tests.targets import HttpTarget, TlsPair

FAST = {"interval_seconds": 1, "timeout_seconds": 1, "failure_threshold": 1}


@pytest.fixture
async def engine(db: Database, nursery: trio.Nursery, writer: StoreWriter, tls: TlsPair) -> Engine:
    prober = Prober(ssl_context=tls.client)
    engine: Engine = await nursery.start(
        run_engine, db, writer, prober, EngineSettings(shard_count=1)
    )
    return engine


async def create(api: Api, url: str, assertion: dict[str, Any]) -> dict[str, Any]:
    code, monitor, _ = await api.post(
        "/monitors",
        json={"name": url, "type": "http", "url": url, "assertions": [assertion], **FAST},
    )
    assert code == 201, monitor
    return monitor  # type: ignore[no-any-return]


async def test_keyword_and_jsonpath_assertions_follow_the_target(
    api: Api, http_target: HttpTarget
) -> None:
    http_target.responses["/"] = (200, [], b"<h1>Welcome to Acme</h1>")
    http_target.responses["/health"] = (200, [], json.dumps({"status": "ok"}).encode())
    keyword = {"source": "body", "comparison": "contains", "target": "Welcome"}
    jsonpath = {
        "source": "json_body",
        "property": "$.status",
        "comparison": "equals",
        "target": "ok",
    }
    with trio.fail_after(20):
        page = await create(api, http_target.url("/"), keyword)
        health = await create(api, http_target.url("/health"), jsonpath)
        await wait_status(api, page["id"], "up")
        await wait_status(api, health["id"], "up")

        http_target.responses["/"] = (200, [], b"<h1>Under maintenance</h1>")
        http_target.responses["/health"] = (200, [], json.dumps({"status": "degraded"}).encode())
        await wait_status(api, page["id"], "down")
        await wait_status(api, health["id"], "down")
        # checks of one second are not ordered among themselves: take a failed one
        [latest, *_] = [c for c in await checks_of(api, page["id"]) if c["status"] == "down"]
        assert latest["status_code"] == 200 and latest["tls_expires_at"] is None
        assert latest["error"] == {
            "code": "assertion_failed",
            "message": 'assertions[0]: body contains "Welcome", found "<h1>Under maintenance</h1>"',
        }
        [latest, *_] = [c for c in await checks_of(api, health["id"]) if c["status"] == "down"]
        assert latest["error"] == {
            "code": "assertion_failed",
            "message": 'assertions[0]: json_body $.status equals "ok", found "degraded"',
        }
        incidents = (await api.get("/incidents"))[1]["data"]
        assert {i["monitor"] for i in incidents} == {page["id"], health["id"]}


async def test_certificate_expiry_through_the_engine(
    api: Api, nursery: trio.Nursery, tls: TlsPair
) -> None:
    soon = HttpTarget(ssl_context=server_context(tls, 3))
    later = HttpTarget(ssl_context=server_context(tls, 60))
    await nursery.start(soon.run)
    await nursery.start(later.run)
    now = time.time()
    with trio.fail_after(20):
        ids = {}
        for name, target in (("soon", soon), ("later", later)):
            code, monitor, _ = await api.post(
                "/monitors", json={"name": name, "type": "http", "url": target.url("/"), **FAST}
            )
            assert code == 201 and monitor["tls_expiry_days"] == 14, monitor
            ids[name] = monitor["id"]
        await wait_status(api, ids["later"], "up")
        await wait_status(api, ids["soon"], "down")
        [fine, *_] = await checks_of(api, ids["later"])
        assert fine["error"] is None and abs(fine["tls_expires_at"] - (now + 60 * 86_400)) < 120
        [expiring, *_] = [c for c in await checks_of(api, ids["soon"]) if c["status"] == "down"]
        assert expiring["status_code"] == 200 and expiring["error"]["code"] == "tls_expiring"
        assert abs(expiring["tls_expires_at"] - (now + 3 * 86_400)) < 120
        assert "(tls_expiry_days is 14)" in expiring["error"]["message"]
        # a narrower window brings it back up
        code, _, _ = await api.patch(f"/monitors/{ids['soon']}", json={"tls_expiry_days": 2})
        assert code == 200
        await wait_status(api, ids["soon"], "up")
