"""The data folder belongs to one running relay: an exclusive ``flock`` on ``data_dir/relay.lock``.

A second relay (or ``e2ee-relay migrate``) started on a folder in use stops at once with one line
naming the folder and the pid that holds it, instead of silently sharing the first one's SQLite
file, secrets and log. The kernel drops the lock when the holder exits, however it exits
(SIGKILL included), so a crashed relay never leaves a stale lock behind.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import IO


class DataDirLocked(Exception):
    """Another process holds the data folder; ``str(exc)`` is the one line to print."""

    def __init__(self, folder: Path, pid: str) -> None:
        super().__init__(
            f"data folder {folder} is in use by another relay (pid {pid}); stop it, or give this one another --data-dir"
        )
        self.folder = folder
        self.pid = pid


def lock_data_dir(folder: Path) -> IO[str]:
    """Take the folder's lock for this process's lifetime and write our pid into it.

    Returns:
        the open lock file: keep a reference to it (closing it releases the lock).

    Raises:
        DataDirLocked: another process holds it.
    """
    f = open(folder / "relay.lock", "a+")  # held open until the process exits
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.seek(0)
        pid = f.read().strip() or "unknown"
        f.close()
        raise DataDirLocked(folder, pid) from None
    f.seek(0)
    f.truncate()
    f.write(f"{os.getpid()}\n")
    f.flush()
    return f
