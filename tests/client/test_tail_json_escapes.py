"""``tail --json`` / ``search --json`` carry another user's exact text, but never a raw character a
terminal acts on or that reorders or splits lines: DEL, C1 controls, bidi embeddings/overrides/
isolates, U+2028/U+2029 are written as ``\\uXXXX`` escapes (attacker F7)."""

from __future__ import annotations

import json

from client_tui.commands import json_line, line

EVIL = "ok\x9b2J\x9d0;pwned\x07\u202eexe.txt\u2028\x7f\u2066\u2029\x1b[2J é 👍"
UNSAFE = {chr(c) for c in range(0x7F, 0xA0)} | set("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u2028\u2029")


def raw_controls(text: str) -> list[str]:
    return [f"U+{ord(ch):04X}" for ch in text if ch in UNSAFE or ord(ch) < 0x20]


def test_json_line_escapes_and_round_trips():
    out = json_line({"text": EVIL, "title": "t\u202e"})
    assert raw_controls(out) == []
    assert "\\u009b" in out and "\\u202e" in out and "\\u2028" in out and "\\u007f" in out
    assert "é 👍" in out  # other non-ASCII text stays readable
    assert json.loads(out) == {"text": EVIL, "title": "t\u202e"}


async def test_tail_json_has_no_raw_c1_or_bidi_controls(offline_bob):
    bob, relay = offline_bob
    await relay.deliver(relay.seal("alice", EVIL), sender="alice")
    rec = next(r for r in await bob.history.recent("conv-1") if r.sender == "alice")
    out = line(bob, rec, True)
    assert raw_controls(out) == []
    assert json.loads(out)["text"] == EVIL
    assert not [ch for ch in line(bob, rec, False) if ch in UNSAFE]
