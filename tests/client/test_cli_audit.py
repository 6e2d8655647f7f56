"""``e2ee-chat audit`` against a real relay: the heads held, the relay's head, the monitor's
verdict; exit 0 on an honest relay, 5 once the relay rewrote its key transparency log."""

from __future__ import annotations

import json
import sqlite3

from client_tui import auditcmd
from shared import kt
from shared.b64 import b64u_encode
from tests.helpers.cli import run


def test_audit_on_an_honest_relay_prints_the_heads_and_exits_0(profiles, monkeypatch, capsys):
    code, out, err = run(monkeypatch, capsys, "alice", "audit")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("relay http://127.0.0.1:") and lines[0].endswith("account alice")
    assert lines[1].startswith("log key: ") and len(lines[1].split(": ")[1]) == 43
    assert lines[2].startswith("held: 1 keys, root ")  # alice registered first: she saw 1 leaf
    assert lines[4].startswith("relay: 2 keys, root ")
    assert lines[5] == "consistent: the relay's log extends the held head of 1 keys"
    assert lines[6] == "monitor: 1 new keys read; yours in the log: 1, none planted under your name"
    code, out, _ = run(monkeypatch, capsys, "alice", "audit")  # the newer head is held now
    assert code == 0 and "held: 2 keys" in out and "monitor: 0 new keys read" in out


def test_audit_after_the_relay_rewrote_history_exits_5_with_the_alert(relay, profiles, monkeypatch, capsys):
    assert run(monkeypatch, capsys, "bob", "audit")[0] == 0  # bob holds the head of 2 keys
    relay.stop()
    db = sqlite3.connect(relay.data_dir / "relay.db")
    with db:
        (leaf,) = db.execute("SELECT leaf FROM kt_log WHERE idx = 0").fetchone()
        doc = kt.KeyLeaf.from_json(json.loads(leaf))
        forged = kt.KeyLeaf(doc.username, doc.counter, b64u_encode(bytes(32)), doc.sign_kid)
        db.execute("UPDATE kt_log SET leaf = ?, leaf_hash = ? WHERE idx = 0", (forged.data().decode(), forged.hash()))
    db.close()
    relay.start()
    code, out, err = run(monkeypatch, capsys, "bob", "audit")
    assert code == auditcmd.EXIT_LOG_INCONSISTENT == 5
    assert "ALERT consistency_proof_invalid: the relay is showing you now and what it showed you before" in out
    assert "does not verify (consistency_proof_invalid)" in err and "Traceback" not in err
