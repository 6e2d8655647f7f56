"""Make the README's screenshots with the app's own ``save_screenshot`` (run by hand).

    python -m bench.tools.screenshots [docs/screenshots]

Starts a relay on a free port in a temporary folder, registers alice, bob and carol (RSA-3072),
has them chat in a group, then drives alice's window headless (Textual's ``run_test``) at 80×24
and at 120×40 and saves ``chat-WxH.svg`` (the conversation), ``inspector-WxH.svg`` (what the
relay stored for a message), ``keys-WxH.svg`` (fingerprints and the safety number) and
``search-WxH.svg`` (a search through the decrypted history).
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

from client_tui.app import ChatApp
from client_tui.core import ChatClient, Delivered

from .relayproc import RelayProcess

SIZES = [(80, 24), (120, 40)]
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


async def scene(url: str, root: Path, out: Path) -> list[str]:
    clients = {u: ChatClient(url, u, root, kdf=KDF) for u in ("alice", "bob", "carol")}
    await asyncio.gather(*(c.register("password", f"{u} passphrase", bits=3072) for u, c in clients.items()))
    conv = await clients["alice"].create_conversation("launch team", ["bob", "carol"])
    for c in clients.values():
        await c.connect()
        await c.wait_synced()
    alice = clients.pop("alice")
    alice.verify_contact("bob")  # alice compared the safety number with bob
    for sender, text in SCRIPT:  # the conversation, sent before the windows open
        sent = await (alice if sender == "alice" else clients[sender]).send_text(conv, text)
        if sender == "alice":
            mine = sent.seq
    got: set[str] = set()
    while got != {"bob", "carol"}:  # alice's message shows ✓✓ (delivered to both)
        ev = await asyncio.wait_for(alice.events.get(), 30)
        if isinstance(ev, Delivered) and ev.seq == mine:
            got.add(ev.user)
    await alice.close()
    saved, texts = [], {text for _, text in SCRIPT}
    for size in SIZES:
        alice = ChatClient(url, "alice", root, kdf=KDF)  # each window closes its client when it ends
        await alice.login("password", "alice passphrase")
        app = ChatApp(alice, conv)
        tag = f"{size[0]}x{size[1]}"
        async with app.run_test(size=size) as pilot:
            await _wait(
                lambda app=app: app.client.online and sum(r.text in texts for r in app.chat.records) == len(texts)
            )
            await _wait(
                lambda app=app: all(r.state == "delivered" for r in app.chat.records if r.mine and r.text in texts)
            )
            await pilot.press(*"Paper, in the safe. Sending the list now", "ctrl+j", *"(encrypted, of course)")
            await pilot.pause(0.3)
            for name, keys in (
                ("chat", ()),
                ("inspector", ("ctrl+up", "f2")),
                ("keys", ("f2", "ctrl+k")),
                ("search", ("escape", "ctrl+f", *"launch")),
            ):
                for key in keys:
                    await pilot.press(key)
                await pilot.pause(0.4)
                saved.append(app.save_screenshot(f"{name}-{tag}.svg", str(out)))
            await pilot.press("escape")
    for c in clients.values():
        await c.close()
    return saved


def main(argv: list[str] | None = None) -> int:
    args = argv if argv is not None else sys.argv[1:]
    out = Path(args[0] if args else "docs/screenshots")
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="e2ee-shots-") as tmp:
        relay = RelayProcess(Path(tmp) / "relay").start()
        try:
            saved = asyncio.run(scene(relay.url, Path(tmp) / "clients", out))
        finally:
            relay.stop()
    for name in saved:
        print(name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
