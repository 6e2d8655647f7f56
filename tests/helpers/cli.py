"""``e2ee-chat`` in this process: accounts made beforehand, a command run with its output captured."""

from __future__ import annotations

import asyncio

from client_tui import cli
from client_tui.core import ChatClient
from tests.helpers.config import FAST_KDF, PASSWORD, TEST_BITS, passphrase


def register(relay, root, *names: str) -> None:
    """Register ``names`` on ``relay`` with profiles under ``root`` (from synchronous code)."""

    async def go() -> None:
        for n in names:
            c = ChatClient(relay.url, n, root, kdf=FAST_KDF)
            await c.register(PASSWORD, passphrase(n), bits=TEST_BITS)
            await c.close()

    asyncio.run(go())


def run(monkeypatch, capsys, user: str, *argv: str) -> tuple[int, str, str]:
    """``e2ee-chat ARGV[0] --user USER ARGV[1:]`` with the password and passphrase in the
    environment: ``(exit code, stdout, stderr)``."""
    monkeypatch.setenv("E2EE_PASSWORD", PASSWORD)
    monkeypatch.setenv("E2EE_PASSPHRASE", passphrase(user))
    code = cli.main([*argv[:1], "--user", user, *argv[1:]])
    out = capsys.readouterr()
    return code, out.out, out.err
