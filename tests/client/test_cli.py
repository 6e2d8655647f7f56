"""``e2ee-chat send``, ``tail`` and ``keys`` against a real relay (headless, for scripts)."""

from __future__ import annotations

import json

from client_tui import cli
from tests.helpers.cli import run
from tests.helpers.config import PASSWORD
from tests.helpers.relays import db_count, drop_rotation_signatures


def test_send_then_tail_prints_the_decrypted_text(profiles, monkeypatch, capsys):
    code, out, _ = run(monkeypatch, capsys, "alice", "send", "--to", "bob", "--text", "hi bob \x1b[31m!")
    assert code == 0 and out.startswith("stored seq=1 ")
    conv = out.split("conversation=")[1].strip()
    code, out, _ = run(monkeypatch, capsys, "alice", "send", "--to", "bob", "--text", "second")
    assert code == 0 and f"conversation={conv}" in out  # the same conversation again
    code, out, _ = run(monkeypatch, capsys, "bob", "tail", "--json")
    lines = [json.loads(line) for line in out.splitlines()]
    assert [(m["sender"], m["text"], m["seq"]) for m in lines if m["state"] != "system"] == [
        ("alice", "hi bob \x1b[31m!", 1),
        ("alice", "second", 2),
    ]
    (created,) = [m for m in lines if m["state"] == "system"]  # who made the conversation, verified
    assert (created["sender"], created["mark"]) == ("alice", "unverified")
    assert created["text"] == "created the conversation “alice, bob” with bob · epoch 0, signature verified"
    code, out, _ = run(monkeypatch, capsys, "bob", "tail", "-n", "5")
    assert code == 0
    assert "alice: hi bob \u241b[31m!" in out  # the escape is shown harmlessly, not executed
    assert "\x1b" not in out


def test_a_key_change_blocks_send_until_accepted(profiles, relay, monkeypatch, capsys):
    assert run(monkeypatch, capsys, "alice", "send", "--to", "bob", "--text", "one")[0] == 0
    drop_rotation_signatures(relay)  # a change without a signed chain (a signed rotation is followed)
    code, out, _ = run(monkeypatch, capsys, "bob", "keys", "rotate")
    assert code == 0 and "new keys published" in out
    code, _, err = run(monkeypatch, capsys, "alice", "send", "--to", "bob", "--text", "two")
    assert code == cli.EXIT_BLOCKED and "key_change_blocked" in err and "keys show bob" in err
    code, out, _ = run(monkeypatch, capsys, "alice", "keys", "show", "bob")
    assert code == cli.EXIT_BLOCKED and "CHANGED (NOT signed by the pinned key)" in out and "new wrap" in out
    shown = out.split("new key ids: ")[1].split()[0]  # unsigned: accepted only as named
    code, out, _ = run(monkeypatch, capsys, "alice", "keys", "accept", "bob", "--compare", shown)
    assert code == 0 and "not verified" in out
    assert run(monkeypatch, capsys, "alice", "send", "--to", "bob", "--text", "two")[0] == 0
    code, out, _ = run(monkeypatch, capsys, "bob", "tail", "--json")
    lines = [json.loads(line) for line in out.splitlines()]
    assert [m["text"] for m in lines if m["state"] != "system"] == ["one", "two"]
    assert [m["text"] for m in lines if m["state"] == "system"][
        -1
    ] == "moved to new keys in this conversation (signed with their previous key) · epoch 1, signature verified"


def test_wrong_passphrase_is_a_clean_error(profiles, monkeypatch, capsys):
    monkeypatch.setenv("E2EE_PASSWORD", PASSWORD)
    monkeypatch.setenv("E2EE_PASSPHRASE", "wrong")
    code = cli.main(["tail", "--user", "alice"])
    err = capsys.readouterr().err
    assert code == cli.EXIT_FAILED and "wrong passphrase" in err and "Traceback" not in err


def test_keys_export_and_import(profiles, monkeypatch, capsys, tmp_path):
    out_file = tmp_path / "alice.keys"
    code, out, _ = run(monkeypatch, capsys, "alice", "keys", "export", "--file", str(out_file))
    assert code == 0 and out_file.exists()
    monkeypatch.setenv("E2EE_PROFILE", str(tmp_path / "other-machine"))
    code, out, _ = run(monkeypatch, capsys, "alice", "keys", "import", "--file", str(out_file))
    assert code == 0 and "imported" in out
    assert run(monkeypatch, capsys, "alice", "send", "--to", "bob", "--text", "from the new machine")[0] == 0


def test_the_interactive_usage_still_parses():
    args = cli.build_parser().parse_args(["--user", "alice", "--register", "--with", "bob,carol"])
    assert (args.command, args.user, args.register, args.with_) == (None, "alice", True, ["bob", "carol"])
    args = cli.build_parser().parse_args(["--user", "alice", "send", "--to", "bob", "--text", "x"])
    assert (args.command, args.user, args.to) == ("send", "alice", ["bob"])


def test_commands_that_only_look_never_rotate_keys_but_send_does(profiles, relay, monkeypatch, capsys):
    """With keys overdue, ``keys show``, ``audit`` and ``search`` rotated them as a side effect of
    looking (a new key pair, a log entry, an update in every conversation), behind the user's back
    (newcomer trial F3). They only look now; ``send`` runs the schedule."""

    def published() -> int:
        return db_count(relay, "SELECT count(*) FROM user_keys JOIN users ON users.id = user_keys.user_id "
                        "WHERE users.username = 'bob'")  # fmt: skip

    monkeypatch.setenv("E2EE_KEY_LIFETIME_DAYS", "0.000001")  # 86 ms: overdue at once
    assert published() == 1
    for argv in (("keys", "show"), ("audit",), ("search", "x")):
        code, _, err = run(monkeypatch, capsys, "bob", *argv)
        assert code in (0, 1) and "Traceback" not in err, (argv, err)
        assert published() == 1, argv
    assert run(monkeypatch, capsys, "bob", "send", "--to", "alice", "--text", "hi")[0] == 0
    assert published() == 2  # the schedule ran: bob's keys were older than their lifetime
