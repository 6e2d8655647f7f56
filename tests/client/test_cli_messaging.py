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
