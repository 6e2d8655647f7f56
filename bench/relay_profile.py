"""The relay's CPU split from a sampling profile: py-spy attached to the relay process while the
``relay`` suite's measured run goes on.

py-spy (``py-spy record --nonblocking``) reads the relay's Python stacks from outside the process,
never pausing it, so the relay's own CPU time (what ``relay_load`` divides by the messages) is not
changed by the profile. Idle samples (the event loop waiting in ``epoll``) are left out by py-spy,
so the shares below are shares of the relay's busy CPU.

Each sampled stack goes into one part of the message path, decided by the innermost frame of the
project's own code (``server/``, ``shared/``), unless the innermost frame is a library's listed below:

* **parse**: ``shared/envelope.py`` / ``shared/b64.py`` / ``shared/strictjson.py`` (the envelope's
  shape, sizes and header);
* **frame decode**: ``shared/frames.py`` decoding the client's frame;
* **checks**: the send path's own checks (sender, conversation, membership head, recipients);
* **commit**: the group-commit writer and the store, and any SQLAlchemy/sqlite3/asyncpg frame;
* **fan-out**: building the ``msg`` frame and queueing it (``server/hub.py``), the broker;
* **websocket and event loop**: any uvicorn, websockets, Starlette or asyncio frame (receiving
  frames and sending the ack and the ``msg`` frames, the work the echo app does too);
* **other**: the rest (logging, metrics, housekeeping).
"""

from __future__ import annotations

import collections
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

PARTS = ("parse", "frame decode", "checks", "commit", "fan-out", "websocket and event loop", "other")
_FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>[^()]*?)(?::\d+)?\)$")


def pyspy_path() -> str | None:
    """The ``py-spy`` executable (beside this Python's, or on PATH), or None."""
    here = Path(sys.executable).parent / "py-spy"
    return str(here) if here.exists() else shutil.which("py-spy")


def _part(func: str, file: str) -> str | None:
    """The part of the message path a project frame belongs to, or None for a frame outside the
    project (``file`` as py-spy prints it: a path, possibly shortened)."""
    f = file.replace("\\", "/")
    if "/shared/" not in f and "/server/" not in f and not f.startswith(("shared/", "server/")):
        return None
    name = f.rsplit("/", 1)[-1]
    if name in ("envelope.py", "b64.py", "strictjson.py") or "envelope" in f:
        return "parse"
    if name == "frames.py" or "/frames" in f:
        return "frame decode" if "decode" in func else "fan-out"
    if name in ("writer.py", "store.py", "db.py") or "/store" in f or "/writer" in f:
        return "commit"
    if name in ("hub.py", "broker.py") or func in ("_frame_for", "deliver", "enqueue", "pull_for", "pull", "_pull"):
        return "fan-out"
    if name in ("sendpath.py", "membership.py", "limits.py") or "sendpath" in f:
        return "commit" if func == "_commit" else "checks"
    return "other"


def _library_part(file: str) -> str | None:
    """The part a frame of a library belongs to (storage or websocket/event loop), else None."""
    f = file.lower()
    if "sqlalchemy" in f or "sqlite" in f or "asyncpg" in f:
        return "commit"
    if any(k in f for k in ("uvicorn", "websockets", "starlette", "asyncio", "selectors", "anyio", "h11", "httptools")):
        return "websocket and event loop"
    return None


def split(stacks: dict[str, int]) -> dict:
    """Shares of the relay's busy CPU per part of the message path, from collapsed stacks
    (``"root;...;leaf" -> samples``, as ``py-spy record -f raw`` writes them).

    Returns ``{"samples", "shares": {part: 0..1}, "top": [{"function", "share"}] (self time,
    12 largest)}``.
    """
    parts: collections.Counter[str] = collections.Counter()
    leaves: collections.Counter[str] = collections.Counter()
    total = 0
    for stack, count in stacks.items():
        frames = [m.groupdict() for m in (_FRAME.match(s.strip()) for s in stack.split(";")) if m]
        if not frames:
            continue
        total += count
        leaf = frames[-1]
        # a library leaf (SQLite, websockets, asyncio) decides; else the innermost project frame
        part = _library_part(leaf["file"]) or next(
            (p for fr in reversed(frames) if (p := _part(fr["func"], fr["file"])) is not None), "other"
        )
        parts[part] += count
        leaves[f"{leaf['func']} ({leaf['file'].rsplit('site-packages/', 1)[-1]})"] += count
    return {
        "samples": total,
        "shares": {p: parts[p] / total if total else 0.0 for p in PARTS},
        "top": [{"function": f, "share": n / total} for f, n in leaves.most_common(12)],
    }


def read_raw(path: Path) -> dict[str, int]:
    """Collapsed stacks from a py-spy ``raw`` file."""
    out: dict[str, int] = {}
    for line in path.read_text(errors="replace").splitlines():
        stack, _, n = line.rpartition(" ")
        if stack and n.isdigit():
            out[stack] = out.get(stack, 0) + int(n)
    return out


class Sampler:
    """``py-spy record`` attached to ``pid`` from :meth:`start` to :meth:`stop` (200 Hz,
    ``--nonblocking``: the relay is never paused)."""

    def __init__(self, pid: int, rate: int = 200) -> None:
        self.pid = pid
        self.rate = rate
        self.proc: subprocess.Popen | None = None
        self._dir = tempfile.mkdtemp(prefix="e2ee-bench-pyspy-")
        self.out = Path(self._dir) / "relay.raw"
        self.error = ""

    def start(self) -> bool:
        """Start sampling; False (and :attr:`error`) when py-spy is missing."""
        exe = pyspy_path()
        if exe is None:
            self.error = "py-spy is not installed (pip install py-spy; it is in the dev extra)"
            return False
        self.proc = subprocess.Popen(
            [
                exe,
                "record",
                "--pid",
                str(self.pid),
                "--nonblocking",
                "--rate",
                str(self.rate),
                "--format",
                "raw",
                "--output",
                str(self.out),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        return True

    def stop(self) -> dict | None:
        """Stop sampling (SIGINT: py-spy writes its file) and return :func:`split` of what it saw,
        or None with :attr:`error` set."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            _, err = self.proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
        try:
            if not self.out.exists():
                self.error = f"py-spy wrote nothing: {err.decode(errors='replace')[-400:].strip()}"
                return None
            return split(read_raw(self.out))
        finally:
            shutil.rmtree(self._dir, ignore_errors=True)
