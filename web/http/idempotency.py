"""Idempotency keys on POST requests (docs/api.md, Idempotency keys): a retry replays the
first response.

A POST may carry ``Idempotency-Key``. The key is scoped to the account; the request is
identified by its *fingerprint*: SHA-256 of the method, the path and the body as canonical
JSON (keys sorted, no whitespace), so key order and spacing do not matter. Rules:

- first use: the request runs; a 2xx response is stored with the key;
- same key, same fingerprint, within :attr:`WebSettings.idempotency_retention_seconds`
  (24 hours): the stored status and body again, with ``Idempotent-Replayed: true`` and a
  new ``Request-Id``; nothing runs, and the engine is not told again;
- same key, another fingerprint: 409 ``idempotency_key_reused``;
- same key while the first request is still running: 409 ``idempotency_key_in_use`` with
  ``Retry-After: 1``;
- a 4xx or 5xx response is not stored: a corrected retry with the same key runs;
- an expired key runs anew (:func:`run_idempotency_purge` deletes old keys every hour,
  but a key older than the retention is ignored whether purged yet or not);
- a key that is empty, longer than 255 characters or holds control characters is a 400
  ``idempotency_key_invalid``. A UUID v4 is recommended; any other text is accepted, in
  UTF-8 or Latin-1 (:func:`parse_key`). The header is ignored on GET, PATCH and DELETE.

Atomicity (why a crash leaves either nothing or the whole result). The middleware opens
one database transaction (:meth:`store.Database.open_transaction`) and, for the length of
the request, hands the handler a copy of :class:`Dependencies` whose ``db`` is that
transaction. In it, in order:

1. the key is claimed with a transaction-scoped advisory lock taken without waiting
   (:func:`store.idempotency.claim_key`); a held lock means another request with this
   key is running (409 ``idempotency_key_in_use``); a stored row means replay or reuse;
2. the handler runs unchanged: its ``db.transaction(...)`` calls become savepoints of the
   one transaction;
3. on a 2xx the response is inserted into ``idempotency_keys``;
4. commit: the handler's write, the key and the response become visible together, and
   the lock is released. On any error, cancellation or a non-2xx response everything
   rolls back, the lock included.

A process crash at any point before the commit leaves nothing (Postgres rolls back and
drops the lock with the session); after it, the whole result. The price is one pooled
connection held for the handler's duration, for keyed POSTs only.

The engine must learn of a change only once it is committed and only once. So the copy of
:class:`Dependencies` also carries a :class:`DeferredApply` that records the handler's calls
of the engine's verb (``apply``); they are made on the real verb after the commit. A replay
runs no handler, so the engine is not told again. If the engine then fails to acknowledge
(500 ``engine_unavailable``), the stored 2xx stays: the change is committed, the engine
applies the stored state when it recovers, and a retry replays the 2xx.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from collections.abc import Callable
from typing import Any

import structlog
import trio

from engine import Apply
from store import Database, StoreError, idempotency

from .errors import ApiError
from .json_body import parse_json
from .pipeline import ApiResponse, Handler, RequestContext

__all__ = [
    "HEADER",
    "MAX_KEY_LENGTH",
    "REPLAYED_HEADER",
    "DeferredApply",
    "idempotency_keys",
    "parse_key",
    "request_fingerprint",
    "run_idempotency_purge",
]

log = structlog.get_logger("uptrio.web")

HEADER = "Idempotency-Key"
REPLAYED_HEADER = "Idempotent-Replayed"
MAX_KEY_LENGTH = 255
"""Longest key accepted, in characters (docs/api.md, Idempotency keys)."""

IN_USE_RETRY_AFTER_SECONDS = 1
"""``Retry-After`` of a 409 ``idempotency_key_in_use``, in seconds."""


def parse_key(raw: str) -> str:
    """Validate an ``Idempotency-Key`` header value and return the key.

    Header values arrive as the server decoded them, byte for byte as Latin-1. The bytes are
    read as UTF-8 when they are UTF-8 (``ключ``, as curl or any UTF-8 client sends it), else
    as Latin-1 (obs-text, RFC 9110, 5.5: a browser's ``é``), so that "any printable text"
    (docs/api.md, Idempotency keys) holds whatever the client's encoding; the
    control-character rule is then judged on the text, not on the bytes of a UTF-8 sequence
    (``ключ`` holds bytes 0x80-0x9F, C1 control characters if read byte by byte). The same
    bytes always give the same key.

    Raises:
        ApiError: 400 ``idempotency_key_invalid`` when it is empty (or only spaces),
            longer than :data:`MAX_KEY_LENGTH` characters, or holds a control character
            (U+0000-U+001F, U+007F-U+009F).
    """
    try:
        key = raw.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        key = raw
    if not key.strip():
        raise ApiError("idempotency_key_invalid", f"{HEADER} must not be empty", param=HEADER)
    if len(key) > MAX_KEY_LENGTH:
        raise ApiError(
            "idempotency_key_invalid",
            f"{HEADER} may be at most {MAX_KEY_LENGTH} characters; got {len(key)}",
            param=HEADER,
        )
    if any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in key):
        raise ApiError(
            "idempotency_key_invalid", f"{HEADER} may not hold control characters", param=HEADER
        )
    return key


def request_fingerprint(method: str, path: str, body: bytes) -> str:
    """SHA-256 (hex) of ``method``, ``path`` and the body as canonical JSON (keys sorted,
    no whitespace, non-ASCII escaped). A body that is not JSON is taken byte for byte
    (such a request fails with a 400 and is never stored anyway)."""
    try:
        canonical = json.dumps(
            parse_json(body), sort_keys=True, separators=(",", ":"), allow_nan=False
        ).encode("ascii")
    except (ApiError, ValueError, RecursionError):
        canonical = body
    digest = hashlib.sha256()
    for part in (method.upper().encode(), path.encode("utf-8", "surrogatepass"), canonical):
        digest.update(len(part).to_bytes(8, "big"))
        digest.update(part)
    return digest.hexdigest()


class DeferredApply:
    """The engine's verb recorded instead of made (``apply(resource_id, record)``, as
    ``web.http.deps.Dependencies.apply``); :meth:`flush` makes the calls on the real verb, in
    order, after the commit."""

    def __init__(self) -> None:
        self._calls: list[tuple[str, Any]] = []

    async def __call__(self, resource_id: str, record: Any) -> None:
        """Record the desired state of ``resource_id``."""
        self._calls.append((resource_id, record))

    async def flush(self, apply: Apply) -> None:
        """Make the recorded calls on ``apply`` and forget them.

        Raises:
            Whatever the engine raises (``ActorUnavailable``: 500 ``engine_unavailable``).
        """
        calls, self._calls = self._calls, []
        for resource_id, record in calls:
            await apply(resource_id, record)


class _NotStored(Exception):
    """Carries a non-2xx response out of the transaction so that it rolls back."""

    def __init__(self, response: ApiResponse) -> None:
        super().__init__(response.status)
        self.response = response


async def idempotency_keys(ctx: RequestContext, call_next: Handler) -> ApiResponse:
    """Middleware: idempotency keys on POST (module docstring; docs/api.md, Idempotency
    keys). Runs after authentication (the key's scope is the account) and authorization.

    Raises:
        ApiError: 400 ``idempotency_key_invalid``; 409 ``idempotency_key_reused`` or
            ``idempotency_key_in_use``; whatever the handler raises (nothing is stored).
    """
    raw = ctx.header(HEADER)
    if ctx.method != "POST" or raw is None or ctx.token is None:
        return await call_next(ctx)
    key = parse_key(raw)
    fingerprint = request_fingerprint(ctx.method, ctx.path, ctx.body)
    deps = ctx.deps
    now = int(deps.clock())
    expired_before = now - deps.settings.idempotency_retention_seconds
    deferred = DeferredApply()
    try:
        async with deps.db.open_transaction() as tx:
            claim = await tx.run(
                idempotency.claim_key, ctx.account_id, key, expired_before=expired_before
            )
            if claim == idempotency.IN_USE:
                raise ApiError(
                    "idempotency_key_in_use",
                    f"a request with this {HEADER} is still being processed; retry later",
                    param=HEADER,
                    headers={"Retry-After": str(IN_USE_RETRY_AFTER_SECONDS)},
                )
            if isinstance(claim, idempotency.StoredResponse):
                return _replay(claim, fingerprint)
            response = await _run_handler(ctx, call_next, tx, deferred)
            if not 200 <= response.status < 300:
                raise _NotStored(response)
            await tx.run(
                idempotency.save_key,
                ctx.account_id,
                key,
                fingerprint=fingerprint,
                status=response.status,
                body=response.body,
                headers=response.headers,
                created=now,
            )
    except _NotStored as not_stored:
        return not_stored.response
    await deferred.flush(deps.apply)
    return response


async def _run_handler(
    ctx: RequestContext, call_next: Handler, tx: Database, deferred: DeferredApply
) -> ApiResponse:
    """Run the rest of the chain with the request's transaction and deferred verb."""
    deps = ctx.deps
    ctx.deps = dataclasses.replace(deps, db=tx, apply=deferred)
    try:
        return await call_next(ctx)
    finally:
        ctx.deps = deps


def _replay(stored: idempotency.StoredResponse, fingerprint: str) -> ApiResponse:
    """The stored response again, or 409 when the key was used for another request."""
    if stored.fingerprint != fingerprint:
        raise ApiError(
            "idempotency_key_reused",
            f"this {HEADER} was used with a different request (method, path or body); "
            "use a new key for a new request",
            param=HEADER,
        )
    body: Any = None if stored.body is None else json.loads(stored.body)
    return ApiResponse(stored.status, body, {**stored.headers, REPLAYED_HEADER: "true"})


async def run_idempotency_purge(
    db: Database,
    *,
    retention_seconds: int = 24 * 3600,
    every_seconds: float = 3600.0,
    clock: Callable[[], float] = time.time,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Delete idempotency keys older than ``retention_seconds`` (docs/api.md, Idempotency
    keys: 24 hours) now and then every ``every_seconds`` (default 1 hour), until cancelled.
    Ready at once.

    ``clock`` is wall time in epoch seconds. Correctness does not depend on this task: a
    key past its retention is ignored by the middleware even before it is purged; the
    purge keeps the table small.

    Error handling: a database failure is logged and retried at the next round; it never
    ends the task. `trio.Cancelled` passes.
    """
    task_status.started()
    while True:
        try:
            deleted = await db.run(idempotency.purge_keys, int(clock()) - retention_seconds)
        except StoreError as exc:
            log.warning("idempotency key purge failed", error=str(exc))
        else:
            if deleted:
                log.info("idempotency keys purged", deleted=deleted)
        await trio.sleep(every_seconds)
