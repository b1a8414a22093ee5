"""What ``uptrio serve`` does around its supervision tree (``web.process.service``): its data
directory's mode, the check of its JWT secret against the database's, the first start's
account and token, the signals that stop it, and its announcement on stdout."""

from __future__ import annotations

import hmac
import os
import signal
import stat
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import structlog
import trio

from store import DATA_DIR_MODE, OPEN_TO_OTHERS, Database, accounts, secure_data_dir

from ..http.auth import (
    SECRET_ENV,
    SECRET_FILE,
    issue_token,
    secret_fingerprint,
    secret_source,
)
from ..http.versioning import CURRENT_VERSION

__all__ = [
    "FIRST_ACCOUNT",
    "SecretMismatch",
    "announce",
    "check_secret",
    "first_token",
    "open_data_dir",
    "wait_for_signal",
]

log = structlog.get_logger("uptrio")

FIRST_ACCOUNT = "default"
"""The account the very first start creates, with a token holding every permission."""


class SecretMismatch(Exception):
    """This process's JWT secret is not the one the database's tokens are signed with;
    the message says which secret and how to fix it."""


def open_data_dir(data_dir: Path) -> None:
    """Create the data directory, or set an existing one to its mode
    (``store.secure_data_dir``: 0700, 0711 as root); logs a warning when other users
    could list or change it (docs/operations.md, The data directory)."""
    before = secure_data_dir(data_dir)
    if before & OPEN_TO_OTHERS:
        log.warning(
            "the data directory was open to other users: its JWT secret and first token "
            "may have been read (if so, make a new secret and new tokens)",
            data_dir=str(data_dir),
            mode=f"{before:04o}",
            now=f"{stat.S_IMODE(data_dir.stat().st_mode):04o}",
            expected=f"{DATA_DIR_MODE:04o}",
        )


async def check_secret(db: Database, secret: bytes, data_dir: Path) -> None:
    """Compare the fingerprint of ``secret`` (``web.http.auth.secret_fingerprint``) with the
    one the database keeps, recording it when there is none yet (the first process on the
    database; docs/several-nodes.md, One secret per database).

    Raises:
        SecretMismatch: the database keeps another secret's fingerprint.
    """
    fingerprint = secret_fingerprint(secret)
    recorded = await db.transaction(accounts.recorded_fingerprint, "jwt", fingerprint)
    if hmac.compare_digest(recorded, fingerprint):
        return
    source = secret_source(data_dir)
    if source == SECRET_ENV:
        fix = (
            f"set {SECRET_ENV} to the first node's secret (its {SECRET_ENV}, or the "
            f"contents of its data directory's {SECRET_FILE}, ./.uptrio/{SECRET_FILE} by "
            f"default), or unset it to use {data_dir / SECRET_FILE}"
        )
    else:
        fix = (
            f"copy the first node's secret (its data directory's {SECRET_FILE}, "
            f"./.uptrio/{SECRET_FILE} by default) to {source} (cp -p keeps its mode 0600), "
            f"or set {SECRET_ENV} to its contents"
        )
    raise SecretMismatch(
        f"the JWT secret in {source} is not the one this database's tokens are signed "
        "with: through this process every token would get 401 invalid_token. Every "
        f"process on one database must use the same secret: {fix}. (If that secret is "
        "lost: uptrio tokens reset-secret --yes makes this one the database's and "
        "revokes every token.)"
    )


async def first_token(
    db: Database, secret: bytes, data_dir: Path, permissions: Sequence[str]
) -> str | None:
    """On the very first start (no account yet): account ``default`` and a token with
    ``permissions``, every one (``web.routes.PERMISSIONS``: the service passes them, so
    that ``uptrio tokens``, which checks the secret here, imports none of the API);
    returns its JWT (also saved to ``<data-dir>/first-token``, mode 0600), else None."""
    now = int(time.time())
    token = await db.transaction(
        accounts.create_first_token,
        FIRST_ACCOUNT,
        list(permissions),
        now=now,
        current_version=CURRENT_VERSION,
    )
    if token is None:
        return None
    jwt_token = issue_token(secret, token.id, now=now, expires_at=None)
    path = data_dir / "first-token"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)  # a file left from an earlier database keeps its mode otherwise
    with os.fdopen(fd, "w") as handle:
        handle.write(jwt_token + "\n")
    return jwt_token


async def wait_for_signal(
    stop: trio.Event, force: trio.CancelScope, *, task_status: Any = trio.TASK_STATUS_IGNORED
) -> None:
    """SIGINT or SIGTERM: set ``stop`` (the graceful shutdown); a second one cancels
    ``force`` (everything, at once)."""
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        task_status.started()
        async for signum in signals:
            if stop.is_set():
                log.warning("second signal: stopping at once", signal=signal.Signals(signum).name)
                force.cancel()
                return
            log.info("stopping", signal=signal.Signals(signum).name)
            stop.set()


def announce(
    binds: list[str], data_dir: Path, first: str | None, embedded_url: str | None = None
) -> None:
    """Print where the service listens, the embedded server's URL (``embedded_url``,
    which has no password: other nodes join with ``--database-url``, docs/several-nodes.md)
    and, on the very first start, the token ``first``."""
    log.info("listening", binds=binds, data_dir=str(data_dir))
    print(f"Uptrio is listening on {', '.join(binds)}", flush=True)
    if embedded_url is not None:
        print(f"Embedded database (other nodes: --database-url): {embedded_url}", flush=True)
    if first is not None:
        print(
            "\nFirst start: created account 'default' and a token with every "
            f"permission (also saved in {data_dir / 'first-token'}):\n\n{first}\n",
            flush=True,
        )
