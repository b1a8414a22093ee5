"""The real ``uptrio serve`` with 1,000 tcp monitors: supervisors through the admin socket,
metrics, logs, SIGTERM and SIGKILL (docs/operations.md).

Subprocesses on a temporary data directory (their embedded Postgres lives there; the
test joins the same server to insert monitors and to read what was stored). The tcp
monitors probe a local listener on 127.0.0.1 (port 0). Stderr goes to a file: 1,000
monitors log more than a pipe holds.

1. ``serve``; 1,000 monitors inserted straight into the database; ``uptrio supervisors
   restart engine`` loads them; ``supervisors list`` shows the tree; the admin socket is
   0600 and speaks only its protocol (a token in a request is refused), and the HTTP API
   has no admin route; ``/metrics`` counters move; SIGTERM exits 0 within the deadline
   with every probed check stored; neither the token nor a metadata value was logged.
2. ``serve`` again with a trigger that makes each batch's transaction sleep, so SIGKILL
   lands in the middle of one: afterwards every stored check belongs to a whole batch
   (an audit row written by the same transaction counts each batch) and none is
   duplicated.
3. ``serve`` a third time (the killed one left a stale admin socket): every monitor
   resumes from its stored status (up), not from pending.
"""

from __future__ import annotations

import json
import os
import re
import signal
import stat
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from store import Connection, Database, EmbeddedPostgres, open_database, start_embedded
from tests.ops.helpers import NewMonitor, count_checks, insert_monitors, scrape
from tests.targets import TcpTarget

CLI = [sys.executable, "-m", "web.process.cli"]
ROOT = Path(__file__).resolve().parents[2]
MONITORS = 1000
METADATA_SECRET = "meta-value-7f3c9a-never-logged"
UP = ("uptrio_monitors", (("status", "up"),))
TCP_OK = ("uptrio_checks_total", (("result", "ok"), ("type", "tcp")))


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("UPTRIO_")}
    env["PYTHONPATH"] = str(ROOT)
    return env


class Serve:
    """One ``uptrio serve`` subprocess: its URL and its stderr (a file)."""

    def __init__(self, process: trio.Process, stderr: Path, base: str, stdout: str) -> None:
        self.process, self.stderr, self.base, self.stdout = process, stderr, base, stdout

    def log(self) -> list[dict[str, Any]]:
        """Its log lines so far (every one must be a JSON object)."""
        return [json.loads(line) for line in self.stderr.read_text().splitlines()]


_TOKEN = re.compile(rb"\n\n(ey[\w-]+\.[\w-]+\.[\w-]+)\n")


async def _serve(data_dir: Path, stderr: Path, *flags: str, first: bool = False) -> Serve:
    """Start ``uptrio serve``; return once it listens (and, on a ``first`` start, once it
    printed the first token)."""
    with stderr.open("ab") as err:
        process = await trio.lowlevel.open_process(
            [*CLI, "serve", "--port", "0", "--data-dir", str(data_dir), *flags],
            stdout=subprocess.PIPE,
            stderr=err,
            env=_env(),
            cwd=ROOT,
        )
    assert process.stdout is not None
    out = bytearray()
    with trio.fail_after(20):
        while b"listening on" not in out or (first and not _TOKEN.search(out)):
            chunk = await process.stdout.receive_some(4096)
            assert chunk, out.decode() + _read(stderr)
            out += chunk
    text = out.decode()
    base = re.search(r"listening on (http://127\.0\.0\.1:\d+)", text)
    assert base is not None, text
    return Serve(process, stderr, base.group(1), text)


def _read(path: Path) -> str:
    return path.read_text()


async def _uptrio(*args: str) -> tuple[int, str, str]:
    done = await trio.run_process(
        [*CLI, *args], capture_stdout=True, capture_stderr=True, check=False, env=_env(), cwd=ROOT
    )
    return done.returncode, done.stdout.decode(), done.stderr.decode()


async def _metrics(base: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    async with httpx.AsyncClient(base_url=base, timeout=10) as http:
        response = await http.get("/metrics")
    assert response.status_code == 200
    return scrape(response.text)


async def _admin_raw(path: Path, line: bytes) -> dict[str, Any]:
    stream = await trio.open_unix_socket(str(path))
    async with stream:
        await stream.send_all(line)
        reply = bytearray()
        while b"\n" not in reply:
            chunk = await stream.receive_some(4096)
            assert chunk
            reply += chunk
    answer: dict[str, Any] = json.loads(reply[: reply.index(b"\n")])  # one per line sent
    return answer


async def _kill(process: trio.Process) -> None:
    if process.returncode is None:
        process.kill()
        with trio.CancelScope(shield=True):
            await process.wait()


@pytest.fixture
async def target(nursery: trio.Nursery) -> TcpTarget:
    listener = TcpTarget()
    await nursery.start(listener.run)
    return listener


@pytest.fixture
async def data_dir(asyncio_loop: None) -> AsyncIterator[Path]:
    """A data directory (under the system's temporary directory: pytest's ``tmp_path``
    is 0700, closed to the server's own system user); its embedded server is stopped at
    the end (a killed service leaves pgserver believing it still holds a handle)."""
    with tempfile.TemporaryDirectory(prefix="uptrio-serve-") as tmp:
        path = Path(tmp) / "data"
        yield path
        with trio.CancelScope(shield=True):
            if (path / "pgdata" / "postmaster.pid").exists():
                server = await trio.to_thread.run_sync(start_embedded, path)
                await trio.to_thread.run_sync(server.stop_server)


_AUDIT = """
CREATE TABLE batch_audit (rows int NOT NULL, ids text[]);
CREATE FUNCTION uptrio_test_slow() RETURNS trigger LANGUAGE plpgsql AS
  $$ BEGIN PERFORM pg_sleep(0.3); RETURN NULL; END $$;
CREATE FUNCTION uptrio_test_audit() RETURNS trigger LANGUAGE plpgsql AS
  $$ BEGIN INSERT INTO batch_audit SELECT count(*), array_agg(id) FROM new_rows;
     RETURN NULL; END $$;
CREATE TRIGGER slow BEFORE INSERT ON checks FOR EACH STATEMENT
  EXECUTE FUNCTION uptrio_test_slow();
CREATE TRIGGER audit AFTER INSERT ON checks REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION uptrio_test_audit();
"""


async def _execute(connection: Connection, sql: str) -> None:
    await connection.execute(sql)


async def _fetchval(connection: Connection, sql: str) -> Any:
    return await connection.fetchval(sql)


async def test_serve_1000_monitors_admin_metrics_logs_sigterm_sigkill(
    data_dir: Path, tmp_path: Path, target: TcpTarget
) -> None:
    with trio.fail_after(85):
        first = await _serve(data_dir, tmp_path / "serve1.log", "--batch-age-ms", "100", first=True)
        embedded: EmbeddedPostgres | None = None
        try:
            token = _TOKEN.search(first.stdout.encode())
            assert token is not None, first.stdout
            jwt = token.group(1).decode()
            embedded = await trio.to_thread.run_sync(start_embedded, data_dir)
            async with open_database(embedded.url, min_size=1, max_size=3) as db:
                await _story_sigterm(first, db, data_dir, jwt, target)
                await _story_sigkill(db, data_dir, tmp_path)
                await _story_resume(db, data_dir, tmp_path)
        finally:
            await _kill(first.process)
            if embedded is not None:
                with trio.CancelScope(shield=True):
                    await trio.to_thread.run_sync(embedded.stop)


async def _story_sigterm(
    service: Serve, db: Database, data_dir: Path, jwt: str, target: TcpTarget
) -> None:
    account_id = await db.run(_fetchval, "SELECT id FROM accounts WHERE name = 'default'")
    monitor = NewMonitor(url=target.address, interval_seconds=2, timeout_seconds=1)
    await db.transaction(insert_monitors, account_id, [monitor] * MONITORS)

    # the engine learns of rows inserted behind its back when it reloads
    status, out, err = await _uptrio(
        "supervisors", "restart", "engine", "--data-dir", str(data_dir)
    )
    assert status == 0 and out.startswith("restarted engine in"), (out, err)
    status, out, err = await _uptrio("supervisors", "list", "--data-dir", str(data_dir))
    assert status == 0, err
    rows = {line.split()[0]: line.split() for line in out.splitlines()[1:]}
    # root: maintenance, store, leases, engine, listener, webhooks, notifier, page_mailer,
    # escalations, windows, reminders, limits, idempotency, web
    assert rows["root"][1:3] == ["running", "14"] and rows["engine"][1:3] == ["running", "8"]
    shards = [rows[f"shard-{i}"] for i in range(8)]
    # each shard's children: its monitor actors and its heartbeat group (engine.shard)
    assert sum(int(r[2]) for r in shards) == MONITORS + 8 and all(r[3] == "0" for r in shards)

    # the admin interface: owner-only socket, its protocol only, no token accepted
    socket_path = data_dir / "admin.sock"
    assert stat.S_ISSOCK(socket_path.stat().st_mode)
    assert socket_path.stat().st_mode & 0o777 == 0o600
    refused = await _admin_raw(
        socket_path, json.dumps({"command": "list", "token": jwt}).encode() + b"\n"
    )
    assert refused["ok"] is False and refused["error"]["code"] == "invalid_request"
    refused = await _admin_raw(socket_path, b"GET /supervisors HTTP/1.1\r\nHost: x\r\n\r\n\n")
    assert refused["ok"] is False and refused["error"]["code"] == "invalid_json"
    async with httpx.AsyncClient(base_url=service.base, timeout=10) as http:
        auth = {"Authorization": f"Bearer {jwt}"}
        for method, path in [
            ("GET", "/supervisors"),
            ("POST", "/supervisors/engine/restart"),
            ("GET", "/admin"),
            ("POST", "/admin/restart"),
        ]:
            answer = await http.request(method, path, headers=auth)
            assert answer.status_code == 404, (path, answer.text)
        created = await http.post(
            "/monitors",
            headers=auth,
            json={
                "name": "with metadata",
                "url": target.address,
                "type": "tcp",
                "interval_seconds": 2,
                "timeout_seconds": 1,
                "metadata": {"note": METADATA_SECRET},
            },
        )
        assert created.status_code == 201, created.text
        invalid = await http.post(
            "/monitors", headers=auth, json={"metadata": {"note": METADATA_SECRET}}
        )
        assert invalid.status_code == 422
        assert (
            await http.get("/monitors", headers={"Authorization": "Bearer " + jwt[:-3] + "xyz"})
        ).status_code == 401

    # metrics move
    before = await _metrics(service.base)
    with trio.fail_after(10):
        while True:
            await trio.sleep(0.5)
            after = await _metrics(service.base)
            if (
                after.get(UP, 0) == MONITORS + 1
                and after[TCP_OK] - before.get(TCP_OK, 0) >= MONITORS
            ):
                break
    assert (
        after[("uptrio_store_rows_written_total", ())]
        > before[("uptrio_store_rows_written_total", ())]
    )
    assert after[("uptrio_schedule_lateness_seconds_count", ())] >= MONITORS
    requests = ("uptrio_http_requests_total", (("route", "/monitors"), ("status", "201")))
    assert after[requests] == 1

    # SIGTERM: exit 0 within the deadline, every probed check stored
    began = trio.current_time()
    service.process.send_signal(signal.SIGTERM)
    with trio.fail_after(12):
        assert await service.process.wait() == 0
    assert trio.current_time() - began < 10
    log = service.log()
    stopped = next(line for line in log if line["event"] == "service stopped")
    stored = await db.run(count_checks)
    assert stopped["unwritten"] == 0 and stopped["rows_dropped"] == 0
    assert stored == stopped["checks"] == stopped["rows_written"] >= MONITORS, stopped
    print(
        f"\nSIGTERM: exit 0 after {trio.current_time() - began:.2f} s; "
        f"{stopped['checks']} checks probed, {stored} stored, 0 unwritten"
    )
    # logs: one line per request with its figures; no token, no metadata value
    answered = [line for line in log if line["event"] == "request"]
    assert {"request_id", "route", "status", "duration_ms"} <= set(answered[0])
    text = service.stderr.read_text()
    assert jwt not in text and jwt.split(".")[2] not in text
    assert METADATA_SECRET not in text
    # and now nobody answers on the admin socket
    status, out, err = await _uptrio("supervisors", "list", "--data-dir", str(data_dir))
    assert status == 1 and "no Uptrio service is running" in err, (out, err)


async def _story_sigkill(db: Database, data_dir: Path, tmp_path: Path) -> None:
    await db.run(_execute, _AUDIT)
    before = await db.run(count_checks)
    second = await _serve(data_dir, tmp_path / "serve2.log", "--batch-age-ms", "100")
    try:
        busy = (
            "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' "
            "AND wait_event = 'PgSleep' AND query LIKE '%INSERT INTO checks%'"
        )
        committed = "SELECT count(*) FROM batch_audit"
        with trio.fail_after(15):
            while not await db.run(_fetchval, committed):  # a batch or more committed
                await trio.sleep(0.02)
            while not await db.run(_fetchval, busy):  # and the next one is in flight
                await trio.sleep(0.02)
        second.process.kill()  # SIGKILL, in the middle of a batch's transaction
        await second.process.wait()
    finally:
        await _kill(second.process)
    gone = (
        "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%INSERT INTO checks%' "
        "AND pid <> pg_backend_pid()"
    )
    with trio.fail_after(10):
        while await db.run(_fetchval, gone):
            await trio.sleep(0.05)
    stored = await db.run(count_checks)
    audited = await db.run(_fetchval, "SELECT coalesce(sum(rows), 0) FROM batch_audit")
    partial = await db.run(
        _fetchval,
        "SELECT count(*) FROM batch_audit a WHERE a.rows <> (SELECT count(*) FROM checks c "
        "WHERE c.id = ANY (a.ids))",
    )
    duplicated = await db.run(_fetchval, "SELECT count(*) - count(DISTINCT id) FROM checks")
    assert audited >= 1, "the killed service committed batches before the kill"
    assert stored - before == audited, "every check belongs to a whole committed batch"
    assert partial == 0 and duplicated == 0
    batches = await db.run(_fetchval, "SELECT count(*) FROM batch_audit")
    print(
        f"SIGKILL mid-batch: {batches} whole batches ({audited} checks) committed before "
        f"the kill, {stored - before} stored; 0 partial, 0 duplicated"
    )
    await db.run(
        _execute,
        "DROP TRIGGER slow ON checks; DROP TRIGGER audit ON checks; "
        "UPDATE monitors SET interval_seconds = 60",
    )


async def _story_resume(db: Database, data_dir: Path, tmp_path: Path) -> None:
    statuses = await db.run(_fetchval, "SELECT array_agg(DISTINCT status) FROM monitors")
    assert statuses == ["up"], statuses
    third = await _serve(data_dir, tmp_path / "serve3.log")
    try:
        figures = await _metrics(third.base)
        # resumed from the stored status: up at once, before any check (60 s interval)
        assert figures[UP] == MONITORS + 1, figures
        assert figures[("uptrio_monitors", (("status", "pending"),))] == 0
        third.process.send_signal(signal.SIGTERM)
        with trio.fail_after(12):
            assert await third.process.wait() == 0
    finally:
        await _kill(third.process)
