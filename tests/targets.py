"""Local target servers for tests: HTTP(S), TCP and DNS, on loopback only.

Every target listens on port 0 of a loopback address (``127.0.0.1`` unless told ``::1``)
and reports the port the system picked. Each one is an object holding its behaviour and
what it saw, plus a ``run`` method for ``nursery.start``; tests start it in a nursery
they pass explicitly (pytest-trio's ``nursery`` fixture is the usual one)::

    target = HttpTarget()
    port = await nursery.start(target.run)     # listening now; target.port == port
    await target.set_mode("error")             # every request now gets a 500
    await target.set_mode("stopped")           # listener closed: connections refused
    await target.set_mode("ok")                # listening again on the SAME port
    target.requests[-1].path, target.requests[-1].method

``open_http_target`` / ``open_tcp_target`` / ``open_dns_target`` do the same as async
context managers with a nursery of their own. Behaviour changes take effect for the next
connection; ``set_mode`` returns once the listener is really closed or open again.

Time stamps (``at``) are `trio.current_time()` in seconds. The servers are for tests:
they answer one request per connection and close it, and swallow client misbehaviour
(resets, failed TLS handshakes) so that a probe's failure never crashes a test's nursery.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

import dns.flags
import dns.message
import dns.rcode
import dns.rdatatype
import dns.rrset
import h11
import trio
import trustme

__all__ = [
    "DnsQuery",
    "DnsTarget",
    "HttpMode",
    "HttpRequest",
    "HttpTarget",
    "TcpTarget",
    "TlsPair",
    "make_tls_pair",
    "open_dns_target",
    "open_http_target",
    "open_tcp_target",
]

HttpMode = Literal["ok", "error", "slow", "stopped"]
_ANY_ERROR = (trio.BrokenResourceError, trio.ClosedResourceError, h11.ProtocolError, OSError)


class _SwitchableListener:
    """A TCP listener on a loopback port that can be closed and reopened on that port.

    Subclasses implement ``_handle(stream)`` for each accepted connection.
    """

    def __init__(self, *, host: str = "127.0.0.1") -> None:
        self.host = host
        self.port = 0
        """The bound port (0 until ``run`` has started)."""
        self.accepted = 0
        """Connections accepted so far (all runs of the listener)."""
        self.peers: list[str] = []
        """The address each accepted connection came from, in order."""
        self._want_listening = True
        self._changed = trio.Event()
        self._state_reached = trio.Event()
        self._listening = False

    @property
    def url_host(self) -> str:
        """The host as it goes in a URL: ``127.0.0.1`` or ``[::1]``."""
        return f"[{self.host}]" if ":" in self.host else self.host

    @property
    def address(self) -> str:
        """``host:port`` as a tcp monitor's url takes it."""
        return f"{self.url_host}:{self.port}"

    async def run(self, *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
        """Listen until cancelled; report the bound port through ``task_status``.

        While stopped (see ``stop``), the listening socket is closed, so connections to
        the port are refused; ``start`` binds the same port again.
        """
        reported = False
        while True:
            if not self._want_listening:
                self._listening = False
                self._state_reached.set()
                await self._wait_change()
                continue
            listeners = await trio.open_tcp_listeners(self.port, host=self.host)
            self.port = listeners[0].socket.getsockname()[1]
            self._listening = True
            self._state_reached.set()
            if not reported:
                task_status.started(self.port)
                reported = True
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._serve, listeners[0], nursery)
                await self._wait_change()
                while self._want_listening:  # a spurious wake-up: keep serving
                    await self._wait_change()
                nursery.cancel_scope.cancel()
            await listeners[0].aclose()

    async def stop(self) -> None:
        """Close the listener (and cut open connections); returns once it is closed."""
        await self._switch(listening=False)

    async def start(self) -> None:
        """Listen again on the same port; returns once it is listening."""
        await self._switch(listening=True)

    async def _switch(self, *, listening: bool) -> None:
        if self._listening == listening and self._want_listening == listening:
            return
        self._want_listening = listening
        self._state_reached = trio.Event()
        self._changed.set()
        await self._state_reached.wait()

    async def _wait_change(self) -> None:
        await self._changed.wait()
        self._changed = trio.Event()

    async def _serve(self, listener: trio.SocketListener, nursery: trio.Nursery) -> None:
        while True:
            stream = await listener.accept()
            self.accepted += 1
            self.peers.append(stream.socket.getpeername()[0])
            nursery.start_soon(self._handle_quietly, stream)

    async def _handle_quietly(self, stream: trio.SocketStream) -> None:
        try:
            await self._handle(stream)
        except (*_ANY_ERROR, ssl.SSLError):
            pass
        finally:
            await trio.aclose_forcefully(stream)

    async def _handle(self, stream: trio.SocketStream) -> None:
        raise NotImplementedError


class TcpTarget(_SwitchableListener):
    """A TCP listener that accepts each connection and closes it at once.

    Attributes: ``port`` (bound port), ``accepted`` (connections accepted so far),
    ``address`` (``"127.0.0.1:<port>"``). ``await stop()`` / ``await start()`` switch it
    off (refusing connections) and on again on the same port.
    """

    async def _handle(self, stream: trio.SocketStream) -> None:
        return


@dataclass(frozen=True, slots=True)
class HttpRequest:
    """One request an `HttpTarget` received.

    ``at`` is `trio.current_time()` in seconds when the request head arrived; header
    names are lowercase, values decoded as Latin-1; ``body`` fills as the body arrives
    (complete once the response is sent).
    """

    method: str
    path: str
    headers: dict[str, str]
    at: float
    body: bytearray = field(default_factory=bytearray)


@dataclass(frozen=True, slots=True)
class TlsPair:
    """A test CA and contexts built from it: ``server`` serves a certificate for
    ``localhost`` and ``127.0.0.1`` and ``::1``; ``client`` trusts only the test CA."""

    ca: trustme.CA
    server: ssl.SSLContext
    client: ssl.SSLContext


def make_tls_pair() -> TlsPair:
    """A fresh trustme CA with a server context and a client context (see `TlsPair`)."""
    ca = trustme.CA()
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("localhost", "127.0.0.1", "::1").configure_cert(server)
    client = ssl.create_default_context()
    ca.configure_trust(client)
    return TlsPair(ca=ca, server=server, client=client)


class HttpTarget(_SwitchableListener):
    """A small HTTP/1.1 server (h11 on trio), HTTPS when given a server ``ssl_context``.

    Args:
        mode: the starting behaviour (any but ``"stopped"``).
        slow_seconds: how long ``"slow"`` waits before answering, in seconds.
        ssl_context: a server-side context (`make_tls_pair`) to serve HTTPS.
        host: the loopback address to listen on, ``127.0.0.1`` or ``::1``.

    Behaviour, by ``mode`` (switch with ``await set_mode(...)``):

    - ``"ok"``: routes below, otherwise 200 with body ``ok``;
    - ``"error"``: 500 for every request;
    - ``"slow"``: waits ``slow_seconds``, then answers as ``"ok"``;
    - ``"stopped"``: the listener is closed, connections are refused; switching to any
      other mode listens again on the same port.

    Routes (in ``"ok"`` and ``"slow"``):

    - ``responses[path] = (status, headers, body)``: answer exactly that (headers as
      ``(name, value)`` pairs; ``Content-Length`` and ``Connection`` are added);
    - ``redirects[path] = (status, location)``: answer ``status`` with that ``Location``
      (any string: absolute, ``/absolute-path`` or ``relative``);
    - ``/redirect/<n>`` with n > 0: ``302`` to the *relative* location ``<n-1>``, so
      ``/redirect/3`` takes 3 redirects to reach ``/redirect/0``, which is a 200;
    - ``/status/<code>``: answers ``<code>``;
    - ``/big/<n>``: 200 with an ``n``-byte body.

    A connection from an address in ``denied`` gets ``403`` for every request, whatever
    the mode, as nginx's ``deny`` answers (https://nginx.org/en/docs/http/ngx_http_access_module.html);
    add and remove addresses by plain mutation, for the next connection.

    Every response carries ``Connection: close`` and the connection is closed after it.
    ``requests`` records each request in arrival order (`HttpRequest`); ``accepted``
    counts connections. ``base_url`` is ``http(s)://127.0.0.1:<port>``.
    """

    def __init__(
        self,
        *,
        mode: HttpMode = "ok",
        slow_seconds: float = 10.0,
        ssl_context: ssl.SSLContext | None = None,
        host: str = "127.0.0.1",
    ) -> None:
        if mode == "stopped":
            raise ValueError("start an HttpTarget listening, then set_mode('stopped')")
        super().__init__(host=host)
        self.mode: HttpMode = mode
        self.slow_seconds = slow_seconds
        self.ssl_context = ssl_context
        self.redirects: dict[str, tuple[int, str]] = {}
        self.responses: dict[str, tuple[int, list[tuple[str, str]], bytes]] = {}
        self.requests: list[HttpRequest] = []
        self.denied: set[str] = set()

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>`` (``https`` when serving TLS); no trailing slash."""
        scheme = "https" if self.ssl_context is not None else "http"
        return f"{scheme}://{self.url_host}:{self.port}"

    def url(self, path: str = "/") -> str:
        """The full URL of ``path`` on this target."""
        return self.base_url + path

    async def set_mode(self, mode: HttpMode) -> None:
        """Switch behaviour; returns once a ``"stopped"`` listener is closed, or a
        restarted one is listening again (on the same port)."""
        self.mode = mode
        if mode == "stopped":
            await self.stop()
        else:
            await self.start()

    async def _handle(self, stream: trio.SocketStream) -> None:
        transport: trio.abc.Stream = stream
        if self.ssl_context is not None:
            transport = trio.SSLStream(stream, self.ssl_context, server_side=True)
            await transport.do_handshake()
        conn = h11.Connection(h11.SERVER)
        request: h11.Request | None = None
        body = bytearray()
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                conn.receive_data(bytes(await transport.receive_some(65536)))
            elif isinstance(event, h11.Request):
                request = event
                self.requests.append(
                    HttpRequest(
                        method=event.method.decode(),
                        path=event.target.decode(),
                        headers={k.decode(): v.decode("latin-1") for k, v in event.headers},
                        at=trio.current_time(),
                        body=body,
                    )
                )
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage):
                break
            elif isinstance(event, h11.ConnectionClosed):
                return
        assert request is not None
        mode = self.mode
        if stream.socket.getpeername()[0] in self.denied:
            status, headers, body = 403, [], b"forbidden\n"
        else:
            if mode == "slow":
                await trio.sleep(self.slow_seconds)
            status, headers, body = self._route(request.target.decode(), mode)
        headers += [("Content-Length", str(len(body))), ("Connection", "close")]
        data = conn.send(h11.Response(status_code=status, headers=headers))
        if request.method != b"HEAD":  # a HEAD response has the headers but no body
            data = (data or b"") + (conn.send(h11.Data(data=body)) or b"")
        data = (data or b"") + (conn.send(h11.EndOfMessage()) or b"")
        await transport.send_all(data)

    def _route(self, path: str, mode: str) -> tuple[int, list[tuple[str, str]], bytes]:
        if mode == "error":
            return 500, [], b"error\n"
        if path in self.responses:
            status, headers, body = self.responses[path]
            return status, list(headers), body
        if path in self.redirects:
            status, location = self.redirects[path]
            return status, [("Location", location)], b""
        if path.startswith("/redirect/"):
            remaining = int(path.rsplit("/", 1)[1])
            if remaining > 0:
                return 302, [("Location", str(remaining - 1))], b""
        elif path.startswith("/status/"):
            return int(path.rsplit("/", 1)[1]), [], b""
        elif path.startswith("/big/"):
            return 200, [], b"x" * int(path.rsplit("/", 1)[1])
        return 200, [], b"ok\n"


@dataclass(frozen=True, slots=True)
class DnsQuery:
    """One question a `DnsTarget` received: lowercase name without the final dot, type
    as text (``"A"``, ``"AAAA"``), ``at`` = `trio.current_time()` in seconds, ``source``
    the address the query came from."""

    name: str
    rdtype: str
    at: float
    source: str = ""


@dataclass
class DnsTarget:
    """A DNS server on a loopback UDP port, answering from ``records``.

    ``records`` maps a lowercase name (no final dot) to its addresses: IPv4 ones answer
    A questions, IPv6 ones AAAA questions (a known name without an address of the asked
    family gets an empty NOERROR answer, "no answer"). Unknown names get NXDOMAIN.

    ``mode``: ``"ok"`` answers as above, ``"silent"`` drops every query (a timeout for
    the client), ``"servfail"`` answers SERVFAIL. Change it by plain assignment.
    ``queries`` records every question (`DnsQuery`); ``port`` is the bound port;
    ``nameserver`` is ``("127.0.0.1", port)`` as `Prober` takes it.
    """

    records: dict[str, list[str]] = field(default_factory=dict)
    mode: Literal["ok", "silent", "servfail"] = "ok"
    ttl_seconds: int = 60
    queries: list[DnsQuery] = field(default_factory=list)
    port: int = 0

    @property
    def nameserver(self) -> tuple[str, int]:
        """``("127.0.0.1", port)``."""
        return ("127.0.0.1", self.port)

    async def run(self, *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve until cancelled; report the bound UDP port through ``task_status``."""
        with trio.socket.socket(trio.socket.AF_INET, trio.socket.SOCK_DGRAM) as sock:
            await sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
            task_status.started(self.port)
            while True:
                data, peer = await sock.recvfrom(65535)
                reply = self._answer(data, peer[0])
                if reply is not None:
                    await sock.sendto(reply, peer)

    def _answer(self, wire: bytes, source: str) -> bytes | None:
        try:
            query = dns.message.from_wire(wire)
        except Exception:  # a test server: ignore garbage
            return None
        response = dns.message.make_response(query)
        response.flags |= dns.flags.RA
        for question in query.question:
            name = question.name.to_text(omit_final_dot=True).lower()
            rdtype = dns.rdatatype.to_text(question.rdtype)
            self.queries.append(
                DnsQuery(name=name, rdtype=rdtype, at=trio.current_time(), source=source)
            )
            if self.mode == "silent":
                return None
            if self.mode == "servfail":
                response.set_rcode(dns.rcode.SERVFAIL)
            elif name not in self.records:
                response.set_rcode(dns.rcode.NXDOMAIN)
            else:
                family_mark = ":" if rdtype == "AAAA" else "."
                addresses = [a for a in self.records[name] if family_mark in a]
                if rdtype in ("A", "AAAA") and addresses:
                    rrset = dns.rrset.from_text_list(
                        question.name, self.ttl_seconds, "IN", rdtype, addresses
                    )
                    response.answer.append(rrset)
        return response.to_wire()


@asynccontextmanager
async def open_http_target(**options: Any) -> AsyncIterator[HttpTarget]:
    """An `HttpTarget` (``options`` are its fields) serving in a nursery of its own for
    the duration of the block; the port is bound on entry."""
    target = HttpTarget(**options)
    async with trio.open_nursery() as nursery:
        await nursery.start(target.run)
        yield target
        nursery.cancel_scope.cancel()


@asynccontextmanager
async def open_tcp_target(*, host: str = "127.0.0.1") -> AsyncIterator[TcpTarget]:
    """A `TcpTarget` serving in a nursery of its own for the duration of the block."""
    target = TcpTarget(host=host)
    async with trio.open_nursery() as nursery:
        await nursery.start(target.run)
        yield target
        nursery.cancel_scope.cancel()


@asynccontextmanager
async def open_dns_target(**options: Any) -> AsyncIterator[DnsTarget]:
    """A `DnsTarget` (``options`` are its fields) serving in a nursery of its own."""
    target = DnsTarget(**options)
    async with trio.open_nursery() as nursery:
        await nursery.start(target.run)
        yield target
        nursery.cancel_scope.cancel()
