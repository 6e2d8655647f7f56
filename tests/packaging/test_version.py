"""``--version`` on every command prints the installed distribution's version (its metadata)."""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points, version

import pytest

import shared

COMMANDS = ("e2ee-relay", "e2ee-chat", "e2ee-demo", "e2ee-bench")


def test_version_comes_from_the_distribution_metadata():
    assert shared.__version__ == version("e2ee-chat")
    for package in ("server", "client_tui", "bench"):
        assert importlib.import_module(package).__version__ == shared.__version__


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_prints_its_version(command, capsys):
    (script,) = [ep for ep in entry_points(group="console_scripts") if ep.name == command]
    with pytest.raises(SystemExit) as exit_:
        script.load()(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out == f"{command} {version('e2ee-chat')}\n"
