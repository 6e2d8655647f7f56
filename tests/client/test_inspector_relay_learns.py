"""The inspector says in words what the relay learns from an envelope and what stays inside the
ciphertext since protocol v3; a hostile relay's header strings are drawn as text."""

from __future__ import annotations

from client_tui.inspector import relay_learns
from shared.b64 import b64u_encode


def test_what_the_relay_learns_is_listed_with_the_bucket_and_the_expiry_hour():
    header = {"snd": "alice", "cid": "conv-1", "xp": 1_800_000_000_000 // 3_600_000 * 3_600_000 + 3_600_000}
    doc = {"ciphertext": b64u_encode(bytes(256))}
    text = relay_learns(header, doc, 3).plain
    assert "the relay learns: sender alice, conversation conv-1, 3 recipient key(s), a 256-byte padded bucket" in text
    assert "an expiry hour (2027-01-15 09:00 UTC)" in text
    assert "not: whether it is a message, an edit, a reaction, a receipt or a file" in text


def test_a_header_without_expiry_and_with_markup_is_shown_as_text():
    text = relay_learns({"snd": "[b]mallory[/b]", "cid": "c", "xp": 0}, {}, 1)
    assert "sender [b]mallory[/b]" in text.plain and "expiry" not in text.plain
