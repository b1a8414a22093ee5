"""The data directory's mode (README: Operations, "The data directory").

The data directory holds the embedded server's ``pgdata``, the JWT signing secret, the
first token and the admin socket: nothing in it is for other users. It is kept at mode
0700, and its files at 0600 (their writers see to that). Run as root, pgserver runs
Postgres as a system user of its own (``pgserver``, with the group of the process that
started it) and, at every start, opens every directory above ``pgdata`` to all users
(``chmod g+rx,o+rx``) so that user can reach it; so as root the mode is 0711: the
group and other users may pass through to ``pgdata`` (itself 0700, the server's own)
but not list the directory, and its files stay 0600. (Postgres opens its files by their
absolute paths: without that passage the running server stops with a PANIC.)
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

__all__ = ["DATA_DIR_MODE", "OPEN_TO_OTHERS", "secure_data_dir"]

DATA_DIR_MODE = 0o711 if os.geteuid() == 0 else 0o700
"""The data directory's mode: 0700, or 0711 as root (module docstring)."""

OPEN_TO_OTHERS = 0o006
"""The bits of a directory's mode that let other users list it or change it."""


def secure_data_dir(data_dir: Path) -> int:
    """Create ``data_dir`` (and missing parents) with mode :data:`DATA_DIR_MODE`, or set
    an existing one to it; returns the mode it had (0 when it was created).

    A directory this process does not own, or one with the sticky bit (``/tmp``), is
    left as it is: it is not Uptrio's to change.

    Raises:
        OSError: the directory cannot be created or changed (``NotADirectoryError``:
            the path is a file).
    """
    try:
        data_dir.mkdir(mode=DATA_DIR_MODE, parents=True)
    except FileExistsError:
        found = data_dir.stat()
        if not stat.S_ISDIR(found.st_mode):
            raise NotADirectoryError(f"the data directory {data_dir} is not a directory") from None
        before = stat.S_IMODE(found.st_mode)
        if found.st_uid == os.geteuid() and not before & stat.S_ISVTX and before != DATA_DIR_MODE:
            data_dir.chmod(DATA_DIR_MODE)
        return before
    data_dir.chmod(DATA_DIR_MODE)  # mkdir's mode passes through the umask
    return 0
