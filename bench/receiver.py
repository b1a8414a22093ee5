"""The receiver of ``uptrio bench webhooks`` and ``uptrio bench alerts``: an HTTP server
on 127.0.0.1 (a port the OS picks) in a child process of its own, so the harness's own
work never delays it.

Each POST is answered ``200`` with an empty body as soon as its body is complete, on a
keep-alive connection (h11 on trio), then recorded with the wall-clock time the body was
complete (epoch seconds):

- an event's delivery (it has an ``Uptrio-Event-Id`` header): the event id and the
  event's ``type`` from the body. One delivery in ``--verify-every`` (the first
  included) keeps its body and ``Uptrio-Signature`` header; they are checked with hmac
  and hashlib when the log is dumped, once the harness has told the receiver the
  endpoint's secret (so a delivery that arrives before that is checked too);
- a notification of a ``webhook`` notification channel (no event id; the body is
  ``{"object": "notification", "kind": …, "alert": {"id": …}, …}``, docs/alerts.md):
  the alert id and the kind, which together name one notification of the bench's
  one-step policy (its ``trigger`` and its ``resolved`` notice).

Control, as the targets' (`bench.targets.servers`): one command line on stdin, one JSON
line on stdout per answer:

================  ==========================================================
command           answer
================  ==========================================================
(start-up)        ``{"ready": true, "port": P, "available": true, "reason": null}``
``secret S``      ``{"secret": true}``: the endpoint's signing secret
``stats``         ``{"received": N, "notifications": M}``: POSTs answered so far
``dump PATH``     writes ``{"received": [[event_id, at, type], ...], "notifications":
                  [[alert_id, kind, at], ...], "signatures": {"checked": n,
                  "valid": n, "invalid": [event ids], "skew_seconds_max": s}}`` to
                  PATH; answers ``{"dumped": N}`` (N: events' deliveries)
end of input      the process exits (also after ``--max-seconds``)
================  ==========================================================
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import sys
import time
from dataclasses import dataclass, field
from typing import Any

import h11
import trio

__all__ = ["Receiver", "main", "signature_valid"]

_OK_HEADERS = [("Content-Length", "0")]


def signature_valid(header: str, body: bytes, secret: str) -> tuple[bool, int | None]:
    """Whether one ``v1=`` of an ``Uptrio-Signature`` value (``t=<t>,v1=<hex>,...``) is
    the hex HMAC-SHA256 of ``b"<t>." + body`` keyed with ``secret`` (UTF-8); and ``t``
    (epoch seconds, None when absent)."""
    timestamp: str | None = None
    signatures: list[str] = []
    for part in header.split(","):
        key, _, value = part.strip().partition("=")
        if key == "t":
            timestamp = value
        elif key == "v1":
            signatures.append(value)
    if timestamp is None or not timestamp.isdigit():
        return False, None
    expected = hmac.new(
        secret.encode("utf-8"), timestamp.encode("ascii") + b"." + body, hashlib.sha256
    ).hexdigest()
    return any(hmac.compare_digest(expected, s) for s in signatures), int(timestamp)


@dataclass(slots=True)
class Receiver:
    """What the receiver saw: ``received`` rows ``(event id, at, type)`` (``at`` epoch
    seconds), ``notifications`` rows ``(alert id, kind, at)``, and the sampled
    deliveries ``(event id, at, signature header, body)``."""

    verify_every: int = 10
    secret: str | None = None
    received: list[tuple[str, float, str]] = field(default_factory=list)
    notifications: list[tuple[str, str, float]] = field(default_factory=list)
    samples: list[tuple[str, float, str, bytes]] = field(default_factory=list)

    def record(self, event_id: str, at: float, signature: str, body: bytes) -> None:
        """Record one answered POST (module docstring): an event's delivery when
        ``event_id`` is set (its type read from ``body``), else a notification."""
        try:
            payload = json.loads(body)
        except ValueError:
            payload = None
        if not isinstance(payload, dict):
            payload = {}
        if not event_id and payload.get("object") == "notification":
            alert = payload.get("alert")
            alert_id = str(alert.get("id", "")) if isinstance(alert, dict) else ""
            self.notifications.append((alert_id, str(payload.get("kind", "")), at))
            return
        kind = str(payload.get("type", ""))
        if len(self.received) % self.verify_every == 0:
            self.samples.append((event_id, at, signature, body))
        self.received.append((event_id, at, kind))

    def report(self) -> dict[str, Any]:
        """The dump's JSON (module docstring)."""
        valid = 0
        invalid: list[str] = []
        skew = 0.0
        for event_id, at, signature, body in self.samples:
            ok, stamp = (
                (False, None)
                if self.secret is None
                else signature_valid(signature, body, self.secret)
            )
            valid += ok
            if not ok:
                invalid.append(event_id)
            if stamp is not None:
                skew = max(skew, abs(at - stamp))
        return {
            "received": self.received,
            "notifications": self.notifications,
            "signatures": {
                "checked": len(self.samples),
                "valid": valid,
                "invalid": invalid,
                "skew_seconds_max": round(skew, 3),
            },
        }

    async def serve(self, stream: trio.SocketStream) -> None:
        """Answer the POSTs of one connection (keep-alive) until the peer closes it."""
        connection = h11.Connection(h11.SERVER)
        headers: dict[bytes, bytes] = {}
        body = bytearray()
        try:
            while True:
                event = connection.next_event()
                if event is h11.NEED_DATA:
                    data = await stream.receive_some(65536)
                    if not data:
                        return
                    connection.receive_data(data)
                    continue
                if isinstance(event, h11.Request):
                    headers = {k.lower(): v for k, v in event.headers}
                    body = bytearray()
                elif isinstance(event, h11.Data):
                    body += event.data
                elif isinstance(event, h11.EndOfMessage):
                    at = time.time()
                    answer = connection.send(h11.Response(status_code=200, headers=_OK_HEADERS))
                    done = connection.send(h11.EndOfMessage())
                    await stream.send_all((answer or b"") + (done or b""))
                    self.record(
                        headers.get(b"uptrio-event-id", b"").decode(),
                        at,
                        headers.get(b"uptrio-signature", b"").decode(),
                        bytes(body),
                    )
                    if connection.our_state is h11.MUST_CLOSE:
                        return
                    connection.start_next_cycle()
                elif isinstance(event, h11.ConnectionClosed):
                    return
        except (h11.ProtocolError, trio.BrokenResourceError, trio.ClosedResourceError):
            return
        finally:
            await stream.aclose()


def _answer(**fields: object) -> None:
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()


async def _control(receiver: Receiver, cancel: trio.CancelScope) -> None:
    """Read commands from stdin until it closes, then end the process's work."""
    stdin = trio.lowlevel.FdStream(0)
    buffer = b""
    while True:
        chunk = await stdin.receive_some(4096)
        if not chunk:
            cancel.cancel()
            return
        buffer += chunk
        while b"\n" in buffer:
            raw, buffer = buffer.split(b"\n", 1)
            line = raw.decode().strip()
            if line.startswith("secret "):
                receiver.secret = line[7:]
                _answer(secret=True)
            elif line == "stats":
                _answer(received=len(receiver.received), notifications=len(receiver.notifications))
            elif line.startswith("dump "):
                await trio.Path(line[5:]).write_text(json.dumps(receiver.report()))
                _answer(dumped=len(receiver.received))


async def _run(max_seconds: float, verify_every: int) -> None:
    receiver = Receiver(verify_every=max(1, verify_every))
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1", backlog=1024)
    port = listeners[0].socket.getsockname()[1]
    with trio.move_on_after(max_seconds) as cancel:
        async with trio.open_nursery() as nursery:
            await nursery.start(trio.serve_listeners, receiver.serve, listeners)
            _answer(ready=True, port=port, available=True, reason=None)
            nursery.start_soon(_control, receiver, cancel)


def main(argv: list[str] | None = None) -> None:
    """Entry point of ``python -m bench.receiver [--max-seconds S] [--verify-every N]``."""
    parser = argparse.ArgumentParser(prog="python -m bench.receiver")
    parser.add_argument("--max-seconds", type=float, default=3600.0)
    parser.add_argument("--verify-every", type=int, default=10)
    args = parser.parse_args(argv)
    trio.run(_run, args.max_seconds, args.verify_every)


if __name__ == "__main__":
    main()
