"""``e2ee-chat send --attach`` and ``get-attachment`` against a real relay: usage errors, refusals
named in one line (a message that carries no file, an --out that exists, a missing file), and the
progress bar drawn on standard error in place on a terminal or a line per 10 % otherwise."""

from __future__ import annotations

import dataclasses
import io
import os
from pathlib import Path

import pytest

from client_tui import cli
from client_tui.cliargs import build_parser
from client_tui.core.attachments import _check_name
from client_tui.filecommands import ProgressBar
from server.settings import Settings
from shared.attachment import blob_size, max_plaintext
from shared.errors import InvalidRequest
from tests.helpers.cli import run

MiB = 1024 * 1024


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_bar_is_a_line_per_10_percent_off_a_terminal_and_redrawn_on_one():
    out = io.StringIO()
    bar = ProgressBar("upload a.bin", out)
    for done in range(0, 10 * MiB + 1, MiB // 4):
        bar(done, 10 * MiB)
    bar.close()
    lines = out.getvalue().splitlines()
    assert [int(line.split("]")[1].split("%")[0]) for line in lines] == list(range(0, 101, 10))
    assert lines[-1] == "upload a.bin [########################] 100 %  10.0/10.0 MiB"
    term = Terminal()
    bar = ProgressBar("download \x1b[2Jb.bin", term)
    for done in (0, 1, MiB, MiB, 2 * MiB):
        bar(done, 2 * MiB)
    bar.close()
    text = term.getvalue()
    assert text.count("\r") == 3 and text.endswith("100 %  2.0/2.0 MiB\n")  # 0 %, 50 %, 100 %: once each
    assert "\x1b" not in text  # a file name is another user's text: shown harmlessly


def test_send_needs_text_or_a_file(profiles, monkeypatch, capsys):
    try:
        code = cli.main(["send", "--user", "alice", "--to", "bob"])
    except SystemExit as exc:
        code = exc.code
    assert code == 2 and "send needs --text, --attach, or both" in capsys.readouterr().err


def test_refusals_are_one_line(profiles, monkeypatch, capsys, tmp_path):
    code, _, err = run(monkeypatch, capsys, "alice", "send", "--to", "bob", "--attach", str(tmp_path / "none.pdf"))
    assert code == 1 and "none.pdf: no such file" in err
    code, out, _ = run(monkeypatch, capsys, "alice", "send", "--to", "bob", "--text", "just text")
    assert code == 0
    mid = out.split("mid=")[1].split()[0]
    code, _, err = run(monkeypatch, capsys, "bob", "get-attachment", mid, "--out", str(tmp_path / "x.bin"))
    assert code == 1 and f"message {mid} carries no file" in err and not (tmp_path / "x.bin").exists()
    (tmp_path / "kept.txt").write_text("mine")
    code, _, err = run(monkeypatch, capsys, "bob", "get-attachment", mid, "--out", str(tmp_path / "kept.txt"))
    assert code == 1 and "exists" in err and (tmp_path / "kept.txt").read_text() == "mine"
    code, _, err = run(monkeypatch, capsys, "bob", "get-attachment", "A" * 22, "--out", str(tmp_path / "y.bin"))
    assert code == 1 and "no message" in err
    assert "Traceback" not in err


def test_a_file_cannot_be_a_reply_so_reply_with_attach_is_a_usage_error(profiles, monkeypatch, capsys, tmp_path):
    (tmp_path / "a.txt").write_text("file")
    code, _, err = run(monkeypatch, capsys, "alice", "send", "--to", "bob", "--attach", str(tmp_path / "a.txt"))
    assert code == 0
    argv = ["send", "--to", "bob", "--attach", str(tmp_path / "a.txt"), "--reply", "A" * 22]
    try:
        code, _, err = run(monkeypatch, capsys, "alice", *argv)
    except SystemExit as exc:
        code, err = exc.code, capsys.readouterr().err
    assert code == 2 and "--reply and --attach cannot be combined" in err and "usage: e2ee-chat send" in err
    code, out, _ = run(monkeypatch, capsys, "alice", "tail", "--json", "-n", "5")
    assert code == 0 and out.count('"type": "attachment"') == 1  # nothing was sent by the refused command


def test_attach_says_what_the_path_is_and_which_name_to_change(profiles, monkeypatch, capsys, tmp_path):
    (tmp_path / "adir").mkdir()
    code, _, err = run(monkeypatch, capsys, "alice", "send", "--to", "bob", "--attach", str(tmp_path / "adir"))
    assert code == 1 and "adir is a folder, not a file" in err and "no such file" not in err
    code, _, err = run(monkeypatch, capsys, "alice", "send", "--to", "bob", "--attach", "/dev/null")
    assert code == 1 and "/dev/null is not a regular file (a device" in err
    bad = tmp_path / "esc\x1b[31mred\x1b[0m.txt"
    bad.write_text("x")
    code, _, err = run(monkeypatch, capsys, "alice", "send", "--to", "bob", "--attach", str(bad))
    assert code == 1 and "has control characters" in err and "rename the file" in err
    assert "esc\\x1b[31mred" in err and "\x1b" not in err and "att.name" not in err
    locked = tmp_path / "locked.txt"
    locked.write_text("x")
    locked.chmod(0)
    if os.geteuid() != 0:  # root reads any file
        code, _, err = run(monkeypatch, capsys, "alice", "send", "--to", "bob", "--attach", str(locked))
        assert code == 1 and "locked.txt: cannot be read (permission denied)" in err
    code, out, _ = run(monkeypatch, capsys, "alice", "tail", "--json", "-n", "5")
    assert code == 0 and out.count('"type": "attachment"') == 0  # nothing of the refused files reached the relay


def test_a_name_over_255_characters_is_named_with_a_rename_hint():
    with pytest.raises(InvalidRequest) as refused:
        _check_name("a" * 256 + ".txt")
    assert "longer than 255 characters" in refused.value.message and "rename the file" in refused.value.message
    _check_name("a" * 251 + ".txt")  # 255: sent


def test_the_readme_states_the_largest_file_a_default_relay_takes():
    default = next(f.default for f in dataclasses.fields(Settings) if f.name == "max_blob_bytes")
    most = max_plaintext(default)
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    assert most == 26_207_952 and f"a file of up to {most:,} bytes" in readme
    assert blob_size(most) == default and blob_size(most + 1) > default  # the largest that fits, exactly


def test_get_attachment_out_a_folder_saves_under_the_safe_name_and_creates_no_folder(
    profiles, monkeypatch, capsys, tmp_path
):
    sent = tmp_path / "sent" / "re\u202eport.txt"  # a bidi override: sendable, never part of a name written
    sent.parent.mkdir()
    sent.write_bytes(b"the report")
    code, out, err = run(monkeypatch, capsys, "alice", "send", "--to", "bob", "--attach", str(sent))
    assert code == 0, err
    mid = out.split("mid=")[1].split()[0]
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    code, out, err = run(monkeypatch, capsys, "bob", "get-attachment", mid, "--out", str(inbox))
    assert code == 0, err
    assert [p.name for p in inbox.iterdir()] == ["re_port.txt"] and (
        inbox / "re_port.txt"
    ).read_bytes() == b"the report"
    assert out.startswith(f"saved {inbox / 're_port.txt'} (10 bytes")
    code, _, err = run(monkeypatch, capsys, "bob", "get-attachment", mid, "--out", str(inbox))
    assert code == 1 and "re_port.txt exists" in err and (inbox / "re_port.txt").read_bytes() == b"the report"
    missing = tmp_path / "nodir" / "x.txt"
    code, _, err = run(monkeypatch, capsys, "bob", "get-attachment", mid, "--out", str(missing))
    assert code == 1 and f"the folder {missing.parent} does not exist" in err and not missing.parent.exists()
    usage = build_parser().subcommands["get-attachment"].format_usage()
    assert usage.rstrip().endswith(" MID") and "[MID]" not in usage
