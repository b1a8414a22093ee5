"""The public ping endpoints of heartbeats (docs/heartbeats.md, The ping endpoints):
``GET``, ``HEAD`` or ``POST`` ``/ping/<key>`` (a success), ``/ping/<key>/fail`` and
``/ping/<key>/start``.

No authentication: the key is the secret (128 random bits). They are plain Quart routes
beside the API, like the status pages' (:mod:`web.public.status_pages`): outside
``/openapi.json`` and outside the API's middlewares (no token, so no per-token limits,
no version negotiation, no idempotency keys). Every answer carries ``Request-Id`` and
``Service-Version`` as all do (:mod:`web.http.app`).

A ping costs no database round trip on its way (docs/heartbeats.md, No database round trip
on a ping, and no ping lost): the key is looked up in the engine's memory (the engine's
``ping`` verb, ``engine.EngineHandle.ping``), the ping is handed to the heartbeat's actor,
and the 200 goes once the actor has handed the ping (and the move it caused) to the store
actor, whose buffer writes it within ``--batch-age-ms`` and keeps it through a database
outage (docs/heartbeats.md, same section: the durability choice).

A ping of a heartbeat this node does not run (another node holds its bucket:
docs/several-nodes.md, Pings on any node) is found in the database instead (the key's
heartbeat id is then kept in memory, at most :data:`_REMOTE_KEYS` of them), stored in a
transaction of its own that also tells the owner (``store.notify.store_ping_elsewhere``: the
owner's actor moves the deadline and decides the status move), and answered once committed;
a heartbeat deleted meanwhile is 404, and a database that does not answer 500
(``ping_not_recorded``). The per-key rate limit is this node's.

Answers:

- 200 ``OK`` (``text/plain``): recorded. The body of a POST is read and ignored.
- 404 ``resource_missing`` (``param`` ``key``): no heartbeat has this key (or it is
  malformed); nothing is counted for it.
- 429 ``rate_limited`` with ``Retry-After``: this key sent more than
  ``--pings-per-minute`` (default 60) pings in a rolling minute; other keys are not
  affected (:mod:`web.http.limits.rolling`, one window per key).
- 500 ``ping_not_recorded``: the heartbeat's actor did not take the ping in time (the
  engine restarts, is overloaded, or does not run: ``--no-engine``); retry.
"""

from __future__ import annotations

import json
import re
import time

from quart import Response, g, request
from quart_trio import QuartTrio

from engine import ActorUnavailable
from store import PingRecord, StoreError, heartbeats, new_id, notify

from ..http.deps import Dependencies
from ..http.errors import ApiError, error_body
from ..http.limits.rolling import Window
from ..http.limits.throttle import MINUTE_SECONDS, rate_limit_headers

__all__ = ["add_ping_routes"]

_KEY = re.compile(r"[0-9a-f]{32}")
_OK = b"OK\n"
_REMOTE_KEYS = 10_000
"""Ping keys of other nodes' heartbeats kept in memory (key to heartbeat id); past it
the map starts afresh."""


def _error(error: ApiError, headers: dict[str, str] | None = None) -> Response:
    body = json.dumps(error_body(error, g.request_id), separators=(",", ":"))
    return Response(body, status=error.status, headers=headers, content_type="application/json")


def add_ping_routes(app: QuartTrio, deps: Dependencies) -> None:
    """Add ``/ping/<key>``, ``/ping/<key>/fail`` and ``/ping/<key>/start`` to ``app``
    (module docstring)."""
    window = Window("ping/minute", deps.settings.pings_per_minute, MINUTE_SECONDS)
    missing = ApiError("resource_missing", "no heartbeat has this ping key", param="key")
    not_recorded = ApiError("ping_not_recorded", "the ping was not recorded; retry in a moment")
    remote: dict[str, str] = {}  # ping key to heartbeat id, of heartbeats run elsewhere

    async def elsewhere(key: str, kind: str) -> Response:
        """A ping of a heartbeat another node runs (module docstring)."""
        try:
            heartbeat_id = remote.get(key)
            if heartbeat_id is None:
                heartbeat_id = await deps.db.run(heartbeats.heartbeat_of_ping_key, key)
                if heartbeat_id is None:
                    return _error(missing)
                if len(remote) >= _REMOTE_KEYS:
                    remote.clear()
                remote[key] = heartbeat_id
            if (limited := admit(key)) is not None:
                return limited
            wall = time.time()
            ping = PingRecord(
                id=new_id("png"),
                heartbeat_id=heartbeat_id,
                kind=kind,
                created=int(wall),
                duration_ms=None,
                source_ip=request.remote_addr,
            )
            if not await deps.db.transaction(notify.store_ping_elsewhere, ping, wall):
                remote.pop(key, None)
                return _error(missing)
        except StoreError:
            return _error(not_recorded)
        return Response(_OK, status=200, content_type="text/plain; charset=utf-8")

    def admit(key: str) -> Response | None:
        """None when ``key`` may ping now, else the 429."""
        decision = deps.rate_limiter.local.admit([(window, key)])  # per node
        if not decision.allowed:
            headers = rate_limit_headers(decision, deps.clock())
            retry_after = headers["Retry-After"]
            return _error(
                ApiError(
                    "rate_limited",
                    f"too many pings: a key may send {decision.limit} a minute; "
                    f"retry after {retry_after} s",
                ),
                headers,
            )
        return None

    async def record(key: str, kind: str) -> Response:
        if request.method == "POST":
            await request.get_data(cache=False)  # a job's output, perhaps: not kept
        if _KEY.fullmatch(key) is None:
            return _error(missing)
        try:
            heartbeat = await deps.ping(key)
        except ActorUnavailable:
            return _error(not_recorded)
        if heartbeat is None:
            return await elsewhere(key, kind)
        if (limited := admit(key)) is not None:
            return limited
        if not await heartbeat.ping(kind, request.remote_addr):
            return _error(not_recorded)
        return Response(_OK, status=200, content_type="text/plain; charset=utf-8")

    methods = ["GET", "HEAD", "POST"]

    @app.route("/ping/<key>", methods=methods, provide_automatic_options=False)
    async def ping_success(key: str) -> Response:
        return await record(key, "success")

    @app.route("/ping/<key>/fail", methods=methods, provide_automatic_options=False)
    async def ping_fail(key: str) -> Response:
        return await record(key, "fail")

    @app.route("/ping/<key>/start", methods=methods, provide_automatic_options=False)
    async def ping_start(key: str) -> Response:
        return await record(key, "start")
