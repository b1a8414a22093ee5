"""nginx as the http target (``--http-target nginx``, or ``auto`` when it is installed).

nginx answers ``/m/<i>/o`` with 200 and ``/m/<i>/f`` with 500 from its own workers
(``--http-workers`` of them, ``reuseport``), and logs every request as ``$msec
$request_time $uri``. The arrival of a probe is ``$msec - $request_time``: nginx's
clock has a resolution of 1 ms (it is the cached time of the worker's event loop), which
is coarser than the built-in workers' microseconds. Slow targets (``/m/<i>/s``) are not
nginx's: the plan points them at a built-in worker.

The master runs in the foreground (``daemon off``) as a child of the bench, with its
configuration, pid file, logs and temporary directories under ``<workdir>/nginx``; it is
stopped with SIGTERM, then killed after 5 s.
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import trio

from .process import stop_process
from .servers import ArrivalLog

__all__ = ["NginxTarget", "open_nginx", "parse_access_log"]

_CONFIG = """\
worker_processes {workers};
daemon off;
master_process on;
pid {root}/nginx.pid;
error_log {root}/error.log warn;
worker_rlimit_nofile 16384;
events {{
    worker_connections 8192;
    use epoll;
    multi_accept on;
}}
http {{
    log_format bench '$msec $request_time $uri';
    access_log {root}/access.log bench;
    client_body_temp_path {root}/tmp/body;
    proxy_temp_path {root}/tmp/proxy;
    fastcgi_temp_path {root}/tmp/fastcgi;
    uwsgi_temp_path {root}/tmp/uwsgi;
    scgi_temp_path {root}/tmp/scgi;
    keepalive_timeout 0;
    server_tokens off;
    server {{
        listen 127.0.0.1:{port} reuseport backlog=4096;
        default_type text/plain;
        location ~ "^/m/[0-9]+/o$" {{ return 200 "ok\\n"; }}
        location ~ "^/m/[0-9]+/f$" {{ return 500 "error\\n"; }}
        location / {{ return 404 "unknown\\n"; }}
    }}
}}
"""


def parse_access_log(text: str) -> ArrivalLog:
    """Arrivals of an access log in the ``bench`` format (module docstring)."""
    log = ArrivalLog()
    for line in text.splitlines():
        parts = line.split(" ")
        if len(parts) != 3 or not parts[2].startswith("/m/"):
            continue
        segments = parts[2].split("/")
        if len(segments) < 4 or not segments[2].isdigit():
            continue
        log.add(int(segments[2]), float(parts[0]) - float(parts[1]))
    return log


class NginxTarget:
    """A running nginx: its port, master process and access log."""

    def __init__(self, process: trio.Process, port: int, root: Path) -> None:
        self.process = process
        self.port = port
        self.root = root

    @property
    def pid(self) -> int:
        """The master's pid (its workers are its children)."""
        return self.process.pid

    async def collect(self) -> ArrivalLog:
        """Every request logged so far (the log is written unbuffered)."""
        return parse_access_log(await trio.Path(self.root / "access.log").read_text())


def nginx_binary() -> str | None:
    """The nginx executable, or None."""
    return shutil.which("nginx") or (
        "/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None
    )


def nginx_version() -> str | None:
    """``nginx -v`` (it prints to stderr), or None when absent."""
    binary = nginx_binary()
    if binary is None:
        return None
    done = subprocess.run([binary, "-v"], capture_output=True, text=True, check=False)
    return (done.stderr or done.stdout).strip().removeprefix("nginx version: ") or None


@asynccontextmanager
async def open_nginx(workdir: Path, *, workers: int) -> AsyncIterator[NginxTarget]:
    """Start nginx on a free port of 127.0.0.1; yield it once it accepts connections.

    Raises:
        RuntimeError: nginx is not installed or did not start within 10 s.
    """
    binary = nginx_binary()
    if binary is None:
        raise RuntimeError("nginx is not installed")
    root = (workdir / "nginx").resolve()
    (root / "tmp").mkdir(parents=True, exist_ok=True)
    reservation = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    reservation.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    reservation.bind(("127.0.0.1", 0))
    port = reservation.getsockname()[1]
    config = root / "nginx.conf"
    config.write_text(_CONFIG.format(workers=max(1, workers), root=root, port=port))
    with (root / "stderr.log").open("wb") as stderr:
        process = await trio.lowlevel.open_process(
            [binary, "-p", str(root), "-c", str(config)],
            stdin=subprocess.DEVNULL,
            stdout=stderr,
            stderr=stderr,
        )
    try:
        with trio.fail_after(10):
            while True:
                if process.poll() is not None:
                    raise RuntimeError(f"nginx exited; see {root / 'stderr.log'}")
                try:
                    stream = await trio.open_tcp_stream("127.0.0.1", port)
                except OSError:
                    await trio.sleep(0.05)
                    continue
                await stream.aclose()
                break
        reservation.close()
        yield NginxTarget(process, port, root)
    finally:
        reservation.close()
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
        await stop_process(process, grace_seconds=5.0)
