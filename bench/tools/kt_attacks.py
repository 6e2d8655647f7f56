"""The key transparency attacks of ``e2ee-demo --attacks`` (docs/THREAT_MODEL.md §3, PROTOCOL.md §14),
each against a real relay process:

* ``plant-key``: the relay plants mallory's keys in its log under bob's name and serves them to alice
  with a valid proof; bob's client notices at its next start.
* ``split-view``: the relay shows alice a forked log in which mallory's keys are bob's; once the real
  log grows, alice's next key answer does not verify, and bob's head shown to her is a split view.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

from client_tui.core import ChatClient
from shared.errors import SplitView, TransparencyFailed

from .attacks import Outcome
from .key_attacks import FAST_KDF, PASSWORD, _Stage


async def plant_key(root: Path) -> Outcome:
    stage = _Stage(root, "plant-key:mallory")
    try:
        mallory = await stage.user("mallory")
        bob = await stage.user("bob")
        alice = await stage.user("alice")
        served = await alice.fetch_keys("bob")
        planted = served.wrap_kid == mallory.identity.wrap_kid
        await bob.close()
        again = ChatClient(stage.relay.url, "bob", stage.root / "clients", kdf=FAST_KDF)  # bob starts again
        stage.clients.append(again)
        await again.login(PASSWORD, "bob passphrase")
        alerts = [a for a in again.transparency.alerts if a.code == "log_key_mismatch"]
        return Outcome(
            "plant-key",
            "appended mallory's keys to its key transparency log under bob's name and served them to alice "
            "with a valid inclusion proof",
            {
                "alice": "bob's key pinned unverified (the log proof holds: the key is in the log)",
                "bob": alerts[0].message if alerts else "nothing",
            },
            attacker="the relay",
            read=None,
            held=planted and bool(alerts),
            details={"alerts": [str(a.code) for a in again.transparency.alerts]},
        )
    finally:
        await stage.close()


async def split_view(root: Path) -> Outcome:
    stage = _Stage(root, "split-view:mallory")
    try:
        mallory = await stage.user("mallory")
        bob = await stage.user("bob")
        alice = await stage.user("alice")
        served = await alice.fetch_keys("bob")
        forked = served.wrap_kid == mallory.identity.wrap_kid and not alice.transparency.alerts
        await stage.user("carol")  # the real log grows
        head = await bob.transparency.refresh()
        try:
            await alice.transparency.accept(head, seen_by="bob")  # bob's head, as gossip carries it
            split = "nothing"
        except SplitView as exc:
            split = exc.message
        try:
            await alice.fetch_keys("carol")
            next_answer = "carol's key pinned"
        except TransparencyFailed as exc:
            next_answer = f"refused ({exc.code})"
        codes = [str(a.code) for a in alice.transparency.alerts]
        return Outcome(
            "split-view",
            "showed alice alone a forked key directory in which mallory's keys are bob's, signed with its log key",
            {"alice": f"{split}; her next key answer: {next_answer}"},
            attacker="the relay",
            read=None,
            held=forked and codes == ["split_view", "consistency_proof_invalid"] and "carol" not in alice.contacts,
            details={"alerts": codes},
        )
    finally:
        await stage.close()


ATTACKS: dict[str, Callable[[Path], Awaitable[Outcome]]] = {
    "plant-key": plant_key,
    "split-view": split_view,
}
"""The key transparency attacks by name, in the order ``e2ee-demo --attacks`` runs them."""
