"""The one way the client writes a private file (keystore, trust store, history cache, log, exports,
attachments).

Every file is created with mode 0600 in a folder made with mode 0700. A replacing write goes to a
temporary file in the same folder (created 0600 before any byte is written), is flushed and
fsync'd, then renamed over the target (``os.replace``, atomic on POSIX), so a reader sees the old
file or the new one, never half of one, and a failed write (full disk, unwritable folder) leaves
the old file as it was and raises :class:`OSError`. A damaged file is never overwritten: it is
renamed aside first (:func:`set_aside`).
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from .errors import LocalFileDamaged

DIR_MODE = 0o700
FILE_MODE = 0o600


def private_folder(path: Path) -> Path:
    """Create ``path`` (and its parents) with mode 0700 if missing; return it."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
    return path


class PrivateStream:
    """A private file written piece by piece (an attachment of 25 MiB is never held whole):
    the bytes go to a temporary file in the target's folder (created 0600 before any byte is
    written), and :meth:`commit` fsyncs it and renames it over ``path``; :meth:`abort` (or any
    failure) removes it, so ``path`` is the old file or the complete new one, never a part.
    Every method blocks (call them from a worker thread on an event loop).

    Raises:
        OSError: the folder cannot be written (ENOSPC, EACCES, EPERM, EFBIG ...); nothing is left
            behind.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        private_folder(self.path.parent)
        fd, self._tmp = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.", suffix=".tmp")
        try:
            os.fchmod(fd, FILE_MODE)
            self._file = os.fdopen(fd, "wb")
        except BaseException:
            os.close(fd)
            self.abort()
            raise

    def write(self, data: bytes) -> None:
        """Append ``data`` (removes the temporary file if it fails)."""
        try:
            self._file.write(data)
        except BaseException:
            self.abort()
            raise

    def commit(self) -> None:
        """Flush, fsync (file and folder) and rename over ``path``."""
        try:
            self._file.flush()
            os.fsync(self._file.fileno())
            self._file.close()
            os.replace(self._tmp, self.path)
        except BaseException:
            self.abort()
            raise
        _fsync_folder(self.path.parent)

    def abort(self) -> None:
        """Drop what was written; ``path`` stays as it was."""
        with contextlib.suppress(OSError, AttributeError):
            self._file.close()
        with contextlib.suppress(OSError):
            os.unlink(self._tmp)


def write_private(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically, mode 0600, fsync'd (file and folder).

    Raises:
        OSError: the folder cannot be written (ENOSPC, EACCES, EPERM, EFBIG ...); ``path`` is
            unchanged and no temporary file is left behind.
    """
    stream = PrivateStream(path)
    stream.write(data)
    stream.commit()


def create_private(path: Path, data: bytes = b"") -> None:
    """Create ``path`` holding ``data`` (mode 0600); refuses to replace an existing file.

    Raises:
        FileExistsError: ``path`` exists.  OSError: it cannot be written.
    """
    path = Path(path)
    private_folder(path.parent)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(path)
        raise


def ensure_private(path: Path) -> bool:
    """Create an empty ``path`` with mode 0600 if it does not exist (e.g. before SQLite opens it);
    returns True if it was created."""
    try:
        create_private(path)
    except FileExistsError:
        return False
    return True


def append_private(path: Path):
    """Open ``path`` for appending text (created 0600 if missing): a log file."""
    private_folder(Path(path).parent)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, FILE_MODE)
    return os.fdopen(fd, "a", encoding="utf-8")


def load_local_json(data: bytes | str, what: str, shape: type = dict) -> Any:
    """Decode a local file's JSON (the one way the client reads its own JSON files).

    Args:
        data: the file's bytes (UTF-8) or text.
        what: the file's name, for the message.
        shape: the type the top-level value must have (``dict`` unless told).

    Raises:
        LocalFileDamaged: not UTF-8 JSON, nested deeper than the decoder's stack
            (``RecursionError``), or the top-level value is not a ``shape``.
    """
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise LocalFileDamaged(f"{what} is not valid JSON ({type(exc).__name__})") from None
    if not isinstance(doc, shape):
        raise LocalFileDamaged(f"{what} holds a JSON {type(doc).__name__}, not a {shape.__name__}")
    return doc


def set_aside(path: Path, why: str, companions: tuple[str, ...] = ()) -> Path:
    """Rename ``path`` to ``<name>.<why>-<UTC time>[-n]`` beside it, never over an existing file,
    and return the new path. ``companions`` are suffixes of files that belong to it (SQLite's
    ``-wal`` and ``-shm``), moved under the same new name.

    Raises:
        OSError: it could not be renamed.
    """
    path = Path(path)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    for n in range(1000):
        dest = path.with_name(f"{path.name}.{why}-{stamp}" + (f"-{n}" if n else ""))
        try:
            os.link(path, dest)  # fails if dest exists: never replaces anything
        except FileExistsError:
            continue
        os.unlink(path)
        for suffix in companions:
            side = path.with_name(path.name + suffix)
            if side.exists():
                with contextlib.suppress(OSError):
                    os.replace(side, dest.with_name(dest.name + suffix))
        return dest
    raise FileExistsError(f"no free name to set {path} aside")


def _fsync_folder(folder: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
