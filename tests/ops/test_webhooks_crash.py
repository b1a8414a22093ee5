"""At least once across a SIGKILL (docs/webhooks.md, At least once, in no particular order):
the real ``uptrio serve`` is killed while a delivery's attempt is in flight, and the
restarted service delivers the event.

A receiver on 127.0.0.1 (port 0) holds the first request open without answering, so the
sender is mid-attempt when the test kills the service (the event itself was committed
with the incident that caused it). The claim lapses (``--webhook-claim-seconds 2``), the
restarted service claims the delivery again, and the receiver, answering by then, gets
the same event (same ``Uptrio-Event-Id``). Subprocesses on a temporary data directory;
loopback only.
"""

from __future__ import annotations

import re
import signal
import subprocess
from pathlib import Path
from typing import Any

import httpx
import trio

from store import start_embedded
from tests.receiver import HANG, Receiver
from tests.web.helpers import ROOT, serve_command, service_env

_FLAGS = (
    "--webhook-poll-seconds", "0.05",
    "--webhook-timeout-seconds", "1.5",
    "--webhook-claim-seconds", "2",
    "--webhook-retry-base-seconds", "0.5",
)  # fmt: skip
_TOKEN = re.compile(r"\n\n(ey[\w-]+\.[\w-]+\.[\w-]+)\n")


async def _serve(data_dir: Path, *, first: bool = False) -> tuple[trio.Process, str, str]:
    """Start ``uptrio serve``; (process, base URL, everything it printed so far), once it
    listens (and on the ``first`` start, once it printed the first token)."""
    process = await trio.lowlevel.open_process(
        serve_command(data_dir, *_FLAGS),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=service_env(),
        cwd=ROOT,
    )
    assert process.stdout is not None
    out = ""
    while "listening on" not in out or (first and not _TOKEN.search(out)):
        chunk = await process.stdout.receive_some(4096)
        assert chunk, out
        out += chunk.decode()
    found = re.search(r"listening on (http://127\.0\.0\.1:\d+)", out)
    assert found is not None, out
    return process, found.group(1), out


async def _stop(process: trio.Process) -> None:
    if process.returncode is None:
        process.kill()
        with trio.CancelScope(shield=True):
            await process.wait()


async def _deliveries(base: str, token: str, endpoint_id: str) -> list[dict[str, Any]]:
    async with httpx.AsyncClient(base_url=base, timeout=10) as http:
        page = await http.get(
            f"/webhook-endpoints/{endpoint_id}/deliveries",
            headers={"Authorization": f"Bearer {token}"},
        )
    assert page.status_code == 200, page.text
    return page.json()["data"]  # type: ignore[no-any-return]


async def test_an_event_survives_a_sigkill_between_commit_and_delivery(
    tmp_path: Path, nursery: trio.Nursery
) -> None:
    with trio.fail_after(60):
        receiver = Receiver(script=[HANG])
        await nursery.start(receiver.serve)
        data_dir = tmp_path / "data"
        first, base, out = await _serve(data_dir, first=True)
        try:
            match = _TOKEN.search(out)
            assert match is not None, out
            token = match.group(1)
            headers = {"Authorization": f"Bearer {token}"}
            async with httpx.AsyncClient(base_url=base, timeout=10) as http:
                hook = await http.post(
                    "/webhook-endpoints",
                    json={"url": receiver.url, "enabled_events": ["incident.*"]},
                    headers=headers,
                )
                assert hook.status_code == 201, hook.text
                incident = await http.post("/incidents", json={"title": "t"}, headers=headers)
                assert incident.status_code == 201, incident.text
            (held,) = await receiver.wait_for(1)  # the sender is mid-attempt
            (delivery,) = await _deliveries(base, token, hook.json()["id"])
            assert delivery["status"] == "pending" and delivery["attempts"] == 0
            first.kill()  # SIGKILL: the attempt is never recorded
            await first.wait()
        finally:
            await _stop(first)

        second, base, _ = await _serve(data_dir)
        try:
            _, again = await receiver.wait_for(2)
            assert again.headers["uptrio-event-id"] == held.headers["uptrio-event-id"]
            assert again.body == held.body
            while (await _deliveries(base, token, hook.json()["id"]))[0]["status"] == "pending":
                await trio.sleep(0.05)
            (done,) = await _deliveries(base, token, hook.json()["id"])
            assert done["status"] == "succeeded" and done["attempts"] == 1
            assert done["id"] == delivery["id"]
            second.send_signal(signal.SIGTERM)
            assert await second.wait() == 0
        finally:
            await _stop(second)
            # the killed process still counts as a user of the embedded server: stop it
            embedded = await trio.to_thread.run_sync(start_embedded, data_dir)
            await trio.to_thread.run_sync(embedded.stop_server)
