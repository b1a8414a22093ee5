"""Operational endpoints, and the log line and metrics of every request (docs/operations.md,
Metrics and health, Logs).

Three endpoints live beside the API, **outside the API** (docs/operations.md, Metrics and
health): no authentication, no rate limit, no idempotency, not in ``/openapi.json``, and no
``/v1``-style versioning. They are plain Quart routes, not pipeline routes, so none of the
API's middlewares runs for them:

``GET /healthz``
    200 ``{"status": "ok"}`` whenever the process answers (liveness).
``GET /readyz``
    Readiness: the database answers within ``readiness_timeout_seconds`` (0.9 s, so that
    ``/readyz`` itself answers within 1 s whatever the database does), its schema
    is at ``store.LATEST_VERSION`` (every migration applied), and the engine runs (or
    none is configured). 200 ``{"status": "ready", "not_ready": [], "checks": {...}}``,
    else 503 with ``"status": "not_ready"`` and ``not_ready`` naming what is not
    (``database``, ``migrations``, ``engine``); ``checks`` holds each one's state
    (``database``: ok | unavailable; ``migrations``: ok | unknown | which version;
    ``engine``: running | starting | disabled). No error detail beyond that: the reason
    is in the service's log.
``GET /metrics``
    The service's :class:`web.process.metrics.Metrics` in Prometheus text format.

Every request, operational ones included, is logged once when answered (``request``
event: ``request_id``, ``method``, ``route`` (the URL rule, say ``/monitors/<id>``, or
``unmatched``), ``status``, ``duration_ms``) and counted in ``uptrio_http_requests_total``
and ``uptrio_http_request_duration_seconds``. Rule (``web.process.logs``): no header, body, query
string, token or metadata value is logged.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import structlog
import trio
from quart import Response
from quart_trio import QuartTrio

from store import LATEST_VERSION, StoreError, schema_version

from ..http.deps import Dependencies
from .metrics import CONTENT_TYPE, Metrics

__all__ = ["Operations", "add_operational_routes"]

log = structlog.get_logger("uptrio.web")


def _no_engine() -> str:
    return "disabled"


@dataclass(frozen=True, slots=True, kw_only=True)
class Operations:
    """What the operational endpoints read.

    Attributes:
        metrics: the service's metrics (a fresh set for an app made without one).
        engine_state: ``"running"``, ``"starting"`` (between two incarnations of the
            engine, or not started yet) or ``"disabled"`` (no engine configured).
        buckets_state: ``"ok"`` once this node holds its share of the buckets or knows
            there is none left to claim (docs/several-nodes.md, Operations), ``"claiming"``
            before, ``"disabled"`` without an engine.
        readiness_timeout_seconds: how long ``/readyz`` waits for the database, seconds
            (docs/operations.md, A database outage: a database that hangs is given up
            on at once, its connection terminated; see ``store.bridge``).
    """

    metrics: Metrics = field(default_factory=Metrics)
    engine_state: Callable[[], str] = _no_engine
    buckets_state: Callable[[], str] = _no_engine
    readiness_timeout_seconds: float = 0.9

    def request_finished(
        self, *, request_id: str | None, method: str, route: str, status: int, seconds: float
    ) -> None:
        """Log one answered request and count it (``seconds`` of handling)."""
        self.metrics.request_finished(route, status, seconds)
        log.info(
            "request",
            request_id=request_id,
            method=method,
            route=route,
            status=status,
            duration_ms=round(seconds * 1000, 3),
        )


def _json(status: int, body: object) -> Response:
    return Response(
        json.dumps(body, separators=(",", ":")),
        status=status,
        content_type="application/json",
        headers={"Cache-Control": "no-store"},
    )


async def readiness(deps: Dependencies, ops: Operations) -> tuple[bool, dict[str, object]]:
    """``(ready, body)`` for ``/readyz`` (see the module docstring)."""
    checks: dict[str, str] = {}
    version: int | None = None
    with trio.move_on_after(ops.readiness_timeout_seconds) as waited:
        try:
            version = await deps.db.run(schema_version)
            checks["database"] = "ok"
        except StoreError as exc:
            checks["database"] = "unavailable"
            log.warning("readiness: database unavailable", error=str(exc))
    if waited.cancelled_caught:
        checks["database"] = "unavailable"
        log.warning("readiness: no answer from the database", seconds=ops.readiness_timeout_seconds)
    if checks["database"] != "ok":
        checks["migrations"] = "unknown"
    elif version == LATEST_VERSION:
        checks["migrations"] = "ok"
    else:
        checks["migrations"] = f"schema at {version}, code needs {LATEST_VERSION}"
    state = ops.engine_state()
    checks["engine"] = state
    checks["buckets"] = ops.buckets_state()
    # "unknown" migrations (the database did not answer) are not named twice
    fine = ("ok", "running", "disabled", "unknown")
    not_ready = [name for name, value in checks.items() if value not in fine]
    body: dict[str, object] = {
        "status": "not_ready" if not_ready else "ready",
        "not_ready": not_ready,
        "checks": checks,
    }
    return not not_ready, body


def add_operational_routes(app: QuartTrio, deps: Dependencies, ops: Operations) -> None:
    """Add ``/healthz``, ``/readyz`` and ``/metrics`` to ``app`` (no auth; outside the
    API)."""

    @app.route("/healthz", methods=["GET"], provide_automatic_options=False)
    async def healthz() -> Response:
        return _json(200, {"status": "ok"})

    @app.route("/readyz", methods=["GET"], provide_automatic_options=False)
    async def readyz() -> Response:
        ready, body = await readiness(deps, ops)
        return _json(200 if ready else 503, body)

    @app.route("/metrics", methods=["GET"], provide_automatic_options=False)
    async def metrics() -> Response:
        started = time.perf_counter()
        payload = ops.metrics.render()
        if time.perf_counter() - started > 0.05:
            log.info(
                "slow metrics scrape", duration_ms=round((time.perf_counter() - started) * 1000)
            )
        return Response(payload, status=200, content_type=CONTENT_TYPE)
