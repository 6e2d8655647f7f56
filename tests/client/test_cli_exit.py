"""An app that crashes must not exit 0: scripts and shells judge the client by its status."""

from __future__ import annotations

from client_tui import cli
from client_tui.app import ChatApp


class Crashing(ChatApp):
    def on_mount(self) -> None:
        super().on_mount()
        self.call_later(self.crash)

    def crash(self) -> None:
        raise RuntimeError("boom")


def test_a_crashing_app_exits_non_zero(tmp_path, capsys):
    app = Crashing(server="http://127.0.0.1:9", profile_root=tmp_path)
    assert cli.run_app(app, headless=True) == 1
    assert isinstance(app._exception, RuntimeError)  # it crashed for the reason the test gave it


def test_an_app_that_quits_exits_zero(tmp_path):
    class Quits(ChatApp):
        def on_mount(self) -> None:
            self.call_later(self.exit)

    assert cli.run_app(Quits(server="http://127.0.0.1:9", profile_root=tmp_path), headless=True) == 0
