"""Machine facts recorded with every result: CPU, cores, Python, OpenSSL, library versions."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import shutil
import subprocess
import time

LIBRARIES = (
    "cryptography",
    "PyJWT",
    "msgspec",
    "starlette",
    "uvicorn",
    "websockets",
    "SQLAlchemy",
    "aiosqlite",
    "asyncpg",
    "redis",
    "rich",
    "matplotlib",
    "httpx2",
)


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo ("?" when unknown)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def node_version() -> str | None:
    """``node --version`` (e.g. "v20.20.2"), or None when node is not on PATH."""
    node = shutil.which("node")
    if node is None:
        return None
    try:
        return subprocess.run([node, "--version"], capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None


def facts() -> dict[str, object]:
    """CPU model, core count, load average, Python, OpenSSL (as linked by ``cryptography``),
    library versions, Node.js version and the run's start time (Unix s)."""
    from cryptography.hazmat.backends.openssl.backend import backend

    libs = {}
    for name in LIBRARIES:
        try:
            libs[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            libs[name] = None
    try:
        load = os.getloadavg()
    except OSError:
        load = None
    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "loadavg": load,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "python_impl": platform.python_implementation(),
        "openssl": backend.openssl_version_text(),
        "libraries": libs,
        "node": node_version(),
        "started_at": int(time.time()),
        "commit": git_commit(),
    }


def git_commit() -> str | None:
    """The checkout's commit (short sha, ``+`` when files differ from it), or None outside git."""
    import subprocess

    here = os.path.dirname(os.path.abspath(__file__))
    try:
        sha = subprocess.run(
            ["git", "-C", here, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", here, "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return (sha + ("+" if dirty else "")) or None


def load_now() -> list[float] | None:
    """The load average now (1, 5, 15 min), or None where the OS has none."""
    try:
        return list(os.getloadavg())
    except OSError:
        return None


def one_line(f: dict) -> str:
    """A one-line summary of :func:`facts` for the console."""
    node = f.get("node") or "no node"
    return f"{f['cpu']} · {f['cores']} cores · Python {f['python']} · {f['openssl']} · Node {node}"


def when(f: dict) -> str:
    """The run's start from :func:`facts` as "YYYY-MM-DD HH:MM UTC" ("?" when unknown)."""
    import datetime

    t = f.get("started_at")
    return datetime.datetime.fromtimestamp(t, datetime.UTC).strftime("%Y-%m-%d %H:%M UTC") if t else "?"
