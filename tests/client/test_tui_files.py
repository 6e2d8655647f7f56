"""Files in the chat window against a real in-process relay (issue 16), at 80×24 and 120×40:
alice types ``/attach PATH caption``, bob's window shows the attachment row (its name, a markup
string, drawn literally), Ctrl+S saves it bit-exact (SHA-256 equal, 0600, never over an existing
file), Ctrl+O hands a verified copy to the opener (a small script named by ``E2EE_OPENER``) and
removes it when the opener exits; a missing path and a folder are one-line notices."""

from __future__ import annotations

import hashlib
import os
import stat
import sys
from pathlib import Path

import pytest

from client_tui.app import ChatApp
from client_tui.chatfiles import SaveDialog, parse_attach, safe_name
from client_tui.msgdialogs import MessageActions
from tests.helpers.clients import messages_of, wait_until
from tests.helpers.tui import alive, chat_shown, screen_ready, screen_text

SIZES = [(80, 24), (120, 40)]
NAME = "[bold]boom [@click=app.quit]q.txt"


def notices(app) -> str:
    return "\n".join(str(n.message) for n in app._notifications)


@pytest.mark.parametrize("size", SIZES, ids=["80x24", "120x40"])
async def test_a_file_attached_in_the_tui_is_saved_and_opened_bit_exact(make_client, tmp_path, monkeypatch, size):
    alice, bob = await make_client("alice"), await make_client("bob")
    cid = await alice.create_conversation("files", ["bob"])
    data = os.urandom(300 * 1024)
    src = tmp_path / "src" / NAME
    src.parent.mkdir()
    src.write_bytes(data)
    digest = hashlib.sha256(data).hexdigest()
    async with ChatApp(alice, cid).run_test(size=size, notifications=True) as pilot:
        app = pilot.app
        await wait_until(lambda: chat_shown(app) and alice.state == "online")
        composer = app.chat.query_one("#composer")
        for typed, notice in ((f"/attach {tmp_path / 'nope.bin'}", "no such file"), (f"/attach {tmp_path}", "folder")):
            composer.text = typed
            await pilot.press("enter")
            await wait_until(lambda n=notice: n in notices(app))
            assert composer.text == typed  # given back, nothing sent
        composer.text = ""
        await pilot.press("ctrl+t")
        assert composer.text == "/attach "
        composer.text = f"/attach '{src}' the notes"
        await pilot.press("enter")
        await wait_until(lambda: f"sent {NAME}" in notices(app), timeout=30)
        assert alive(app)
    downloads, opened = tmp_path / "downloads", tmp_path / "opened.txt"
    downloads.mkdir()
    (downloads / safe_name(NAME)).write_bytes(b"already here")
    script = tmp_path / "opener.py"
    script.write_text(
        "import hashlib, os, stat, sys\n"
        "p = sys.argv[1]\n"
        f"open({str(opened)!r}, 'w').write(p + ' ' + oct(stat.S_IMODE(os.stat(p).st_mode)) + ' '"
        " + hashlib.sha256(open(p, 'rb').read()).hexdigest())\n"
    )
    monkeypatch.setenv("E2EE_DOWNLOADS", str(downloads))
    monkeypatch.setenv("E2EE_OPENER", f"{sys.executable} {script}")
    async with ChatApp(bob, cid).run_test(size=size, notifications=True) as pilot:
        app = pilot.app
        await wait_until(lambda: chat_shown(app) and "📎" in screen_text(app), timeout=30)
        await wait_until(lambda: "the notes" in screen_text(app))
        assert "📎 [bold]boom [@click=app.quit]" in screen_text(app)  # drawn as typed, never markup
        (rec,) = [r for r in await messages_of(bob, cid) if r.content.t == "attachment"]
        assert (rec.text, rec.content.att["name"], rec.content.att["size"]) == ("the notes", NAME, len(data))
        if size == SIZES[0]:
            await pilot.press("ctrl+s")
        else:  # F4's menu offers the same on a message with a file
            await pilot.press("f4")
            await wait_until(lambda: screen_ready(app, MessageActions))
            await pilot.press("s")
        await wait_until(lambda: screen_ready(app, SaveDialog, "#save-folder"))
        await pilot.press("enter")
        saved = downloads / f"{safe_name(NAME)[:-4]} (1).txt"
        await wait_until(lambda: "saved" in notices(app), timeout=30)
        assert hashlib.sha256(saved.read_bytes()).hexdigest() == digest
        assert stat.S_IMODE(saved.stat().st_mode) == 0o600
        assert (downloads / safe_name(NAME)).read_bytes() == b"already here"  # never overwritten
        await pilot.press("ctrl+o")
        await wait_until(lambda: opened.exists() and opened.read_text().count(" ") >= 2, timeout=30)
        path, mode, got = opened.read_text().rsplit(" ", 2)
        assert (mode, got) == ("0o600", digest)
        await wait_until(lambda: not os.path.exists(path) and not os.path.exists(os.path.dirname(path)))
        assert alive(app) and "/" not in os.path.basename(path)
        # an opener still running when the app exits: its copy goes with the app
        script.write_text(
            f"import sys, time\nopen({str(opened)!r}, 'w').write(sys.argv[1] + ' waiting')\ntime.sleep(60)\n"
        )
        opened.unlink()
        await pilot.press("ctrl+o")
        await wait_until(lambda: opened.exists() and opened.read_text().endswith(" waiting"), timeout=30)
        waiting = opened.read_text().rsplit(" ", 1)[0]
        assert os.path.exists(waiting)
    assert not os.path.exists(waiting) and not os.path.exists(os.path.dirname(waiting))


def test_file_names_from_others_never_leave_their_folder_or_hide():
    assert safe_name("../../etc/passwd") == "_.._etc_passwd"
    assert safe_name("..") == "file" and safe_name("") == "file" and safe_name(".bashrc") == "bashrc"
    assert safe_name("a\\b\x00c\x1b[31m\u202eexe.txt") == "a_b_c_[31m_exe.txt"
    long = safe_name("x" * 300 + ".pdf")
    assert len(long) == 120 and long.endswith(".pdf")
    assert parse_attach("/attach '~/my file.txt' the caption\nmore") == (
        Path("~/my file.txt").expanduser(),
        "the caption\nmore",
    )


@pytest.mark.parametrize("size", SIZES, ids=["80x24", "120x40"])
async def test_over_the_relays_limit_or_quota_is_a_one_line_notice(tmp_path, make_client, size):
    from tests.helpers.relays import start_relay

    mib = 1024 * 1024
    relay = start_relay(
        tmp_path / "small", env={"E2EE_MAX_BLOB_BYTES": str(mib), "E2EE_BLOB_QUOTA_BYTES": str(2 * mib)}
    )
    try:
        alice, _ = await make_client("alice", url=relay.url), await make_client("bob", url=relay.url)
        cid = await alice.create_conversation("files", ["bob"])
        (tmp_path / "big.bin").write_bytes(os.urandom(2 * mib))
        (tmp_path / "part.bin").write_bytes(os.urandom(900 * 1024))
        async with ChatApp(alice, cid).run_test(size=size, notifications=True) as pilot:
            app = pilot.app
            await wait_until(lambda: chat_shown(app) and alice.state == "online")
            composer = app.chat.query_one("#composer")
            composer.text = f"/attach {tmp_path / 'big.bin'}"
            await pilot.press("enter")
            await wait_until(lambda: "up to" in notices(app), timeout=30)
            assert [n.title for n in app._notifications] == ["blob_too_large"]
            for _ in range(3):
                before = len(app._notifications)
                composer.text = f"/attach {tmp_path / 'part.bin'}"
                await pilot.press("enter")
                await wait_until(lambda n=before: len(app._notifications) > n, timeout=30)
            titles = [n.title for n in app._notifications]
            assert titles.count("file") == 2 and titles[-1] == "quota_exceeded", titles
            assert all("\n" not in str(n.message) for n in app._notifications) and alive(app)
    finally:
        relay.stop()


def test_the_opener_is_the_setting_else_one_on_path_else_none(tmp_path, monkeypatch):
    from client_tui.chatfiles import opener

    monkeypatch.setenv("E2EE_OPENER", "viewer --new-window")
    assert opener() == ["viewer", "--new-window"]
    monkeypatch.delenv("E2EE_OPENER")
    monkeypatch.setenv("PATH", str(tmp_path))
    assert opener() is None  # the chat window then says so and offers Ctrl+S
    (tmp_path / "xdg-open").write_text("#!/bin/sh\n")
    (tmp_path / "xdg-open").chmod(0o755)
    assert opener() == [str(tmp_path / "xdg-open")]
