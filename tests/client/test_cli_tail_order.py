"""``e2ee-chat tail -n N`` prints the newest N lines, oldest first, in the history's order (the
relay's seq): it printed every message the sync brought, in the order they were handled."""

from __future__ import annotations

import json

from tests.helpers.cli import run


def texts(out: str) -> list[tuple[str, int | None]]:
    return [(m["text"], m["seq"]) for m in map(json.loads, out.splitlines())]


def test_tail_n_prints_the_newest_in_seq_order(profiles, monkeypatch, capsys):
    for text in ("one", "two", "three"):
        assert run(monkeypatch, capsys, "alice", "send", "--to", "bob", "--text", text)[0] == 0
    code, out, _ = run(monkeypatch, capsys, "bob", "tail", "-n", "1", "--json")  # the first sync
    assert code == 0 and texts(out) == [("three", 3)]
    code, out, _ = run(monkeypatch, capsys, "bob", "tail", "-n", "2", "--json")  # from the history
    assert code == 0 and texts(out) == [("two", 2), ("three", 3)]
    assert run(monkeypatch, capsys, "alice", "send", "--to", "bob", "--text", "four")[0] == 0
    code, out, _ = run(monkeypatch, capsys, "bob", "tail", "-n", "3", "--json")  # both: stored, then synced
    assert code == 0 and texts(out) == [("two", 2), ("three", 3), ("four", 4)]
    code, out, _ = run(monkeypatch, capsys, "bob", "tail", "-n", "9", "--json")
    lines = list(map(json.loads, out.splitlines()))
    assert [m["text"] for m in lines][1:] == ["one", "two", "three", "four"]
    assert lines[0]["state"] == "system"  # the conversation's creation, before its first message
