"""``e2ee-chat audit`` against a real relay: the heads held, the relay's head, the monitor's
verdict; exit 0 on an honest relay, 5 once the relay rewrote its key transparency log."""

from __future__ import annotations

import json
import sqlite3

import pytest

from client_tui import auditcmd
from client_tui.core.errors import ClientError
from shared import kt
from shared.b64 import b64u_encode
from tests.helpers.cli import run
from tests.helpers.lying import lie


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
    code, out, err = run(monkeypatch, capsys, "bob", "audit")  # the two signed heads were kept
    assert code == 5 and "evidence (shown by the relay): held: 2 keys, root " in out
    assert "; shown: 2 keys, root " in out


@pytest.mark.parametrize("path", ["/v1/kt/head", "/v1/kt/entries"])
def test_audit_when_the_relay_refuses_its_log_to_one_user_exits_5(profiles, monkeypatch, capsys, path):
    """A relay that answers the log's routes with errors to alice alone: her audit says so and
    fails, instead of a plain error (the monitor cannot look for keys planted under her name)."""
    real = auditcmd.client_for

    def refusing(args):
        client = real(args)

        def rewrite(method, p, body, answer):
            if p.split("?")[0] == path:
                raise ClientError("no", code="internal", status=500)
            return answer

        lie(client, rewrite)
        return client

    monkeypatch.setattr(auditcmd, "client_for", refusing)
    code, out, err = run(monkeypatch, capsys, "alice", "audit")
    assert code == auditcmd.EXIT_LOG_INCONSISTENT, err
    assert "ALERT consistency_proof_invalid: the relay refused to show your client" in out
    assert "(internal)" in out and "Traceback" not in err


def test_audit_lists_the_heads_others_showed_that_the_relay_has_not_proven(profiles, monkeypatch, capsys):
    assert run(monkeypatch, capsys, "alice", "audit")[0] == 0  # alice holds the head of 2 keys
    (state_path,) = profiles.rglob("alice/kt-head.json")
    state = json.loads(state_path.read_text())
    state["unproven"] = [{"head": state["head"], "by": "bob", "tries": 2}]  # kept from bob's message
    state_path.write_text(json.dumps(state))
    code, out, err = run(monkeypatch, capsys, "alice", "audit")
    assert code == 0, err
    assert "unproven: a head of 2 keys bob showed you, asked 2 time(s)" in out
    assert "still unproven" not in out  # the relay proved it now: settled
    assert json.loads(state_path.read_text())["unproven"] == []
