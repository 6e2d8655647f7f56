"""``e2ee-chat send --attach`` and ``get-attachment`` against a real relay: usage errors, refusals
named in one line (a message that carries no file, an --out that exists, a missing file), and the
progress bar drawn on standard error in place on a terminal or a line per 10 % otherwise."""

from __future__ import annotations

import io

from client_tui import cli
from client_tui.filecommands import ProgressBar
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
