"""A webhook receiver for tests: a real HTTP/1.1 server (h11 on trio) on 127.0.0.1,
port 0, that records every request and answers as the test says (a status, or hang).

Usage::

    receiver = Receiver()
    await nursery.start(receiver.serve)
    receiver.url  # http://127.0.0.1:<port>/hook
    receiver.script = [500, 500]  # the next answers; then `status`
    await receiver.wait_for(3)  # three requests arrived
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass, field
from typing import Any

import h11
import trio

HANG = -1
"""A scripted answer: keep the connection open and never answer."""


@dataclass(frozen=True, slots=True)
class Received:
    """One request: its path, headers (lowercase names), body, and when it arrived (trio
    time, seconds)."""

    path: str
    headers: dict[str, str]
    body: bytes
    at: float


@dataclass(slots=True)
class Receiver:
    """Records requests; answers ``script`` in order, then ``status`` (``HANG``: never)."""

    status: int = 200
    script: list[int] = field(default_factory=list)
    received: list[Received] = field(default_factory=list)
    connections: int = 0
    port: int = 0
    _changed: trio.Event = field(default_factory=trio.Event)

    @property
    def url(self) -> str:
        """The url to give an endpoint."""
        return f"http://127.0.0.1:{self.port}/hook"

    async def serve(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Listen on 127.0.0.1 port 0 until cancelled; ``started()`` once listening."""
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        self.port = listeners[0].socket.getsockname()[1]
        task_status.started()
        await trio.serve_listeners(self._handle, listeners)

    async def wait_for(self, count: int) -> list[Received]:
        """Wait until ``count`` requests arrived (guard it with the test's deadline)."""
        while len(self.received) < count:
            await self._changed.wait()
        return self.received

    async def _handle(self, stream: trio.SocketStream) -> None:
        self.connections += 1
        conn = h11.Connection(h11.SERVER)
        async with stream:
            while True:
                request: h11.Request | None = None
                body = bytearray()
                while True:
                    event = conn.next_event()
                    if event is h11.NEED_DATA:
                        try:
                            data = await stream.receive_some(65536)
                        except trio.BrokenResourceError:
                            return
                        conn.receive_data(data)
                        continue
                    if isinstance(event, h11.Request):
                        request = event
                    elif isinstance(event, h11.Data):
                        body += event.data
                    elif isinstance(event, h11.EndOfMessage):
                        break
                    else:  # closed
                        return
                assert request is not None
                headers = {k.decode().lower(): v.decode() for k, v in request.headers}
                self.received.append(
                    Received(request.target.decode(), headers, bytes(body), trio.current_time())
                )
                self._changed.set()
                self._changed = trio.Event()
                answer = self.script.pop(0) if self.script else self.status
                if answer == HANG:
                    await trio.sleep_forever()
                payload = b"ok"
                response = h11.Response(
                    status_code=answer, headers=[("Content-Length", str(len(payload)))]
                )
                try:
                    await stream.send_all(conn.send(response) + conn.send(h11.Data(data=payload)))
                    await stream.send_all(conn.send(h11.EndOfMessage()))
                except trio.BrokenResourceError:
                    return
                if conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
                    return
                conn.start_next_cycle()


def signatures(header: str) -> tuple[int, list[str]]:
    """An independent reading of ``Uptrio-Signature``: (t, the v1 values)."""
    parts = [p.split("=", 1) for p in header.split(",")]
    timestamp = [int(v) for k, v in parts if k == "t"]
    assert len(timestamp) == 1, header
    return timestamp[0], [v for k, v in parts if k == "v1"]


def expected_signature(secret: str, timestamp: int, body: bytes) -> str:
    """HMAC-SHA256 of ``"<t>.<body>"`` with ``secret``, hex: the rule of README, Verifying a
    delivery, written again here so the test does not trust the code under test."""
    return hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
