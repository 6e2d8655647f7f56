"""Relays for one test, and reads of what a relay wrote (its log, its SQLite database)."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

from bench.tools.relayproc import RelayProcess
from tests.helpers.config import FAST_RELAY_ENV
from tests.helpers.inprocess import InProcessRelay


def start_relay(
    data_dir: Path, *args: str, env: dict[str, str] | None = None, process: bool = False
) -> InProcessRelay | RelayProcess:
    """A started relay with test settings: ``args`` are ``e2ee-relay`` flags, ``env`` adds or
    overrides ``E2EE_*`` variables. In this process (uvicorn in a thread) unless ``process``:
    ``python -m server serve``, for what only a process has (a kill, an exit code, its memory);
    a test that asks for one carries ``@pytest.mark.process``."""
    if process:
        if not _processes_allowed:
            raise RuntimeError("a relay process in a test not marked @pytest.mark.process")
        return RelayProcess(data_dir, extra_args=list(args), env={**FAST_RELAY_ENV, **(env or {})}).start()
    return InProcessRelay(data_dir, list(args), env).start()


_processes_allowed = True


def allow_processes(allowed: bool) -> None:
    """Whether ``start_relay(..., process=True)`` may run: only in a test marked
    ``@pytest.mark.process`` (set before each test by the root conftest), so the marker lists them all."""
    global _processes_allowed
    _processes_allowed = allowed


def marked_process(request) -> bool:
    """The test carries ``@pytest.mark.process``: its ``relay`` and ``world`` fixtures start real
    relay processes (``request``: the fixture's ``pytest.FixtureRequest``)."""
    return request.node.get_closest_marker("process") is not None


def relay_log(relay) -> str:
    """The relay's log file and its stdout/stderr, as text."""
    return "".join(
        (relay.data_dir / n).read_text(errors="replace")
        for n in ("relay.log", "relay.stdout")
        if (relay.data_dir / n).exists()
    )


def attacks(relay, mode: str, to: str | None = None) -> list[str]:
    """The hostile relay's log lines for each attack it carried out (optionally: on ``to``)."""
    lines = re.findall(rf"hostile {re.escape(mode)}: [^\n]*", (relay.data_dir / "relay.log").read_text())
    return [ln for ln in lines if to is None or f" to {to}" in ln or f" of {to} " in ln]


def db_count(relay, sql: str = "SELECT count(*) FROM messages") -> int:
    """One number from the relay's SQLite file (``sql`` answers one row of one column)."""
    db = sqlite3.connect(relay.data_dir / "relay.db")
    try:
        return db.execute(sql).fetchone()[0]
    finally:
        db.close()


def relay_pids(under: Path) -> list[int]:
    """Process ids of the ``python -m server serve`` relays alive on this machine whose ``--data-dir``
    is ``under`` or inside it (read from ``/proc/<pid>/cmdline``; zombies excluded)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            args = (proc / "cmdline").read_bytes().split(b"\0")
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:  # gone meanwhile
            continue
        if state == "Z" or b"server" not in args or b"serve" not in args or b"--data-dir" not in args:
            continue
        data_dir = Path(args[args.index(b"--data-dir") + 1].decode(errors="replace"))
        if data_dir == under or under in data_dir.parents:
            found.append(int(proc.name))
    return found


def drop_rotation_signatures(relay) -> None:
    """Make ``relay`` (a SQLite one) a relay that drops the signature of every key rotation stored
    from now on (a trigger on ``user_keys``): a rotation then reaches the other clients as a key
    change without a signed chain, which waits for their decision (the signed one is followed)."""
    db = sqlite3.connect(relay.data_dir / "relay.db")
    try:
        db.execute(
            "CREATE TRIGGER IF NOT EXISTS drop_rotation_sig AFTER INSERT ON user_keys "
            "BEGIN UPDATE user_keys SET rotation_sig = NULL WHERE id = NEW.id; END"
        )
        db.commit()
    finally:
        db.close()
