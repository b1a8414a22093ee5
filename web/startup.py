"""What ``uptrio serve`` does around its supervision tree (``web.service``): the first
start's account and token, the signals that stop it, and its announcement on stdout."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import structlog
import trio

from store import Database, accounts

from .auth import PERMISSIONS, issue_token
from .versioning import CURRENT_VERSION

__all__ = ["FIRST_ACCOUNT", "announce", "first_token", "wait_for_signal"]

log = structlog.get_logger("uptrio")

FIRST_ACCOUNT = "default"
"""The account the very first start creates, with a token holding every permission."""


async def first_token(db: Database, secret: bytes, data_dir: Path) -> str | None:
    """On the very first start (no account yet): account ``default`` and a token with
    every permission; returns its JWT (also saved to ``<data-dir>/first-token``, mode
    0600), else None."""
    now = int(time.time())
    token = await db.transaction(
        accounts.create_first_token,
        FIRST_ACCOUNT,
        list(PERMISSIONS),
        now=now,
        current_version=CURRENT_VERSION,
    )
    if token is None:
        return None
    jwt_token = issue_token(secret, token.id, now=now, expires_at=None)
    path = data_dir / "first-token"
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
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
    which has no password: other nodes join with ``--database-url``, extensions part 6)
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
