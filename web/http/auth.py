"""Bearer-token authentication and per-resource permissions (docs/api.md, "Conventions and
decisions": token; the permissions themselves are derived from the resources:
``web.routes.PERMISSIONS``).

A token is an HS256 JWT: ``sub`` is its ``tok_`` id, ``aud`` is :data:`AUDIENCE`, ``iat``
is required, ``exp`` is enforced when present. The algorithm is pinned (``alg: none`` or
any other algorithm is refused before the signature is looked at). The signature proves
the token was made here; the database decides whether it still counts: permissions,
expiry and revocation live in ``api_tokens``, read on every request, so a revocation
applies from the next request on. What the signature proves does not change, so an app
checks it once per token string (:class:`ClaimsCache`, a bounded LRU the app owns); the
time claims are checked on every request all the same.

The signing secret is ``UPTRIO_JWT_SECRET`` when set, else a random secret generated once
into ``<data-dir>/jwt-secret`` with mode 0600. Several processes sharing a database must
share the secret: the database keeps its fingerprint (:func:`secret_fingerprint`), and a
process with another secret refuses to run (``web.process.startup.check_secret``; README:
Several nodes).
"""

from __future__ import annotations

import hashlib
import hmac
import math
import os
import secrets
import stat
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import jwt

from store import has_prefix, secure_data_dir

from .errors import ApiError

AUDIENCE = "uptrio"
ALGORITHM = "HS256"
LEEWAY_SECONDS = 30
"""Clock skew tolerated on ``iat``, ``nbf`` and ``exp`` (seconds)."""

EVENT_READ_PERMISSIONS = {
    "monitor": "monitors.read",
    "incident": "incidents.read",
    "heartbeat": "heartbeats.read",
    "alert": "on_call.read",
    "maintenance": "maintenance.read",
    "schedule": "on_call.read",
}
"""The read permission that shows an event, by the first part of its type
(docs/incidents.md, "Events": the read permission of the event's resource;
``incident.update_posted`` is an incident's; ``alert.*`` needs ``on_call.read``,
docs/alerts.md; ``maintenance.*`` ``maintenance.read``, docs/maintenance.md; ``schedule.*``
``on_call.read``, docs/on-call.md). ``GET
/events`` lists only the events a token may read, and a webhook endpoint may subscribe
only to them (docs/webhooks.md, "Permissions")."""


def readable_event_kinds(permissions: list[str]) -> list[str]:
    """The event kinds (``monitor``, ``incident``, ...) ``permissions`` may read."""
    return [kind for kind, p in EVENT_READ_PERMISSIONS.items() if p in permissions]


SECRET_ENV = "UPTRIO_JWT_SECRET"

SECRET_FILE = "jwt-secret"
"""The secret's file in the data directory."""

_FINGERPRINT_MESSAGE = b"uptrio jwt-secret fingerprint v1"


def load_secret(data_dir: Path) -> bytes:
    """The JWT signing secret: ``$UPTRIO_JWT_SECRET``, else ``data_dir/jwt-secret``,
    created with mode 0600 on first use (race-free: ``O_EXCL``); an existing file open to
    other users (a copy made with ``cp`` is 0644) is set to 0600.

    Raises:
        OSError: the data directory cannot be written.
    """
    from_env = os.environ.get(SECRET_ENV)
    if from_env:
        return from_env.encode()
    path = data_dir / SECRET_FILE
    secure_data_dir(data_dir)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        if stat.S_IMODE(path.stat().st_mode) & 0o077:
            path.chmod(0o600)
        return path.read_bytes().strip()
    with os.fdopen(fd, "w") as handle:
        handle.write(secrets.token_urlsafe(48))
    return path.read_bytes().strip()


def secret_source(data_dir: Path) -> str:
    """Where :func:`load_secret` takes the secret from, for messages:
    ``UPTRIO_JWT_SECRET`` or the file's path."""
    return SECRET_ENV if os.environ.get(SECRET_ENV) else str(data_dir / SECRET_FILE)


def secret_fingerprint(secret: bytes) -> str:
    """The fingerprint the database keeps of the signing secret: ``hmac-sha256:`` and the
    hex HMAC-SHA256 (RFC 2104) of a fixed string keyed by the secret. Equal secrets give
    equal fingerprints; guessing the secret from one is no easier than from any token
    signed with it (an HS256 JWT is an HMAC-SHA256 keyed by the secret as well)."""
    digest = hmac.new(secret, _FINGERPRINT_MESSAGE, hashlib.sha256).hexdigest()
    return f"hmac-sha256:{digest}"


def issue_token(secret: bytes, token_id: str, *, now: int, expires_at: int | None) -> str:
    """The JWT for token record ``token_id`` (times in epoch seconds)."""
    claims: dict[str, object] = {"sub": token_id, "aud": AUDIENCE, "iat": now}
    if expires_at is not None:
        claims["exp"] = expires_at
    return jwt.encode(claims, secret, algorithm=ALGORITHM)


def bearer_token(authorization: str | None) -> str:
    """The token of an ``Authorization: Bearer <token>`` header.

    Raises:
        ApiError: ``missing_token`` (401) when the header is absent or not a bearer token.
    """
    if not authorization:
        raise ApiError("missing_token", "Authorization: Bearer <token> is required")
    scheme, _, token = authorization.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise ApiError("missing_token", "Authorization must be of the form: Bearer <token>")
    return token.strip()


def verify_token(
    secret: bytes, token: str, *, now: float | None = None, cache: ClaimsCache | None = None
) -> str:
    """Check a JWT's signature and claims; return its ``sub`` (the ``tok_`` id).

    pyjwt checks the structure, the algorithm, the signature, the audience and that
    ``sub``, ``iat`` and ``aud`` are present; the time claims are checked here, because
    pyjwt reads them with ``int()`` and so takes ``"exp": "9999999999"``, while RFC 7519
    (2, NumericDate) makes them JSON numbers. ``iat``, and ``nbf`` and ``exp`` when
    present, must be finite numbers (not strings, not booleans); ``iat`` and ``nbf`` may
    not be later than ``now`` plus :data:`LEEWAY_SECONDS`, and ``exp`` must be later
    than ``now`` minus it. Messages are Uptrio's own words, never pyjwt's.

    With a ``cache`` (the app's :class:`ClaimsCache`, made for ``secret`` alone), a token
    string whose signature and claims were checked before is not decoded again; its time
    claims are checked against ``now`` on every call all the same, so an expired token
    fails however often it was seen. Whether the token is still known, unrevoked and
    granted a permission is the database's to say, on every request (module docstring).

    Args:
        now: the current time, epoch seconds (default: the clock).

    Raises:
        ApiError: ``token_expired`` (401) for a past ``exp``; ``invalid_token`` (401) for
            anything else wrong (segments, base64, algorithm, signature, audience, missing
            claims, a time claim that is not a number, ``nbf``/``iat`` in the future
            beyond the leeway, malformed ``sub``).
    """
    claims = cache.get(token) if cache is not None else None
    if claims is None:
        claims = _decode(secret, token)
        if cache is not None:
            cache.put(token, claims)
    now = time.time() if now is None else now
    if claims.iat > now + LEEWAY_SECONDS:
        raise ApiError("invalid_token", "invalid token: iat is in the future")
    if claims.nbf > now + LEEWAY_SECONDS:
        raise ApiError("invalid_token", "invalid token: not valid before its nbf")
    if claims.exp is not None and claims.exp <= now - LEEWAY_SECONDS:
        raise ApiError("token_expired", "the token has expired")
    return claims.subject


@dataclass(frozen=True, slots=True)
class TokenClaims:
    """What a JWT whose signature, structure and claims' types were checked says:
    its ``sub`` and its time claims (epoch seconds; ``nbf`` 0 when absent, ``exp`` None
    when absent)."""

    subject: str
    iat: float
    nbf: float
    exp: float | None


def _decode(secret: bytes, token: str) -> TokenClaims:
    """The claims of ``token`` once everything but time is checked (:func:`verify_token`).

    Raises:
        ApiError: ``invalid_token`` (401), as :func:`verify_token` says.
    """
    try:
        claims = jwt.decode(
            token,
            secret,
            algorithms=[ALGORITHM],
            audience=AUDIENCE,
            options={
                "require": ["sub", "iat", "aud"],
                "verify_exp": False,
                "verify_nbf": False,
                "verify_iat": False,
            },
        )
    except jwt.PyJWTError as exc:
        raise ApiError("invalid_token", f"invalid token: {_reason(exc)}") from None
    subject = claims.get("sub")
    if not isinstance(subject, str) or not has_prefix(subject, "tok"):
        # strict: a NUL or a lone surrogate in sub would fail in the database, not here
        raise ApiError("invalid_token", "invalid token: sub is not a token id")
    for name in ("iat", "nbf", "exp"):
        value = claims.get(name, 0)
        if isinstance(value, bool) or not isinstance(value, int | float) or not _finite(value):
            raise ApiError("invalid_token", f"invalid token: {name} must be a number (a time)")
    return TokenClaims(subject, claims["iat"], claims.get("nbf", 0), claims.get("exp"))


class ClaimsCache:
    """The claims of the tokens an app verified lately, by token string: a bounded LRU
    of at most ``max_entries`` (default 4,096) owned by the app (``Dependencies``), for
    one signing secret. Only tokens whose signature and claims passed are kept; what
    changes with time (expiry) and what the database decides (revocation, permissions)
    is still checked on every request (:func:`verify_token`)."""

    def __init__(self, max_entries: int = 4096) -> None:
        if max_entries < 1:
            raise ValueError("a claims cache holds at least one token")
        self._max = max_entries
        self._claims: OrderedDict[str, TokenClaims] = OrderedDict()

    def __len__(self) -> int:
        return len(self._claims)

    def get(self, token: str) -> TokenClaims | None:
        """The claims kept for ``token`` (now the most recently used), or None."""
        claims = self._claims.get(token)
        if claims is not None:
            self._claims.move_to_end(token)
        return claims

    def put(self, token: str, claims: TokenClaims) -> None:
        """Keep ``claims`` for ``token``, forgetting the least recently used past the bound."""
        self._claims[token] = claims
        self._claims.move_to_end(token)
        while len(self._claims) > self._max:
            self._claims.popitem(last=False)


def _finite(value: float) -> bool:
    """True for a number that is neither NaN nor infinite (JSON ints of any size are)."""
    return isinstance(value, int) or math.isfinite(value)


def _reason(exc: jwt.PyJWTError) -> str:
    """Uptrio's words for a pyjwt error (its own messages name library internals)."""
    if isinstance(exc, jwt.InvalidSignatureError):
        return "the signature does not match"
    if isinstance(exc, jwt.InvalidAlgorithmError):
        return f"the algorithm must be {ALGORITHM}"
    if isinstance(exc, jwt.InvalidAudienceError):
        return f"the audience (aud) must be {AUDIENCE}"
    if isinstance(exc, jwt.MissingRequiredClaimError):
        return f"the {exc.claim} claim is required"
    if isinstance(exc, jwt.exceptions.InvalidSubjectError):
        return "sub is not a token id"
    if isinstance(exc, jwt.DecodeError):
        return "not a JWT (three base64url segments of JSON, signed with HS256)"
    return "the token is not acceptable"


def expired(expires_at: int | None, now: float) -> bool:
    """Whether a token record whose expiry is ``expires_at`` (epoch seconds, None for
    never) has expired at ``now``, with the :data:`LEEWAY_SECONDS` the JWT's ``exp``
    gets (README: 30 s leeway)."""
    return expires_at is not None and expires_at <= now - LEEWAY_SECONDS


def granted(permissions: list[str], needed: str | tuple[str, ...]) -> bool:
    """Whether ``needed`` is among ``permissions`` (a tuple: one of them)."""
    if isinstance(needed, str):
        return needed in permissions
    return any(p in permissions for p in needed)


def require_permission(permissions: list[str], needed: str | tuple[str, ...]) -> None:
    """Raises ApiError ``missing_permission`` (403) unless ``needed`` is granted (a
    tuple: unless one of them is)."""
    if not granted(permissions, needed):
        if isinstance(needed, str):
            needed = (needed,)
        raise ApiError(
            "missing_permission", f"this token lacks the permission {' or '.join(needed)}"
        )


def parse_permissions(text: str, known: Sequence[str]) -> list[str]:
    """Parse ``monitors.read,incidents.create,...`` (or ``all``: every one of ``known``)
    for the command line (docs/operations.md, "Command line"); ``known`` is
    ``web.routes.PERMISSIONS``, whose order the result keeps.

    Raises:
        ValueError: an unknown permission, or none at all.
    """
    if text.strip() == "all":
        return list(known)
    wanted = [p.strip() for p in text.split(",") if p.strip()]
    unknown = [p for p in wanted if p not in known]
    if unknown or not wanted:
        raise ValueError(
            f"unknown permission(s) {', '.join(unknown) or '(none given)'}; "
            f"known: {', '.join(known)}, or all"
        )
    return sorted(set(wanted), key=list(known).index)
