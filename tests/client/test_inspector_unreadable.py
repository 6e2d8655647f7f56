"""A hostile relay delivers a "message" whose envelope is JSON of any shape: it is stored as
unreadable with its raw bytes, and the inspector shows what it can and says what is malformed,
never raising into the TUI (attacker F10)."""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console

from client_tui.inspector import inspect_record

SHAPES = [
    {"recipients": [{"header": []}]},
    {"recipients": [{"header": {"kid": {"x": 1}}}]},
    {"recipients": [{"header": "kid"}]},
    {"recipients": [1, None, {"header": {"kid": "k1"}}], "protected": "W1tbXV1d"},
    {"recipients": {"header": {"kid": "k1"}}, "ciphertext": 7},
]


def shown(renderable) -> str:
    console = Console(width=100, record=True, file=io.StringIO())
    console.print(renderable)
    return console.export_text()


@pytest.mark.parametrize("doc", SHAPES)
async def test_inspecting_an_unreadable_envelope_of_any_shape_never_raises(offline_bob, doc):
    bob, relay = offline_bob
    await relay.deliver(json.dumps(doc).encode(), sender="alice")
    rec = next(r for r in await bob.history.recent("conv-1") if r.state == "unreadable")
    assert rec.envelope is not None
    text = shown(inspect_record(rec, kid_names={"k1": "bob"}, me="bob"))
    assert "What the relay stored" in text
    if isinstance(doc["recipients"], list):
        assert "malformed" in text
    if doc["recipients"] and isinstance(doc["recipients"], list) and len(doc["recipients"]) == 3:
        assert "bob (you)" in text


@pytest.mark.parametrize("raw", [b"[" * 100_000, b"[" * 900 + b"]" * 900, b"\xff\xfe"])
async def test_inspecting_deep_or_binary_envelope_never_raises(offline_bob, raw):
    bob, relay = offline_bob
    await relay.deliver(raw, sender="alice")
    rec = next(r for r in await bob.history.recent("conv-1") if r.state == "unreadable")
    assert "What the relay stored" in shown(inspect_record(rec, kid_names={}, me="bob"))
