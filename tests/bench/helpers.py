"""The ``uptrio`` command as the bench's smoke tests run it: a subprocess of this Python
in the repository, with no ``UPTRIO_*`` setting of the caller's, under a time limit."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def uptrio(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """Run ``uptrio *args`` to completion (at most ``timeout`` s); its output as text."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("UPTRIO_")}
    return subprocess.run(
        [sys.executable, "-m", "web.process.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env=env,
        check=False,
    )
