"""Starting the processes the bench talks to: relays (``python -m server``), a dev certificate,
and a fresh PostgreSQL database."""

from __future__ import annotations

import secrets
import socket
import ssl
import subprocess
import sys
from pathlib import Path

from bench.tools.relayproc import RelayProcess

# Cheap argon2id and no rate limits: the bench registers and logs in many users from one address
# and sends as fast as the relay takes it. Everything else (SQLite synchronous, INFO logs,
# queue bounds) stays at the relay's defaults, so what is measured is what users run.
BENCH_RELAY_ENV = {
    "E2EE_ARGON2_TIME_COST": "1",
    "E2EE_ARGON2_MEMORY_KIB": "8192",
    "E2EE_ARGON2_PARALLELISM": "1",
    "E2EE_RATE_SENDS_PER_S": "0",
    "E2EE_RATE_REGISTRATIONS_PER_MIN": "0",
    "E2EE_RATE_LOGINS_PER_MIN": "0",
    "E2EE_RATE_KEY_FETCHES_PER_MIN": "0",
    "E2EE_RATE_CONVERSATIONS_PER_MIN": "0",
    "E2EE_RATE_MEMBER_CHANGES_PER_MIN": "0",  # bench/rotation.py: one update statement per conversation
    "E2EE_OPERATOR_TOKEN": secrets.token_hex(16),  # GET /v1/metrics needs it
}
OPERATOR_HEADERS = {"Authorization": f"Bearer {BENCH_RELAY_ENV['E2EE_OPERATOR_TOKEN']}"}
PG_ADMIN_DSN = "postgresql://postgres@127.0.0.1:5432/test"
REDIS_URL = "redis://127.0.0.1:6379"


def level_args(level: int) -> list[str]:
    """Relay flags for ``level`` (1-3 need ``--demo-level``)."""
    return [] if level == 4 else ["--level", str(level), "--demo-level"]


def start_relay(
    data_dir: Path,
    level: int,
    *,
    tls: tuple[Path, Path] | None = None,
    extra: list[str] | None = None,
    env: dict[str, str] | None = None,
) -> RelayProcess:
    """Start a relay at ``level`` on a free port (TLS with ``(cert, key)``); blocks until healthy."""
    args = level_args(level) + list(extra or [])
    if tls is not None:
        args += ["--ssl-certfile", str(tls[0]), "--ssl-keyfile", str(tls[1])]
    return RelayProcess(data_dir, extra_args=args, env={**BENCH_RELAY_ENV, **(env or {})}).start(timeout=60)


def https_url(proc: RelayProcess) -> str:
    """The ``https://`` base URL of a relay started with TLS (``RelayProcess.url`` knows it)."""
    return proc.url


def dev_cert(folder: Path) -> tuple[Path, Path]:
    """Write a self-signed certificate for 127.0.0.1 with ``e2ee-relay dev-cert``; returns (cert, key)."""
    subprocess.run(
        [sys.executable, "-m", "server", "dev-cert", "--data-dir", str(folder)],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return folder / "tls" / "cert.pem", folder / "tls" / "key.pem"


def client_ssl(cert: Path) -> ssl.SSLContext:
    """A client TLS context that trusts only ``cert`` (the dev certificate is its own CA)."""
    return ssl.create_default_context(cafile=str(cert))


def relay_help() -> str:
    """``e2ee-relay --help`` text (to see which options this relay build accepts)."""
    return subprocess.run([sys.executable, "-m", "server", "--help"], capture_output=True, text=True, timeout=60).stdout


def reachable(host: str, port: int, timeout: float = 0.5) -> bool:
    """True when a TCP connection to ``host:port`` succeeds within ``timeout`` seconds."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


async def fresh_pg_database(prefix: str = "e2ee_bench") -> tuple[str, str]:
    """Create an empty PostgreSQL database on 127.0.0.1:5432 (trust auth); returns
    ``(name, SQLAlchemy asyncpg URL)``. Drop it with :func:`drop_pg_database`."""
    import asyncpg

    name = f"{prefix}_{secrets.token_hex(4)}"
    conn = await asyncpg.connect(PG_ADMIN_DSN, timeout=5)
    try:
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()
    return name, f"postgresql+asyncpg://postgres@127.0.0.1:5432/{name}"


async def drop_pg_database(name: str) -> None:
    """Drop a database made by :func:`fresh_pg_database` (connections are terminated first)."""
    import asyncpg

    conn = await asyncpg.connect(PG_ADMIN_DSN, timeout=5)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await conn.close()
