"""The target servers, child-process side: raw epoll loops that answer probes and log
the wall-clock arrival time of every probe, keyed by monitor index.

One process runs one server; the parent (`bench.targets.control`) starts it as
``python -m bench.targets KIND --options`` and drives it over stdin/stdout, one line per
command and one JSON line per answer:

============  ==========================================================================
command       answer
============  ==========================================================================
(start-up)    ``{"ready": true, "port": P, "available": bool, "reason": str|null}``
``stats``     ``{"arrivals": N}``: probes logged so far
``dump PATH`` writes the log to PATH (see `write_log`); answers ``{"dumped": N}``
``flap PATH`` reads the flapping targets' clock from PATH, JSON ``{"interval": I,
              "flips": [[i, offset], ...]}`` (seconds); answers ``{"flapping": N}``
end of input  the process exits (so a dead parent never leaves a target behind); it
              also exits by itself after ``--max-seconds`` (a bound on every loop)
============  ==========================================================================

What each server sees, and so what is measurable per monitor type (the index ``i`` of a
monitor is carried by what it probes):

- ``http``: ``GET /m/<i>/<mode>`` on 127.0.0.1:PORT, ``mode`` ``o`` (200), ``f`` (500),
  ``s`` (200 after ``--slow-seconds``), ``p`` (flapping: 200 in the intervals
  ``[offset + 2kI, offset + (2k+1)I)``, 500 in the others, by wall time, with ``I`` and
  the monitor's ``offset`` given by ``flap``; 200 until then). Logged when the request
  head is complete.
  Several workers share the port through ``SO_REUSEPORT`` (the kernel spreads the
  connections), so one Python process is never the bottleneck.
- ``tcp``: one listening socket per ok monitor, each on its own loopback address
  (``127.A.B.C:PORT``, see `bench.plan.tcp_address`), so the accepting socket names the
  monitor. Logged at ``accept`` (the handshake completed moments before).
- ``dns``: UDP on 127.0.0.1:PORT, names ``<mode><i>.bench.test``: ``m`` answers A
  127.0.0.1, ``f`` NXDOMAIN, ``s`` answers after ``--slow-seconds``, ``r`` REFUSED.
  A probe asks A and AAAA together; the A question is logged (AAAA gets an empty
  answer).
- ``ping``: a raw ICMP socket (root or CAP_NET_RAW) that sees every echo request on the
  host; requests to a planned loopback address (one per ping monitor) are logged; the
  kernel answers them. Without the privilege the server reports ``available: false``.

Refused connections (``refusing`` targets, failing tcp targets) never reach a process,
so they are not logged: the report counts them from the service side only.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import heapq
import json
import os
import resource
import select
import socket
import struct
import sys
import time
from array import array
from collections.abc import Callable
from pathlib import Path

__all__ = ["ArrivalLog", "main", "read_log", "write_log"]

_HTTP_OK = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nok\n"
_HTTP_FAIL = (
    b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 6\r\nConnection: close\r\n\r\nerror\n"
)
_DNS_SUFFIX = b"bench"
_EPOLLIN = select.EPOLLIN


class ArrivalLog:
    """Arrivals in memory: monitor index (int32) and wall time (float64, epoch seconds),
    appended in arrival order; 12 bytes per probe."""

    __slots__ = ("indices", "times")

    def __init__(self) -> None:
        self.indices = array("i")
        self.times = array("d")

    def add(self, index: int, at: float) -> None:
        """Log one probe of monitor ``index`` arriving at ``at`` (epoch seconds)."""
        self.indices.append(index)
        self.times.append(at)

    def __len__(self) -> int:
        return len(self.indices)


def write_log(log: ArrivalLog, path: Path) -> None:
    """Write ``log`` to ``path``: an int64 count N, N int32 indices, N float64 times
    (native byte order: the file never leaves this machine)."""
    with path.open("wb") as handle:
        handle.write(struct.pack("=q", len(log)))
        handle.write(log.indices.tobytes())
        handle.write(log.times.tobytes())


def read_log(path: Path) -> ArrivalLog:
    """Read a file written by `write_log`."""
    data = path.read_bytes()
    (count,) = struct.unpack_from("=q", data)
    log = ArrivalLog()
    start = 8
    log.indices.frombytes(data[start : start + 4 * count])
    start += 4 * count
    log.times.frombytes(data[start : start + 8 * count])
    return log


class _Loop:
    """An epoll loop with the control channel on stdin and a timer heap.

    ``handlers[fd]`` is called with the epoll event mask; timers are ``(due, seq,
    callback)`` on the wall clock (``time.time``), due seconds.
    """

    def __init__(self, max_seconds: float) -> None:
        self.epoll = select.epoll()
        self.handlers: dict[int, Callable[[int], None]] = {}
        self.timers: list[tuple[float, int, Callable[[], None]]] = []
        self.log = ArrivalLog()
        self.flip_interval = 0.0
        self.flips: dict[int, float] = {}
        self.stop_at = time.monotonic() + max_seconds
        self.running = True
        self._seq = 0
        self._control = b""
        os.set_blocking(0, False)
        self.watch(0, self._on_control)

    def watch(self, fd: int, handler: Callable[[int], None]) -> None:
        """Call ``handler(events)`` whenever ``fd`` is readable."""
        self.handlers[fd] = handler
        self.epoll.register(fd, _EPOLLIN)

    def unwatch(self, fd: int) -> None:
        """Stop watching ``fd`` (before closing it)."""
        del self.handlers[fd]
        self.epoll.unregister(fd)

    def call_at(self, due: float, callback: Callable[[], None]) -> None:
        """Run ``callback`` at wall time ``due`` (epoch seconds) or soon after."""
        self._seq += 1
        heapq.heappush(self.timers, (due, self._seq, callback))

    def run(self) -> None:
        """Serve until stdin closes or ``max_seconds`` have passed."""
        while self.running and time.monotonic() < self.stop_at:
            timeout = 1.0
            if self.timers:
                timeout = min(timeout, max(0.0, self.timers[0][0] - time.time()))
            for fd, events in self.epoll.poll(timeout, 256):
                handler = self.handlers.get(fd)
                if handler is not None:
                    handler(events)
            now = time.time()
            while self.timers and self.timers[0][0] <= now:
                heapq.heappop(self.timers)[2]()

    def flapped_down(self, index: int, at: float) -> bool:
        """Whether the flapping target ``index`` answers 500 at wall time ``at``."""
        offset = self.flips.get(index)
        if offset is None or self.flip_interval <= 0:
            return False
        return int((at - offset) // self.flip_interval) % 2 == 1

    def _on_control(self, _events: int) -> None:
        try:
            chunk = os.read(0, 4096)
        except BlockingIOError:
            return
        if not chunk:
            self.running = False
            return
        self._control += chunk
        while b"\n" in self._control:
            line, self._control = self._control.split(b"\n", 1)
            self._command(line.decode().strip())

    def _command(self, line: str) -> None:
        if line == "stats":
            answer(arrivals=len(self.log))
        elif line.startswith("dump "):
            write_log(self.log, Path(line[5:]))
            answer(dumped=len(self.log))
        elif line.startswith("flap "):
            clock = json.loads(Path(line[5:]).read_text())
            self.flip_interval = float(clock["interval"])
            self.flips = {int(i): float(offset) for i, offset in clock["flips"]}
            answer(flapping=len(self.flips))
        elif line == "exit":
            self.running = False


def answer(**fields: object) -> None:
    """Write one JSON line to stdout (the parent reads it)."""
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()


def _close_quietly(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.close()


def serve_http(loop: _Loop, port: int, slow_seconds: float) -> int:
    """The http worker: accept on 127.0.0.1:``port`` (``SO_REUSEPORT``), read one request
    head, answer by the path's mode, close. Returns the bound port."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(4096)
    listener.setblocking(False)
    buffers: dict[int, tuple[socket.socket, bytearray]] = {}
    log = loop.log

    def finish(conn: socket.socket, response: bytes) -> None:
        with contextlib.suppress(OSError):
            conn.send(response)
        _close_quietly(conn)

    def on_data(fd: int) -> Callable[[int], None]:
        def handler(_events: int) -> None:
            conn, buffer = buffers[fd]
            try:
                chunk = conn.recv(4096)
            except BlockingIOError:
                return
            except OSError:
                chunk = b""
            buffer += chunk
            if chunk and b"\r\n\r\n" not in buffer:
                return
            loop.unwatch(fd)
            del buffers[fd]
            if not chunk:
                _close_quietly(conn)
                return
            at = time.time()
            target = bytes(buffer.split(b" ", 2)[1])
            parts = target.split(b"/")  # b"", b"m", b"<i>", b"<mode>"
            if len(parts) < 4 or parts[1] != b"m":
                finish(conn, _HTTP_FAIL)
                return
            log.add(int(parts[2]), at)
            mode = parts[3][:1]
            if mode == b"s":
                loop.call_at(at + slow_seconds, functools.partial(finish, conn, _HTTP_OK))
            elif mode == b"p":
                finish(conn, _HTTP_FAIL if loop.flapped_down(int(parts[2]), at) else _HTTP_OK)
            else:
                finish(conn, _HTTP_FAIL if mode == b"f" else _HTTP_OK)

        return handler

    def on_accept(_events: int) -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except BlockingIOError:
                return
            except OSError:  # out of file descriptors: let the backlog wait
                return
            conn.setblocking(False)
            fd = conn.fileno()
            buffers[fd] = (conn, bytearray())
            loop.watch(fd, on_data(fd))

    loop.watch(listener.fileno(), on_accept)
    bound: int = listener.getsockname()[1]
    return bound


def serve_tcp(loop: _Loop, port: int, addresses: dict[str, int]) -> int:
    """The tcp server: listen on ``ip:port`` for every ``ip -> index`` of ``addresses``
    (``port`` 0: the port the first bind gets, then the same on every address); log and
    close every accepted connection. Returns the port."""
    for ip, index in addresses.items():
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((ip, port))
        port = listener.getsockname()[1]  # port 0: the first address picks it for all
        listener.listen(64)
        listener.setblocking(False)

        def on_accept(_events: int, listener: socket.socket = listener, index: int = index) -> None:
            while True:
                try:
                    conn, _ = listener.accept()
                except OSError:
                    return
                loop.log.add(index, time.time())
                _close_quietly(conn)

        loop.watch(listener.fileno(), on_accept)
    return port


def _dns_question(data: bytes) -> tuple[bytes, bytes, int, int] | None:
    """(first label, question bytes, qtype, end of question) of a DNS query, or None."""
    if len(data) < 17:
        return None
    position = 12
    labels: list[bytes] = []
    while position < len(data):
        length = data[position]
        if length == 0:
            position += 1
            break
        if length > 63:
            return None
        labels.append(data[position + 1 : position + 1 + length])
        position += 1 + length
    if position + 4 > len(data) or not labels:
        return None
    (qtype,) = struct.unpack_from("!H", data, position)
    end = position + 4
    return labels[0].lower(), data[12:end], qtype, end


def dns_reply(data: bytes, rcode: int, with_answer: bool) -> bytes:
    """The reply to query ``data``: same id and question, QR and RA set, RD copied,
    ``rcode``, and one A record 127.0.0.1 (TTL 60 s) when ``with_answer``."""
    parsed = _dns_question(data)
    assert parsed is not None
    question = parsed[1]
    (query_id, flags) = struct.unpack_from("!HH", data)
    reply_flags = 0x8000 | (flags & 0x7900) | 0x0080 | rcode
    header = struct.pack("!HHHHHH", query_id, reply_flags, 1, int(with_answer), 0, 0)
    body = header + question
    if with_answer:
        body += b"\xc0\x0c" + struct.pack("!HHIH", 1, 1, 60, 4) + socket.inet_aton("127.0.0.1")
    return body


def serve_dns(loop: _Loop, port: int, slow_seconds: float) -> int:
    """The dns server on UDP 127.0.0.1:``port`` (names in the module docstring).
    Returns the bound port."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 * 1024 * 1024)
    sock.bind(("127.0.0.1", port))
    sock.setblocking(False)

    def send(reply: bytes, peer: tuple[str, int]) -> None:
        with contextlib.suppress(OSError):
            sock.sendto(reply, peer)

    def on_query(_events: int) -> None:
        while True:
            try:
                data, peer = sock.recvfrom(2048)
            except OSError:
                return
            at = time.time()
            parsed = _dns_question(data)
            if parsed is None:
                continue
            label, _question, qtype, _end = parsed
            mode, digits = label[:1], label[1:]
            if not digits.isdigit() or mode not in (b"m", b"f", b"s", b"r"):
                send(dns_reply(data, 3, False), peer)
                continue
            if qtype == 1:
                loop.log.add(int(digits), at)
            answer_a = qtype == 1
            if mode == b"f":
                send(dns_reply(data, 3, False), peer)  # NXDOMAIN
            elif mode == b"r":
                send(dns_reply(data, 5, False), peer)  # REFUSED
            elif mode == b"s":
                reply = dns_reply(data, 0, answer_a)
                loop.call_at(at + slow_seconds, functools.partial(send, reply, peer))
            else:
                send(dns_reply(data, 0, answer_a), peer)

    loop.watch(sock.fileno(), on_query)
    bound: int = sock.getsockname()[1]
    return bound


def serve_ping(loop: _Loop, addresses: dict[str, int]) -> str | None:
    """The ping sniffer: log ICMP echo requests to an address of ``addresses`` (ip ->
    index). Returns None, or why it cannot run (no privilege for a raw socket)."""
    try:
        sock = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    except PermissionError as exc:
        return f"no raw ICMP socket: {exc}"
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 * 1024 * 1024)
    sock.setblocking(False)
    by_packed = {socket.inet_aton(ip): index for ip, index in addresses.items()}

    def on_packet(_events: int) -> None:
        while True:
            try:
                packet = sock.recv(2048)
            except OSError:
                return
            header = (packet[0] & 0x0F) * 4
            if len(packet) <= header or packet[header] != 8:  # echo request only
                continue
            index = by_packed.get(packet[16:20])
            if index is not None:
                loop.log.add(index, time.time())

    loop.watch(sock.fileno(), on_packet)
    return None


def _addresses(path: str | None) -> dict[str, int]:
    if path is None:
        return {}
    pairs = json.loads(Path(path).read_text())
    return {str(ip): int(index) for ip, index in pairs}


def main(argv: list[str] | None = None) -> None:
    """Entry point of ``python -m bench.targets KIND ...`` (see the module docstring)."""
    parser = argparse.ArgumentParser(prog="python -m bench.targets")
    parser.add_argument("kind", choices=("http", "tcp", "dns", "ping"))
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--slow-seconds", type=float, default=2.0)
    parser.add_argument("--addresses", help="JSON file of [ip, index] pairs (tcp, ping)")
    parser.add_argument("--max-seconds", type=float, default=3600.0)
    args = parser.parse_args(argv)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:  # a tcp server holds one listening socket per monitor
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    loop = _Loop(args.max_seconds)
    port = 0
    reason: str | None = None
    if args.kind == "http":
        port = serve_http(loop, args.port, args.slow_seconds)
    elif args.kind == "tcp":
        port = serve_tcp(loop, args.port, _addresses(args.addresses))
    elif args.kind == "dns":
        port = serve_dns(loop, args.port, args.slow_seconds)
    else:
        reason = serve_ping(loop, _addresses(args.addresses))
    answer(ready=True, port=port, available=reason is None, reason=reason)
    if reason is None:
        loop.run()
    else:  # nothing to serve: wait for the parent to let go
        while loop.running and time.monotonic() < loop.stop_at:
            for _fd, _events in loop.epoll.poll(1.0):
                loop.handlers[0](_events)
