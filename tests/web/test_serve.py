"""The real service: ``uptrio serve --no-engine`` as a subprocess on a loopback port chosen
by the OS, with its embedded Postgres in a temporary data directory; the token commands
run beside it against the same data directory; SIGTERM stops it cleanly. The data
directory, made open to every user beforehand, is closed at start-up with a warning.
"""

from __future__ import annotations

import json
import re
import signal
import stat
import subprocess
from pathlib import Path

import httpx
import jwt
import trio

from store import DATA_DIR_MODE
from tests.web.helpers import CLI, ROOT, serve_command, service_env


async def _uptrio(*args: str) -> tuple[int, str, str]:
    """Run an ``uptrio`` command to completion: (exit status, stdout, stderr)."""
    done = await trio.run_process(
        [*CLI, *args],
        capture_stdout=True,
        capture_stderr=True,
        check=False,
        env=service_env(),
        cwd=ROOT,
    )
    return done.returncode, done.stdout.decode(), done.stderr.decode()


async def _read_until(stream: trio.abc.ReceiveStream, pattern: str, buffer: bytearray) -> str:
    """Read ``stream`` into ``buffer`` until ``pattern`` matches its text; the match."""
    while True:
        found = re.search(pattern, buffer.decode(errors="replace"))
        if found:
            return found.group(1)
        chunk = await stream.receive_some(4096)
        assert chunk, "the service closed its output: " + buffer.decode(errors="replace")
        buffer += chunk


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _open_to_all(path: Path) -> None:
    path.mkdir()
    path.chmod(0o755)


async def test_uptrio_serve_answers_manages_tokens_and_stops_on_sigterm(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    _open_to_all(data_dir)
    with trio.fail_after(40), (tmp_path / "serve.log").open("wb") as log:
        process = await trio.lowlevel.open_process(
            serve_command(data_dir),
            stdout=subprocess.PIPE,
            stderr=log,
            env=service_env(),
            cwd=ROOT,
        )
        try:
            assert process.stdout is not None
            out = bytearray()
            base = await _read_until(process.stdout, r"listening on (http://127\.0\.0\.1:\d+)", out)
            first = await _read_until(process.stdout, r"\n\n(ey[\w-]+\.[\w-]+\.[\w-]+)\n", out)
            assert (data_dir / "first-token").read_text().strip() == first
            # docs/operations.md, The data directory: it and its files are the owner's alone
            assert _mode(data_dir / "first-token") == _mode(data_dir / "jwt-secret") == 0o600
            assert _mode(data_dir) == DATA_DIR_MODE  # 0700; 0711 as root (store.datadir)
            (warning,) = [
                line
                for line in map(json.loads, (tmp_path / "serve.log").read_text().splitlines())
                if line["event"].startswith("the data directory was open to other users")
            ]
            assert warning["mode"] == "0755" and warning["level"] == "warning"

            async with httpx.AsyncClient(base_url=base, timeout=10) as http:
                admin = {"Authorization": f"Bearer {first}"}
                created = await http.post(
                    "/monitors",
                    json={"name": "web", "url": "https://example.com/", "type": "http"},
                    headers=admin,
                )
                assert created.status_code == 201, created.text
                assert created.headers["Request-Id"].startswith("req_")
                listed = await http.get("/monitors", headers=admin)
                assert [m["id"] for m in listed.json()["data"]] == [created.json()["id"]]
                extra = await http.post("/incidents", json={"title": "t"}, headers=admin)
                deleted = await http.delete(f"/incidents/{extra.json()['id']}", headers=admin)
                assert deleted.status_code == 204 and deleted.content == b""
                assert deleted.headers["Request-Id"].startswith("req_")
                assert "content-type" not in deleted.headers
                assert "content-length" not in deleted.headers

                status, stdout, stderr = await _uptrio(
                    "tokens",
                    "create",
                    "--data-dir",
                    str(data_dir),
                    "--account",
                    "x",
                    "--permissions",
                    "monitors.read",
                )
                assert status == 0, stderr
                token = stdout.strip()
                assert re.fullmatch(r"ey[\w-]+\.[\w-]+\.[\w-]+", token), stdout
                assert jwt.get_unverified_header(token)["alg"] == "HS256"
                reader = {"Authorization": f"Bearer {token}"}
                page = await http.get("/monitors", headers=reader)
                assert page.status_code == 200 and page.json()["data"] == [], "account x is empty"
                refused = await http.post("/monitors", json={}, headers=reader)
                assert refused.status_code == 403

                status, stdout, stderr = await _uptrio(
                    "tokens", "list", "--data-dir", str(data_dir)
                )
                assert status == 0, stderr
                rows = [line.split() for line in stdout.splitlines()[1:]]
                mine = [r for r in rows if r[1] == "x"]
                assert len(mine) == 1 and mine[0][2] == "active" and mine[0][4] == "monitors.read"
                assert any(r[1] == "default" for r in rows)
                token_id = mine[0][0]
                assert token_id.startswith("tok_")

                # Just past its expiry, a token is still within the 30 s leeway: the API
                # takes it, and the listing says so too.
                status, stdout, stderr = await _uptrio(
                    "tokens", "create", "--data-dir", str(data_dir), "--account", "y",
                    "--permissions", "monitors.read", "--expires-in", "1",
                )  # fmt: skip
                assert status == 0, stderr
                brief = {"Authorization": f"Bearer {stdout.strip()}"}
                await trio.sleep(2.1)
                assert (await http.get("/monitors", headers=brief)).status_code == 200
                status, stdout, stderr = await _uptrio(
                    "tokens", "list", "--data-dir", str(data_dir), "--account", "y"
                )
                assert status == 0 and stdout.splitlines()[1].split()[2] == "active", stdout

                status, stdout, stderr = await _uptrio(
                    "tokens", "revoke", "--data-dir", str(data_dir), token_id
                )
                assert status == 0 and token_id in stdout, stderr
                gone = await http.get("/monitors", headers=reader)
                assert gone.status_code == 401
                assert gone.json()["error"]["code"] == "token_revoked"
                assert (await http.get("/monitors", headers=admin)).status_code == 200

            process.send_signal(signal.SIGTERM)
            with trio.fail_after(8):
                status = await process.wait()
            assert status == 0
        finally:
            if process.returncode is None:
                process.kill()
                with trio.CancelScope(shield=True):
                    await process.wait()
