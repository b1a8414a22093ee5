"""The admin interface: a Unix socket in the data directory, mode 0600, speaking JSON
lines (docs/operations.md, The supervision tree).

Who may use it: whoever may open ``<data-dir>/admin.sock``, that is the service's own
user (the socket is created 0600, through a private name renamed into place, so it is
never reachable with looser permissions). Nothing of it is on the HTTP side: the API has
no admin route, so no API token, whatever its permissions, reaches it; and the socket
reads no token (a request carrying one is refused as having an unknown field).

Protocol: one request per line, a JSON object; one reply per request, a JSON object on
one line; the connection stays open for further requests::

    > {"command": "list"}
    < {"ok": true, "supervisors": [{"name": "root", "state": "running", "children": 3,
       "restarts_in_period": 0, "total_restarts": 0, "last_failure": null}, ...],
       "children": [{"supervisor": "root", "child": "store", "state": "running",
       "restarts": 0, "last_failure": null}, ...]}
    > {"command": "restart", "name": "engine"}
    < {"ok": true, "restarted": "engine", "seconds": 0.84}
    < {"ok": false, "error": {"code": "unknown_supervisor", "message": "..."}}

Error codes: ``invalid_json`` (not a JSON object), ``invalid_request`` (unknown command
or field, missing name), ``unknown_supervisor``, ``internal_error`` (logged). A line
longer than :data:`MAX_LINE_BYTES` closes the connection.

Client side: :func:`admin_request` (``uptrio supervisors list|restart``), raising
:class:`AdminUnavailable` when no service listens.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import socket
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import structlog
import trio

if TYPE_CHECKING:  # annotations only: ``uptrio supervisors`` imports no engine
    from engine import ChildInfo, SupervisorStatistics

__all__ = [
    "MAX_LINE_BYTES",
    "SOCKET_NAME",
    "AdminUnavailable",
    "Supervised",
    "UnknownSupervisor",
    "admin_request",
    "admin_socket_path",
    "check_admin_socket_free",
    "serve_admin",
]

log = structlog.get_logger("uptrio.admin")

SOCKET_NAME = "admin.sock"
MAX_LINE_BYTES = 64 * 1024
_MAX_PATH_BYTES = 100  # sockaddr_un holds 108 bytes on Linux, 104 on macOS


class UnknownSupervisor(LookupError):
    """``RunningService.restart`` was given a name that is no supervisor (nor child of
    the root) of this service."""


class Supervised(Protocol):
    """What the admin interface drives: ``web.process.service.RunningService``."""

    def supervisors(self) -> list[SupervisorStatistics]:
        """Statistics of every supervisor."""
        ...

    def root_children(self) -> list[ChildInfo]:
        """The root's children and their states."""
        ...

    async def restart(self, name: str) -> None:
        """Restart supervisor or root child ``name``.

        Raises:
            UnknownSupervisor: no such supervisor or child.
        """
        ...


class AdminUnavailable(Exception):
    """No service answers on the admin socket (none runs with this data directory)."""


def admin_socket_path(data_dir: Path) -> Path:
    """Where the service of ``data_dir`` listens: ``<data-dir>/admin.sock``."""
    return data_dir / SOCKET_NAME


async def _connect(path: Path) -> trio.SocketStream:
    try:
        return await trio.open_unix_socket(str(path))
    except (FileNotFoundError, ConnectionRefusedError) as exc:
        raise AdminUnavailable(
            f"no Uptrio service is running with this data directory (nothing answers on {path})"
        ) from exc


async def check_admin_socket_free(path: Path) -> None:
    """Before a service starts: remove a stale socket left by a process that died.

    Raises:
        RuntimeError: a live service already answers on ``path``.
    """
    try:
        stream = await _connect(path)
    except AdminUnavailable:
        _remove(path, inode=None)
        return
    await stream.aclose()
    raise RuntimeError(f"another Uptrio service is running with this data directory ({path})")


async def serve_admin(
    path: Path,
    service: Supervised,
    *,
    task_status: trio.TaskStatus[Path] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Listen on ``path`` (mode 0600) until cancelled, then remove it; reports the path.

    Raises:
        ValueError: ``path`` is too long for a Unix socket (about 100 bytes).
        OSError: the socket could not be created.
    """
    if len(os.fsencode(path)) > _MAX_PATH_BYTES:
        raise ValueError(f"the admin socket path is too long for a Unix socket: {path}")
    private = path.with_name(f".{SOCKET_NAME}.{os.getpid()}.{secrets.token_hex(4)}")
    sock = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        await sock.bind(str(private))
        inode = _publish(private, path)
        sock.listen(16)
    except BaseException:
        sock.close()
        _remove(private, inode=None)
        raise
    listener = trio.SocketListener(sock)
    try:
        task_status.started(path)
        await trio.serve_listeners(partial(_serve_connection, service=service), [listener])
    finally:
        _remove(path, inode=inode)
        with trio.CancelScope(shield=True):
            await listener.aclose()


def _publish(private: Path, path: Path) -> int:
    """Make the socket bound at ``private`` owner-only, then rename it to ``path`` (so
    it never appears there with looser permissions); return its inode."""
    os.chmod(private, 0o600)
    os.replace(private, path)
    return path.stat().st_ino


def _remove(path: Path, *, inode: int | None) -> None:
    """Remove ``path`` if it exists (and, given ``inode``, is still that socket)."""
    with contextlib.suppress(OSError):
        if inode is None or path.stat().st_ino == inode:
            path.unlink()


async def _serve_connection(stream: trio.SocketStream, *, service: Supervised) -> None:
    async with stream:
        buffer = bytearray()
        while True:
            newline = buffer.find(b"\n")
            if newline < 0:
                if len(buffer) > MAX_LINE_BYTES:
                    return
                try:
                    chunk = await stream.receive_some(65536)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    return
                if not chunk:
                    return
                buffer += chunk
                continue
            line = bytes(buffer[:newline])
            del buffer[: newline + 1]
            reply = await _answer(line, service)
            try:
                await stream.send_all(json.dumps(reply).encode() + b"\n")
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return


def _error(code: str, message: str) -> dict[str, Any]:
    return {"ok": False, "error": {"code": code, "message": message}}


async def _answer(line: bytes, service: Supervised) -> dict[str, Any]:
    try:
        request = json.loads(line)
    except ValueError:
        return _error("invalid_json", "each request is one JSON object on one line")
    if not isinstance(request, dict):
        return _error("invalid_json", "each request is one JSON object on one line")
    command = request.get("command")
    allowed = {"list": {"command"}, "restart": {"command", "name"}}.get(str(command))
    if allowed is None:
        return _error("invalid_request", "command must be 'list' or 'restart'")
    unknown = sorted(set(request) - allowed)
    if unknown:
        return _error("invalid_request", f"unknown field(s): {', '.join(unknown)}")
    try:
        if command == "list":
            return _listing(service)
        name = request.get("name")
        if not isinstance(name, str) or not name:
            return _error("invalid_request", "restart needs a supervisor name")
        began = trio.current_time()
        log.info("operator restart requested", supervisor=name)
        await service.restart(name)
        return {"ok": True, "restarted": name, "seconds": round(trio.current_time() - began, 3)}
    except UnknownSupervisor as exc:
        return _error("unknown_supervisor", str(exc))
    except Exception as exc:
        log.exception("admin request failed", command=command)
        return _error("internal_error", f"{exc.__class__.__name__}: {exc}")


def _listing(service: Supervised) -> dict[str, Any]:
    supervisors = [
        {
            "name": s.name,
            "state": s.state,
            "children": s.children,
            "restarts_in_period": s.restarts_in_period,
            "total_restarts": s.total_restarts,
            "last_failure": s.last_failure,
        }
        for s in service.supervisors()
    ]
    children = [
        {
            "supervisor": "root",
            "child": c.child_id,
            "state": c.state,
            "restarts": c.restarts,
            "last_failure": c.last_failure,
        }
        for c in service.root_children()
    ]
    return {"ok": True, "supervisors": supervisors, "children": children}


async def admin_request(
    path: Path, request: dict[str, Any], *, timeout_seconds: float = 120.0
) -> dict[str, Any]:
    """Send one request to the service listening on ``path`` and return its reply.

    Raises:
        AdminUnavailable: no service listens on ``path``, or it closed the connection.
        TimeoutError: no reply within ``timeout_seconds`` seconds.
    """
    with trio.fail_after(timeout_seconds):
        stream = await _connect(path)
        async with stream:
            await stream.send_all(json.dumps(request).encode() + b"\n")
            buffer = bytearray()
            while b"\n" not in buffer:
                chunk = await stream.receive_some(65536)
                if not chunk:
                    raise AdminUnavailable("the service closed the admin connection")
                buffer += chunk
    reply: dict[str, Any] = json.loads(buffer[: buffer.index(b"\n")])
    return reply
