"""Helpers shared by the API tests: object factories, error assertions, direct SQL, the
command line of a live ``uptrio serve``.

Direct SQL is used only to arrange what the API cannot arrange within one test second
(old ``created``/``updated`` values, a monitor already ``up``); every behaviour under test
goes through the real app.
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import trio
from hypercorn.config import Config as HypercornConfig
from hypercorn.trio import serve as hypercorn_serve
from quart_trio import QuartTrio

from store import Database
from tests.api import Api
from web.api.common import ErrorResponse
from web.api.incidents import IncidentObject
from web.api.monitors import MonitorObject
from web.http.errors import CODES

ROOT = Path(__file__).resolve().parents[2]
"""The repository: the working directory and ``PYTHONPATH`` of a live service."""

CLI = [sys.executable, "-m", "web.process.cli"]
"""``uptrio`` as a subprocess runs it, without relying on the installed script."""


def serve_command(data_dir: Path, *extra: str) -> list[str]:
    """``uptrio serve --no-engine`` on 127.0.0.1, a port the OS picks (it prints
    ``listening on http://127.0.0.1:<port>``), its embedded Postgres in ``data_dir``, a
    2 s shutdown; ``extra`` flags go after ``serve``'s own."""
    return [
        *CLI,
        "serve",
        "--no-engine",
        "--host",
        "127.0.0.1",
        "--port",
        "0",
        "--data-dir",
        str(data_dir),
        "--shutdown-seconds",
        "2",
        *extra,
    ]


def service_env() -> dict[str, str]:
    """This environment without the ``UPTRIO_*`` settings that would point a live
    service elsewhere, with the repository on ``PYTHONPATH``."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("UPTRIO_DATABASE_URL", "UPTRIO_JWT_SECRET", "UPTRIO_DATA_DIR")
    }
    env["PYTHONPATH"] = str(ROOT)
    return env


HTTP_MONITOR: dict[str, Any] = {"name": "web", "url": "https://example.com/", "type": "http"}
VALID_URLS = {
    "http": "https://example.com/health",
    "tcp": "db.example.com:5432",
    "dns": "example.com",
    "ping": "192.0.2.10",
}

ANY = object()
"""Sentinel: do not check this part of an error."""


def assert_error(
    response: tuple[int, Any, Any],
    status: int,
    code: str,
    *,
    param: Any = ANY,
    type: str | None = None,
) -> dict[str, Any]:
    """Check an error response: status, the ErrorResponse shape, exactly the five fields,
    the code (and its listed status), the type, ``param`` and the Request-Id echo.
    Returns the error object."""
    got_status, body, headers = response
    assert got_status == status, body
    assert body is not None, "an error response has a body"
    ErrorResponse.model_validate(body)
    error = body["error"]
    assert set(body) == {"error"}
    assert set(error) == {"type", "code", "message", "param", "request_id"}
    assert error["code"] == code, error
    assert CODES[code][0] == status
    expected_type = type or {
        401: "authentication_error",
        403: "permission_error",
        500: "api_error",
    }.get(status, "invalid_request_error")
    assert error["type"] == expected_type, error
    if param is not ANY:
        assert error["param"] == param, error
    assert error["message"]
    assert error["request_id"] == headers["Request-Id"]
    return error


async def create_monitor(api: Api, **fields: Any) -> dict[str, Any]:
    """POST /monitors (an http monitor unless ``fields`` say otherwise); asserts 201."""
    status, body, _ = await api.post("/monitors", json={**HTTP_MONITOR, **fields})
    assert status == 201, body
    MonitorObject.model_validate(body)
    return body  # type: ignore[no-any-return]


async def create_incident(api: Api, **fields: Any) -> dict[str, Any]:
    """POST /incidents; asserts 201."""
    status, body, _ = await api.post("/incidents", json={"title": "outage", **fields})
    assert status == 201, body
    IncidentObject.model_validate(body)
    return body  # type: ignore[no-any-return]


async def _execute(connection: Any, query: str, *args: Any) -> None:
    await connection.execute(query, *args)


async def sql(db: Database, query: str, *args: Any) -> None:
    """Run one SQL statement on the test database (arrangement only)."""
    await db.run(_execute, query, *args)


async def set_times(
    db: Database, table: str, object_id: str, *, created: int, updated: int
) -> None:
    """Backdate an object's ``created`` and ``updated`` (epoch seconds)."""
    await sql(
        db,
        f"UPDATE {table} SET created = $2, updated = $3 WHERE id = $1",
        object_id,
        created,
        updated,
    )


def expect(response: tuple[int, Any, Any], status: int = 200) -> Any:
    """The body of ``response`` after checking its status."""
    got_status, body, _ = response
    assert got_status == status, body
    return body


Response = tuple[int, dict[str, str], bytes]
"""``(status, headers (lowercase names), body)`` of a raw HTTP/1.1 response."""


async def read_response(stream: trio.SocketStream, buffer: bytearray) -> Response:
    """One HTTP/1.1 response with a Content-Length body; ``buffer`` keeps what follows."""
    while b"\r\n\r\n" not in buffer:
        chunk = await stream.receive_some(65536)
        assert chunk, f"closed before a response: {bytes(buffer)!r}"
        buffer += chunk
    head, _, rest = bytes(buffer).partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
    length = int(headers.get("content-length", "0"))
    while len(rest) < length:
        chunk = await stream.receive_some(65536)
        assert chunk, "closed inside the body"
        rest += chunk
    buffer[:] = rest[length:]
    return status, headers, rest[:length]


async def closed_by_server(stream: trio.SocketStream) -> bool:
    """True when the server closes the connection within 5 s (a reset counts)."""
    with trio.move_on_after(5):
        try:
            while await stream.receive_some(65536):
                pass
        except trio.BrokenResourceError:
            pass
        return True
    return False


@asynccontextmanager
async def serve_live(app: QuartTrio) -> AsyncIterator[str]:
    """``app`` served by Hypercorn's trio worker on 127.0.0.1, port chosen by the OS, as
    ``uptrio serve`` serves it; yields its base URL (``http://127.0.0.1:<port>``) and
    stops it on exit."""
    config = HypercornConfig()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = None
    config.errorlog = None
    config.graceful_timeout = 1
    async with trio.open_nursery() as nursery:
        binds = await nursery.start(partial(hypercorn_serve, app, config))
        yield binds[0]
        nursery.cancel_scope.cancel()
