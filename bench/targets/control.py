"""The target servers, parent side: start them as child processes, ask them for counts,
collect their arrival logs, stop them.

`open_targets` starts what a plan needs (the http workers, the tcp, dns and ping
servers of `bench.targets.servers`), each as ``python -m bench.targets KIND`` with its
stdin and stdout as the control channel, and yields a `TargetSet`. On exit every process
gets end-of-input (it exits by itself), then is killed if still running 3 s later.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

from bench.plan import (
    BenchParams,
    MonitorPlan,
    TargetPorts,
    pick_ping_base,
    ping_address,
    tcp_address,
)

from .nginx import nginx_binary, open_nginx
from .process import stop_process
from .servers import ArrivalLog, read_log

__all__ = ["TargetProcess", "TargetSet", "open_targets", "stop_process"]

_STOP_GRACE_SECONDS = 3.0
_TCP_LISTENERS_PER_PROCESS = 8_000
"""Listening sockets (one per ok tcp monitor) per tcp target process: well under the
usual limit on open files (each target raises its soft limit to the hard one)."""


class TargetProcess:
    """One target server process and its control channel (one command at a time)."""

    def __init__(self, kind: str, process: trio.Process) -> None:
        self.kind = kind
        self.process = process
        self.port = 0
        self.available = True
        self.reason: str | None = None
        self._buffer = bytearray()
        self._lock = trio.Lock()

    @property
    def pid(self) -> int:
        """The process id."""
        return self.process.pid

    async def read_answer(self) -> dict[str, Any]:
        """The next JSON line the process writes.

        Raises:
            RuntimeError: the process closed its output (it died).
        """
        assert self.process.stdout is not None
        while b"\n" not in self._buffer:
            chunk = await self.process.stdout.receive_some(65536)
            if not chunk:
                raise RuntimeError(f"the {self.kind} target exited ({self.process.returncode})")
            self._buffer += chunk
        line, _, rest = bytes(self._buffer).partition(b"\n")
        self._buffer = bytearray(rest)
        answer: dict[str, Any] = json.loads(line)
        return answer

    async def command(self, line: str) -> dict[str, Any]:
        """Send one command line and return the answer (module `servers` docstring)."""
        assert self.process.stdin is not None
        async with self._lock:
            await self.process.stdin.send_all(line.encode() + b"\n")
            return await self.read_answer()

    async def close(self) -> None:
        """End its input (it exits), then reap it (killed after 3 s)."""
        if self.process.stdin is not None:
            with trio.CancelScope(shield=True), suppress(trio.BrokenResourceError):
                await self.process.stdin.aclose()
        await stop_process(self.process, grace_seconds=_STOP_GRACE_SECONDS)


@dataclass(slots=True)
class TargetSet:
    """The running targets of one bench run.

    Attributes:
        ports: where they listen (urls are built from it).
        processes: every target process (http workers first).
        nginx: the nginx master process when nginx serves http, else None.
        ping_available: False when the ping sniffer may not open a raw socket.
    """

    ports: TargetPorts
    processes: list[TargetProcess] = field(default_factory=list)
    nginx: Any = None
    ping_available: bool = True
    notes: list[str] = field(default_factory=list)

    def pids(self) -> list[int]:
        """Process ids of every target process (nginx: its master; workers are its
        children)."""
        found = [p.pid for p in self.processes]
        if self.nginx is not None:
            found.append(self.nginx.pid)
        return found

    async def arrivals(self) -> int:
        """Probes logged so far by every target (nginx logs are counted at the end)."""
        total = 0
        for process in self.processes:
            total += int((await process.command("stats"))["arrivals"])
        return total

    async def set_flips(self, interval: float, flips: dict[int, float], directory: Path) -> None:
        """Give every built-in http worker the flapping targets' clock: ``flips[i]`` is
        when monitor ``i``'s target flips (epoch seconds modulo ``interval``, seconds);
        see `bench.targets.servers`."""
        path = directory / "flips.json"
        path.write_text(json.dumps({"interval": interval, "flips": sorted(flips.items())}))
        for process in self.processes:
            if process.kind == "http":
                await process.command(f"flap {path}")

    async def collect(self, directory: Path) -> ArrivalLog:
        """Every arrival logged so far, all targets merged (order: by target)."""
        merged = ArrivalLog()
        for number, process in enumerate(self.processes):
            path = directory / f"arrivals-{process.kind}-{number}.bin"
            await process.command(f"dump {path}")
            log = read_log(path)
            merged.indices.extend(log.indices)
            merged.times.extend(log.times)
            path.unlink()
        if self.nginx is not None:
            nginx_log = await self.nginx.collect()
            merged.indices.extend(nginx_log.indices)
            merged.times.extend(nginx_log.times)
        return merged


async def _start(
    kind: str, args: Sequence[str], stderr_path: Path, max_seconds: float
) -> TargetProcess:
    with stderr_path.open("ab") as stderr:
        process = await trio.lowlevel.open_process(
            [sys.executable, "-m", "bench.targets", kind, "--max-seconds", str(max_seconds), *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
        )
    target = TargetProcess(kind, process)
    try:
        with trio.fail_after(30):
            ready = await target.read_answer()
    except BaseException:
        await target.close()
        raise
    target.port = int(ready["port"])
    target.available = bool(ready["available"])
    target.reason = ready.get("reason")
    return target


def _reserve_port(*, reuse_port: bool) -> socket.socket:
    """A socket bound to a free port of 127.0.0.1, not listening (so connections to it
    are refused); with ``reuse_port`` the workers can bind the same port."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if reuse_port:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


@asynccontextmanager
async def open_targets(
    plans: Sequence[MonitorPlan], params: BenchParams, workdir: Path, *, max_seconds: float
) -> AsyncIterator[TargetSet]:
    """Start the targets ``plans`` need (url-less plans: types and behaviours), in
    ``workdir`` (their logs and files); yield them; stop them on exit.

    ``max_seconds`` bounds each target's life (they exit by themselves after it).
    """
    types = {p.type for p in plans}
    log_path = workdir / "targets.log"
    refused = _reserve_port(reuse_port=False)
    async with AsyncExitStack() as stack:
        stack.callback(refused.close)
        started: list[TargetProcess] = []

        async def stop_all() -> None:
            for process in started:
                await process.close()

        stack.push_async_callback(stop_all)
        http_port = http_slow = 0
        nginx = None
        if "http" in types:
            use_nginx = params.http_target == "nginx" or (
                params.http_target == "auto" and nginx_binary() is not None
            )
            builtin_workers = max(1, params.http_workers)
            if use_nginx:
                nginx = await stack.enter_async_context(
                    open_nginx(workdir, workers=params.http_workers)
                )
                http_port = nginx.port
                by_clock = any(
                    p.type == "http" and p.behaviour in ("slow", "flapping") for p in plans
                )
                builtin_workers = 1 if by_clock else 0  # nginx cannot answer by the clock
            if builtin_workers:
                reservation = _reserve_port(reuse_port=True)
                builtin_port = reservation.getsockname()[1]
                try:
                    for _ in range(builtin_workers):
                        arguments = ["--port", str(builtin_port)]
                        arguments += ["--slow-seconds", str(params.slow_seconds)]
                        started.append(await _start("http", arguments, log_path, max_seconds))
                finally:
                    reservation.close()
                if use_nginx:
                    http_slow = builtin_port
                else:
                    http_port = builtin_port
        tcp_port = 0
        tcp_ok = [p.index for p in plans if p.type == "tcp" and p.behaviour == "ok"]
        for number, first in enumerate(range(0, len(tcp_ok), _TCP_LISTENERS_PER_PROCESS)):
            chunk = tcp_ok[first : first + _TCP_LISTENERS_PER_PROCESS]
            path = workdir / f"tcp-addresses-{number}.json"
            path.write_text(json.dumps([[tcp_address(i), i] for i in chunk]))
            arguments = ["--addresses", str(path), "--port", str(tcp_port)]
            tcp = await _start("tcp", arguments, log_path, max_seconds)
            started.append(tcp)
            tcp_port = tcp.port  # the first picks the port, the others take the same
        if not tcp_ok and "tcp" in types:  # only refused ones: any port nobody listens on
            tcp_port = refused.getsockname()[1]
        # Always: the service is given our nameserver, dns monitors or not.
        dns = await _start(
            "dns", ["--slow-seconds", str(params.slow_seconds)], log_path, max_seconds
        )
        started.append(dns)
        dns_port = dns.port
        ping_available = True
        notes: list[str] = []
        ping_indices = [p.index for p in plans if p.type == "ping"]
        ping_base = pick_ping_base(len(plans))
        if ping_indices:
            path = workdir / "ping-addresses.json"
            pairs = [[ping_address(i, ping_base), i] for i in ping_indices]
            path.write_text(json.dumps(pairs))
            ping = await _start("ping", ["--addresses", str(path)], log_path, max_seconds)
            started.append(ping)
            ping_available = ping.available
            if not ping.available:
                notes.append(f"ping arrivals not observable: {ping.reason}")
        ports = TargetPorts(
            http=http_port,
            refused=refused.getsockname()[1],
            tcp=tcp_port,
            dns=dns_port,
            http_slow=http_slow,
            ping_base=ping_base,
        )
        yield TargetSet(
            ports=ports,
            processes=started,
            nginx=nginx,
            ping_available=ping_available,
            notes=notes,
        )
