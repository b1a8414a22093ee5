"""GET /monitors/:id/checks (docs/checks.md, The checks of a monitor), on checks written by
the store."""

from __future__ import annotations

import trio

from store import CheckRecord, Database, checks, new_id
from tests.api import Api
from web.api.history import CheckList


async def _write(db: Database, monitor_id: str, n: int) -> list[str]:
    records = [
        CheckRecord(
            id=new_id("chk"),
            monitor_id=monitor_id,
            status="up" if i % 3 else "down",
            response_time_ms=1.25 * i,
            status_code=200 if i % 3 else None,
            error_code=None if i % 3 else "timeout",
            error_message=None if i % 3 else "no answer within 1 s",
            created=1_000 + i,
        )
        for i in range(n)
    ]
    await db.run(checks.ensure_partitions, 1_000, 1_000 + n, 86_400)
    await db.transaction(checks.write_check_batch, records, [])
    return [r.id for r in records]


async def test_checks_newest_first_with_cursor_and_limits(api: Api, db: Database) -> None:
    with trio.fail_after(10):
        _, monitor, _ = await api.post(
            "/monitors", json={"name": "t", "url": "127.0.0.1:1", "type": "tcp"}
        )
        mid = monitor["id"]
        ids = await _write(db, mid, 25)
        code, page, headers = await api.get(f"/monitors/{mid}/checks")
        assert code == 200 and headers["Request-Id"].startswith("req_")
        CheckList.model_validate(page)
        assert [c["id"] for c in page["data"]] == ids[::-1][:10] and page["has_more"]
        assert page["url"] == f"/monitors/{mid}/checks"
        failed = next(c for c in page["data"] if c["status"] == "down")
        assert failed["error"]["code"] == "timeout" and failed["status_code"] is None
        walked: list[str] = []
        after = None
        while True:
            query = {"limit": 7} | ({"starting_after": after} if after else {})
            _, page, _ = await api.get(f"/monitors/{mid}/checks", query=query)
            walked += [c["id"] for c in page["data"]]
            if not page["has_more"]:
                break
            after = page["data"][-1]["id"]
        assert walked == ids[::-1]
        for bad in (
            {"limit": 0},
            {"limit": 101},
            {"limit": "x"},
            {"sort": "created"},
            {"starting_after": "mon_abc"},
            {"status": "pending"},
            {"created[gt]": "soon"},
        ):
            code, body, _ = await api.get(f"/monitors/{mid}/checks", query=bad)
            assert code == 400, (bad, body)
            assert body["error"]["param"] == next(iter(bad))
        code, body, _ = await api.get(f"/monitors/{mid}/checks", query={"limit": 100})
        assert code == 200 and len(body["data"]) == 25 and not body["has_more"]
        code, body, _ = await api.get(
            f"/monitors/{mid}/checks", query={"starting_after": new_id("chk")}
        )
        assert code == 400 and body["error"]["code"] == "cursor_not_found"


async def test_checks_of_another_accounts_monitor_are_404(
    api: Api, api_for: object, db: Database
) -> None:
    with trio.fail_after(10):
        _, monitor, _ = await api.post(
            "/monitors", json={"name": "t", "url": "127.0.0.1:1", "type": "tcp"}
        )
        await _write(db, monitor["id"], 3)
        other = await api_for(account="other")  # type: ignore[operator]
        code, body, _ = await other.get(f"/monitors/{monitor['id']}/checks")
        assert code == 404 and body["error"]["code"] == "resource_missing"
        reader = await api_for(permissions=["incidents.read"])  # type: ignore[operator]
        code, body, _ = await reader.get(f"/monitors/{monitor['id']}/checks")
        assert code == 403 and body["error"]["type"] == "permission_error"
