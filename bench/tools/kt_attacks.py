"""The key transparency attacks of ``e2ee-demo --attacks`` (docs/THREAT_MODEL.md §3, PROTOCOL.md §14),
each against a real relay process:

* ``plant-key``: the relay plants mallory's keys in its log under bob's name and serves them to alice
  with a valid proof; bob's client notices at its next start.
* ``kt-freeze``: as ``plant-key``, and bob is shown the log's head from before the plant (a freeze);
  a key answer bob gets later carries the real head, and his monitor at the next start reads up to it.
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


async def _planted(mode: str, relay_did: str, bob_learns: bool, root: Path) -> Outcome:
    """plant-key and kt-freeze: mallory's keys planted under bob's name and served to alice; bob
    starts again (after a key answer that carries the log's real head, when ``bob_learns``)."""
    stage = _Stage(root, f"{mode}:mallory")
    try:
        mallory = await stage.user("mallory")
        bob = await stage.user("bob")
        alice = await stage.user("alice")
        served = await alice.fetch_keys("bob")
        planted = served.wrap_kid == mallory.identity.wrap_kid
        shown = await bob.transparency.refresh()  # kt-freeze: the head of 3 keys, from before the plant
        if bob_learns:
            await stage.user("carol")
            await bob.fetch_keys("carol")  # a key answer carries the log's real head: bob holds it
        await bob.close()
        again = ChatClient(stage.relay.url, "bob", stage.root / "clients", kdf=FAST_KDF)  # bob starts again
        stage.clients.append(again)
        await again.login(PASSWORD, "bob passphrase")
        alerts = [a for a in again.transparency.alerts if a.code == "log_key_mismatch"]
        return Outcome(
            mode,
            relay_did,
            {
                "alice": "bob's key pinned unverified (the log proof holds: the key is in the log)",
                "bob": alerts[0].message if alerts else "nothing",
            },
            attacker="the relay",
            read=None,
            held=planted and bool(alerts) and (shown.size == 3) == bob_learns,
            details={"alerts": [str(a.code) for a in again.transparency.alerts], "shown_size": shown.size},
        )
    finally:
        await stage.close()


async def plant_key(root: Path) -> Outcome:
    return await _planted(
        "plant-key",
        "appended mallory's keys to its key transparency log under bob's name and served them to alice "
        "with a valid inclusion proof",
        False,
        root,
    )


async def kt_freeze(root: Path) -> Outcome:
    return await _planted(
        "kt-freeze",
        "planted mallory's keys under bob's name, served them to alice, and showed bob the head of its "
        "log from before the plant",
        True,
        root,
    )


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
    "kt-freeze": kt_freeze,
    "split-view": split_view,
}
"""The key transparency attacks by name, in the order ``e2ee-demo --attacks`` runs them."""
