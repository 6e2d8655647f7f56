"""``e2ee-chat send --reply``, ``edit``, ``delete``, ``react`` and ``expire`` against a real relay,
and what ``tail --json`` prints of each message: its type, refs, reactions, edits."""

from __future__ import annotations

import json

from tests.helpers.cli import run


def tail(monkeypatch, capsys, user: str) -> list[dict]:
    code, out, _ = run(monkeypatch, capsys, user, "tail", "--json", "-n", "50")
    assert code == 0
    return [m for m in (json.loads(line) for line in out.splitlines()) if m["state"] != "system"]


def stored(out: str) -> dict[str, str]:
    """``stored seq=N mid=M conversation=C`` as a dict."""
    assert out.startswith("stored "), out
    return dict(part.split("=", 1) for part in out.split()[1:])


def test_reply_edit_react_delete_and_tail_json(profiles, monkeypatch, capsys):
    code, out, _ = run(monkeypatch, capsys, "alice", "send", "--to", "bob", "--text", "first draft")
    assert code == 0
    first = stored(out)
    code, out, _ = run(monkeypatch, capsys, "bob", "send", "--to", "alice", "--reply", first["mid"], "--text", "ok")
    assert code == 0
    reply = stored(out)
    assert reply["conversation"] == first["conversation"]
    code, out, _ = run(monkeypatch, capsys, "alice", "edit", first["mid"], "--text", "final text")
    assert code == 0 and stored(out)["conversation"] == first["conversation"]
    code, out, _ = run(monkeypatch, capsys, "bob", "react", first["mid"], "👍")
    assert code == 0
    shown = {m["mid"]: m for m in tail(monkeypatch, capsys, "bob")}
    assert list(shown) == [first["mid"], reply["mid"]]  # the edit and the reaction are no messages
    msg = shown[first["mid"]]
    assert (msg["type"], msg["text"], msg["reactions"]) == ("text", "final text", {"👍": ["bob"]})
    assert [e["text"] for e in msg["edits"]] == ["first draft"] and msg["edited_at_ms"] >= msg["sent_at_ms"]
    assert (shown[reply["mid"]]["type"], shown[reply["mid"]]["ref"]) == ("reply", first["mid"])
    code, out, _ = run(monkeypatch, capsys, "bob", "react", first["mid"], "👍", "--off")
    assert code == 0
    code, out, _ = run(monkeypatch, capsys, "alice", "delete", first["mid"])
    assert code == 0
    for user in ("alice", "bob"):
        assert [m["mid"] for m in tail(monkeypatch, capsys, user)] == [reply["mid"]]
    code, out, _ = run(monkeypatch, capsys, "bob", "tail", "-n", "5")
    assert "alice: final text" not in out and "bob: ↪" not in out


def test_only_the_author_may_edit_or_delete_from_the_command_line(profiles, monkeypatch, capsys):
    code, out, _ = run(monkeypatch, capsys, "alice", "send", "--to", "bob", "--text", "mine")
    first = stored(out)
    for argv in (("edit", first["mid"], "--text", "bob's"), ("delete", first["mid"])):
        code, out, err = run(monkeypatch, capsys, "bob", *argv)
        assert (code, out) == (1, "") and "not_author" in err and "alice wrote" in err
    code, _, err = run(monkeypatch, capsys, "bob", "react", "A" * 22, "👍")
    assert code == 1 and "unknown_reference" in err
    code, _, err = run(monkeypatch, capsys, "bob", "react", first["mid"], "two words")
    assert code == 1 and "content_invalid" in err
    assert [m["text"] for m in tail(monkeypatch, capsys, "bob")] == ["mine"]


def test_expire_sets_the_timer_for_everyone(profiles, monkeypatch, capsys):
    code, out, _ = run(monkeypatch, capsys, "alice", "expire", "--to", "bob", "3600")
    assert code == 0
    code, out, _ = run(monkeypatch, capsys, "alice", "send", "--to", "bob", "--text", "for an hour")
    sent = stored(out)
    lines = tail(monkeypatch, capsys, "bob")
    assert [(m["type"], m.get("timer_s")) for m in lines] == [("expire", 3600), ("text", None)]
    (msg,) = [m for m in lines if m["mid"] == sent["mid"]]
    assert msg["expires_at_ms"] == msg["sent_at_ms"] + 3_600_000
    code, out, _ = run(monkeypatch, capsys, "bob", "tail", "-n", "5")
    assert "alice set disappearing messages to 1 h" in out
