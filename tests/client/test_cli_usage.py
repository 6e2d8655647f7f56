"""``e2ee-chat`` as a user meets it: --user from E2EE_USER or the only account, usage errors of
the sub-command, tail/keys show/search without the relay, ``register`` for scripts, one-line
errors without class names, and Ctrl+C / Ctrl+D ending quietly with status 130."""

from __future__ import annotations

import getpass
import os
import signal
import subprocess
import sys

import pytest

from client_tui import cli
from client_tui.core import profiles
from tests.helpers.cli import register
from tests.helpers.config import FAST_RELAY_ENV, PASSWORD


@pytest.fixture
def home(relay, tmp_path, monkeypatch):
    root = tmp_path / "profiles"
    monkeypatch.setenv("E2EE_SERVER", relay.url)
    monkeypatch.setenv("E2EE_PROFILE", str(root))
    monkeypatch.delenv("E2EE_USER", raising=False)
    monkeypatch.setenv("E2EE_PASSWORD", PASSWORD)
    return root


def as_user(monkeypatch, user: str) -> None:
    monkeypatch.setenv("E2EE_PASSPHRASE", f"{user} passphrase")


def test_keys_show_takes_the_user_from_e2ee_user_or_the_only_account(home, relay, monkeypatch, capsys):
    register(relay, home, "alice")
    as_user(monkeypatch, "alice")
    assert cli.main(["keys", "show", "alice"]) == 0  # the only account: no --user needed
    assert "alice: verified" in capsys.readouterr().out
    register(relay, home, "bob")
    with pytest.raises(SystemExit) as usage:
        cli.main(["keys", "show", "bob"])
    err = capsys.readouterr().err
    assert usage.value.code == cli.EXIT_USAGE and "usage: e2ee-chat keys" in err and "E2EE_USER" in err
    assert "2 accounts for" in err and "(alice, bob)" in err
    monkeypatch.setenv("E2EE_USER", "alice")
    code = cli.main(["keys", "show", "bob"])  # the README's line
    out = capsys.readouterr().out
    assert code == 0 and "bob: not verified" in out and "safety number with alice" in out


def test_sub_command_errors_show_that_sub_command_s_usage(home, capsys):
    with pytest.raises(SystemExit) as usage:
        cli.main(["send", "--user", "alice", "--to", "bob"])
    err = capsys.readouterr().err
    assert usage.value.code == 2 and err.startswith("usage: e2ee-chat send") and "--text" in err
    with pytest.raises(SystemExit):
        cli.main(["keys", "export", "--user", "alice"])
    err = capsys.readouterr().err
    assert err.startswith("usage: e2ee-chat keys") and "keys export needs --file" in err


def test_tail_and_keys_show_work_offline_from_what_is_stored(home, relay, monkeypatch, capsys):
    register(relay, home, "alice", "bob")
    as_user(monkeypatch, "alice")
    assert cli.main(["send", "--user", "alice", "--to", "bob", "--text", "before the outage"]) == 0
    as_user(monkeypatch, "bob")
    assert cli.main(["tail", "--user", "bob"]) == 0
    capsys.readouterr()
    relay.stop()
    code = cli.main(["tail", "--user", "bob"])
    out, err = capsys.readouterr()
    assert code == 0 and "alice: before the outage" in out
    assert err.startswith("e2ee-chat: offline: nothing answers at 127.0.0.1") and "stored on this machine" in err
    code = cli.main(["keys", "show", "alice", "--user", "bob"])
    out, err = capsys.readouterr()
    assert code == 0 and "alice: not verified (pinned here)" in out and "offline" in err
    code = cli.main(["send", "--user", "bob", "--to", "alice", "--text", "x"])  # sending needs the relay
    err = capsys.readouterr().err
    assert code == cli.EXIT_FAILED and err.count("\n") == 1 and "nothing answers at" in err
    assert "Error" not in err and "Traceback" not in err


def test_search_finds_decrypted_history_without_the_relay_and_writes_no_index(home, relay, monkeypatch, capsys):
    register(relay, home, "alice", "bob")
    as_user(monkeypatch, "alice")
    for text in ("the launch is on Tuesday", "lunch at noon?", "Straße closed: take the ﬁrst left"):
        assert cli.main(["send", "--user", "alice", "--to", "bob", "--text", text]) == 0
    as_user(monkeypatch, "bob")
    assert cli.main(["tail", "--user", "bob"]) == 0
    relay.stop()
    capsys.readouterr()
    assert cli.main(["search", "--user", "bob", "LAUNCH tuesday"]) == 0
    assert capsys.readouterr().out.count("alice: the launch is on Tuesday") == 1
    assert cli.main(["search", "--user", "bob", '"first left"', "--json"]) == 0  # ﬁ is fi
    assert '"text": "Straße closed: take the ﬁrst left"' in capsys.readouterr().out
    assert cli.main(["search", "--user", "bob", "tuesday noon"]) == cli.EXIT_FAILED  # all words must occur
    assert "no message matches" in capsys.readouterr().err
    for path in home.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            for secret in (b"launch", b"Tuesday", b"noon"):
                assert secret not in data, path  # no plaintext index, no plaintext anywhere on disk


def test_register_asks_both_secrets_twice_for_scripts_too(home, relay, monkeypatch, capsys):
    monkeypatch.delenv("E2EE_PASSWORD")
    monkeypatch.delenv("E2EE_PASSPHRASE", raising=False)
    typed = iter(
        [
            PASSWORD,
            PASSWORD + "typo",
            PASSWORD,
            PASSWORD,  # passwords differ: asked again
            "short",
            "dora's passphrase",
            "dora's passphrase",
        ]
    )  # too short: asked again
    monkeypatch.setattr(getpass, "getpass", lambda prompt="": next(typed))
    assert cli.main(["register", "--user", "dora", "--bits", "2048"]) == 0
    out, err = capsys.readouterr()
    assert "registered dora" in out and "the two passwords differ; try again" in err
    assert "at least 8 characters; try again" in err and "strength:" in err
    monkeypatch.setenv("E2EE_PASSWORD", PASSWORD)
    monkeypatch.setenv("E2EE_PASSPHRASE", "short")  # from the environment: checked, not asked
    assert cli.main(["register", "--user", "erin", "--bits", "2048"]) == cli.EXIT_FAILED
    assert "E2EE_PASSPHRASE: the passphrase needs at least 8 characters" in capsys.readouterr().err


@pytest.mark.parametrize("key", [KeyboardInterrupt, EOFError], ids=["ctrl-c", "ctrl-d"])
@pytest.mark.parametrize(
    "argv",
    [["send", "--to", "bob", "--text", "x"], ["tail"], ["search", "x"], ["register"], ["keys", "show"]],
    ids=lambda a: a[0],
)
@pytest.mark.process  # e2ee-chat in a terminal, its exit code
def test_ctrl_c_or_ctrl_d_at_a_prompt_exits_130_quietly(home, relay, monkeypatch, capsys, key, argv):
    folder = profiles.profile_dir(home, relay.url, "alice")  # a keystore is there: the secrets are asked
    folder.mkdir(parents=True)
    (folder / "keystore.json").write_text("{}")
    monkeypatch.delenv("E2EE_PASSWORD")
    monkeypatch.delenv("E2EE_PASSPHRASE", raising=False)

    def pressed(prompt=""):
        raise key

    monkeypatch.setattr(getpass, "getpass", pressed)
    assert cli.main([*argv[:1], "--user", "alice", *argv[1:]]) == 130
    err = capsys.readouterr().err
    assert "Traceback" not in err and "Error" not in err


def _interrupt_after(args: list[str], ready: str, env: dict) -> tuple[int, str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, **env},
        text=True,
    )
    try:
        for out_line in proc.stdout:
            if ready in out_line:
                break
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, err


@pytest.mark.process  # e2ee-chat tail --follow as a process, interrupted
def test_ctrl_c_ends_tail_follow_at_once_quietly(home, relay, monkeypatch):
    register(relay, home, "alice", "bob")
    as_user(monkeypatch, "alice")
    assert cli.main(["send", "--user", "alice", "--to", "bob", "--text", "first"]) == 0
    code, err = _interrupt_after(
        ["client_tui.cli", "tail", "--user", "bob", "--follow"], "alice: first", {"E2EE_PASSPHRASE": "bob passphrase"}
    )
    assert code == 130 and "Traceback" not in err


@pytest.mark.process  # e2ee-demo's processes
def test_ctrl_c_ends_the_demo_quietly(tmp_path):
    code, err = _interrupt_after(
        ["bench.tools.demo", "--level", "4", "--data-dir", str(tmp_path)], "data folder", FAST_RELAY_ENV
    )
    assert code == 130 and "Traceback" not in err and "interrupted" in err


@pytest.mark.parametrize(
    "argv",
    [
        ["--user", "nobody"],
        ["send", "--user", "nobody", "--to", "bob", "--text", "x"],
        ["tail", "--user", "nobody"],
        ["keys", "show", "--user", "nobody"],
    ],
)
def test_a_user_without_keys_here_is_told_before_any_secret_is_asked(home, relay, monkeypatch, capsys, argv):
    register(relay, home, "alice")
    monkeypatch.delenv("E2EE_PASSWORD")
    monkeypatch.delenv("E2EE_PASSPHRASE", raising=False)

    def asked(prompt: str = "") -> str:
        raise AssertionError(f"asked {prompt!r} for an account that has no keys here")

    monkeypatch.setattr(getpass, "getpass", asked)
    assert cli.main(argv) == cli.EXIT_FAILED
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"no keys for nobody at {relay.url} on this machine" in err, err


class _CtrlCWhileImporting:
    """A meta path finder that raises KeyboardInterrupt when ``client_tui.cli`` is imported, as a
    Ctrl+C in the first seconds of ``e2ee-chat`` does."""

    def find_spec(self, name, path=None, target=None):
        if name == "client_tui.cli":
            raise KeyboardInterrupt
        return None


def test_ctrl_c_while_the_client_is_imported_exits_130_quietly(monkeypatch, capsys):
    from client_tui import cliargs

    monkeypatch.delitem(sys.modules, "client_tui.cli")
    monkeypatch.delattr("client_tui.cli", raising=False)
    monkeypatch.setattr(sys, "meta_path", [_CtrlCWhileImporting(), *sys.meta_path])
    assert cliargs.main(["tail", "--user", "alice"]) == 130
    err = capsys.readouterr().err
    assert err.strip() == "" and "Traceback" not in err


def test_tail_marks_a_reply_with_its_quote_and_says_when_it_is_offline(home, relay, monkeypatch, capsys):
    register(relay, home, "alice", "bob")
    as_user(monkeypatch, "alice")
    assert cli.main(["send", "--user", "alice", "--to", "bob", "--text", "launch on friday?"]) == 0
    mid = capsys.readouterr().out.split("mid=")[1].split()[0]
    as_user(monkeypatch, "bob")
    assert cli.main(["send", "--user", "bob", "--to", "alice", "--reply", mid, "--text", "agreed"]) == 0
    capsys.readouterr()
    as_user(monkeypatch, "alice")
    assert cli.main(["tail", "--user", "alice"]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines()[-1].endswith("  bob: [↪ alice: launch on friday?] agreed") and "offline" not in err
    relay.stop()
    assert cli.main(["tail", "--user", "alice"]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines()[-1].endswith("  bob: [↪ alice: launch on friday?] agreed")
    assert "offline" in err and "showing what is stored on this machine" in err
