"""Make the README's screenshots with the app's own ``save_screenshot`` (run by hand).

    python -m client_tui.screenshots [docs/screenshots]

Starts a relay on a free port in a temporary folder, registers alice, bob and carol (RSA-3072),
has them chat in a group, then drives alice's window headless (Textual's ``run_test``) and saves
``chat.svg`` (the conversation), ``inspector.svg`` (what the relay stored for bob's message) and
``keys.svg`` (bob's fingerprints and the safety number).
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

from textual import events

from .app import ChatApp
from .core import ChatClient
from .relayproc import RelayProcess

SIZE = (132, 38)
SCRIPT = [
    ("alice", "Hello team! 👋 The launch plan is in the shared folder."),
    ("bob", "Grüß dich, Alice — ça va? 你好! I'll review it tonight."),
    ("carol", "مرحبا! Numbers look good; ship it 🚀"),
    ("bob", "One question: do we keep the 2FA codes\non paper or in the password manager?"),
]
KDF = {"iterations": 2, "memory_kib": 19456, "lanes": 1}


async def _wait(predicate, timeout: float = 30) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise TimeoutError("the screenshot scene did not come together")
        await asyncio.sleep(0.05)


async def scene(url: str, root: Path, out: Path) -> None:
    clients = {u: ChatClient(url, u, root, kdf=KDF) for u in ("alice", "bob", "carol")}
    await asyncio.gather(*(c.register("password", f"{u} passphrase", bits=3072) for u, c in clients.items()))
    conv = await clients["alice"].create_conversation("launch team", ["bob", "carol"])
    for c in clients.values():
        await c.connect()
        await c.wait_synced()
    alice = clients.pop("alice")
    app = ChatApp(alice, conv)
    async with app.run_test(size=SIZE) as pilot:
        await _wait(lambda: alice.online)
        for n, (sender, text) in enumerate(SCRIPT, 1):
            if sender == "alice":
                app.post_message(events.Paste(text))  # as a terminal pastes it (Pilot cannot type emoji)
                await pilot.pause(0.1)
                await pilot.press("enter")
                await _wait(lambda n=n: len(app.chat.records) >= n)
            else:
                await clients[sender].send_text(conv, text)
                await _wait(lambda n=n: len(app.chat.records) >= n)
        alice.verify_contact("bob")  # alice compared the safety number with bob
        await _wait(lambda: app.chat.records[0].state == "delivered")
        await pilot.press(*"Paper, in the safe. Sending the list now", "ctrl+j", *"(encrypted, of course)")
        await pilot.pause(0.3)
        app.save_screenshot("chat.svg", str(out))
        await pilot.press("ctrl+up")
        await pilot.press("f2")
        await pilot.pause(0.3)
        app.save_screenshot("inspector.svg", str(out))
        await pilot.press("f2")
        await pilot.press("ctrl+k")
        await pilot.pause(0.3)
        app.save_screenshot("keys.svg", str(out))
        await pilot.press("escape")
    for c in clients.values():
        await c.close()


def main(argv: list[str] | None = None) -> int:
    args = argv if argv is not None else sys.argv[1:]
    out = Path(args[0] if args else "docs/screenshots")
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="e2ee-shots-") as tmp:
        relay = RelayProcess(Path(tmp) / "relay").start()
        try:
            asyncio.run(scene(relay.url, Path(tmp) / "clients", out))
        finally:
            relay.stop()
    for name in ("chat.svg", "inspector.svg", "keys.svg"):
        print(out / name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
