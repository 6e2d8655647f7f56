"""Each command on an install without some extras: ``--help`` and ``--version`` still work, and a
command whose extra is missing prints one line naming it and exits 2 (never a traceback).

An install without an extra is imitated in a subprocess whose import system refuses that extra's
modules (a meta-path finder raising ModuleNotFoundError, as a missing package does): no new venv.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from importlib.metadata import entry_points, packages_distributions, version
from pathlib import Path

import pytest

from shared.extras import MODULES

ROOT = Path(__file__).resolve().parents[2]
VERSION = version("e2ee-chat")
_RUN = """
import importlib.abc, sys
from importlib.metadata import entry_points

BLOCKED = set(sys.argv[1].split(","))


class Missing(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.partition(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, Missing())
(script,) = [ep for ep in entry_points(group="console_scripts") if ep.name == sys.argv[2]]
sys.argv = sys.argv[2:]
sys.exit(script.load()(sys.argv[1:]))
"""


def _without(*extras: str, keep: tuple[str, ...] = ()) -> set[str]:
    """The modules an install lacks when it has none of ``extras`` except those of ``keep``."""
    kept = {m for e in keep for m in MODULES[e]}
    return {m for e in extras for m in MODULES[e]} - kept


BASE = _without(*MODULES)  # `pip install e2ee-chat`: the protocol only
SERVER_ONLY = _without(*MODULES, keep=("server",))
CLIENT_ONLY = _without(*MODULES, keep=("client",))


def run(blocked: set[str], *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", _RUN, ",".join(sorted(blocked)), *argv],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )


@pytest.mark.parametrize("command", ["e2ee-relay", "e2ee-chat", "e2ee-demo", "e2ee-bench"])
def test_version_and_help_need_no_extra(command):
    done = run(BASE, command, "--version")
    assert (done.returncode, done.stdout, done.stderr) == (0, f"{command} {VERSION}\n", "")
    done = run(BASE, command, "--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"usage: {command}") and done.stderr == ""


@pytest.mark.parametrize(
    ("blocked", "argv", "extra"),
    [
        (SERVER_ONLY, ["e2ee-chat", "tail", "--user", "alice"], "client"),
        (SERVER_ONLY, ["e2ee-chat", "--user", "alice"], "client"),
        (SERVER_ONLY, ["e2ee-demo"], "demo"),
        (SERVER_ONLY, ["e2ee-bench", "primitives", "--quick"], "bench"),
        (CLIENT_ONLY, ["e2ee-relay", "migrate"], "server"),
        (CLIENT_ONLY, ["e2ee-demo", "--level", "4"], "demo"),
        (BASE, ["e2ee-relay"], "server"),
        (BASE, ["e2ee-relay", "dev-cert"], "server"),
    ],
)
def test_a_missing_extra_is_named_in_one_line(blocked, argv, extra):
    done = run(blocked, *argv)
    assert done.returncode == 2
    assert done.stdout == ""
    assert re.fullmatch(
        rf"{argv[0]} needs the {extra} extra: pip install 'e2ee-chat\[{extra}\]' "
        r"\(module '\w+' is missing\)\n",
        done.stderr,
    ), done.stderr


def test_the_subcommands_version_and_help_need_no_extra():
    for argv in (
        ["e2ee-chat", "send", "--version"],
        ["e2ee-chat", "keys", "show", "--version"],
        ["e2ee-bench", "report", "--version"],
    ):
        done = run(BASE, *argv)
        assert (done.returncode, done.stdout) == (0, f"{argv[0]} {VERSION}\n"), done.stderr
    done = run(BASE, "e2ee-chat", "send", "--help")
    assert done.returncode == 0 and "--text" in done.stdout, done.stderr


def _distribution(requirement: str) -> str:
    return re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def test_the_modules_of_each_extra_are_those_pyproject_installs():
    """shared.extras.MODULES against pyproject.toml: every module comes from one of the extra's
    distributions, and every distribution that brings a module has one listed."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]

    def distributions(extra: str) -> set[str]:
        names = set()
        for req in extras[extra]:
            if req.startswith("e2ee-chat["):
                for inner in req[len("e2ee-chat[") : req.index("]")].split(","):
                    names |= distributions(inner)
            else:
                names.add(_distribution(req))
        return names

    provides: dict[str, set[str]] = {}
    for module, dists in packages_distributions().items():
        for d in dists:
            provides.setdefault(d.lower().replace("_", "-"), set()).add(module)
    assert set(MODULES) == set(extras) - {"dev"}
    for extra, modules in MODULES.items():
        dists = distributions(extra)
        offered = set().union(*(provides.get(d, set()) for d in dists))
        assert set(modules) <= offered, (extra, set(modules) - offered)
        for d in dists:
            public = {m for m in provides.get(d, set()) if not m.startswith("_")}
            assert not public or public & set(modules), (extra, d, public)


def test_every_subcommand_prints_its_version(capsys):
    """README: every command prints its version, at every level of sub-command."""
    scripts = {ep.name: ep for ep in entry_points(group="console_scripts") if ep.name.startswith("e2ee-")}
    from bench.suites import SUITES

    cases = [["e2ee-chat", sub] for sub in ("register", "send", "get-attachment", "tail", "search", "keys")]
    cases += [["e2ee-chat", "keys", action] for action in ("show", "export", "import", "accept", "verify", "rotate")]
    cases += [["e2ee-chat", "send", "--to", "bob"], ["e2ee-bench", "report"]]
    cases += [["e2ee-bench", s.name] for s in SUITES]
    for argv in cases:
        with pytest.raises(SystemExit) as exit_:
            scripts[argv[0]].load()([*argv[1:], "--version"])
        assert exit_.value.code == 0, argv
        assert capsys.readouterr().out == f"{argv[0]} {VERSION}\n", argv


def test_relay_help_shows_the_settings_defaults(capsys):
    """``e2ee-relay --help``: each option's default, from the one Settings object."""
    import dataclasses

    from server import cli
    from server.settings import Settings

    with pytest.raises(SystemExit) as exit_:
        cli.main(["--help"])
    assert exit_.value.code == 0
    shown = " ".join(capsys.readouterr().out.split())
    for f in dataclasses.fields(Settings):
        env = f"env E2EE_{f.name.upper()}"
        if isinstance(f.default, bool):
            assert f"{env}; default {'on' if f.default else 'off'})" in shown, f.name
        elif f.default not in ("", dataclasses.MISSING):
            assert f"{env}; default {f.default})" in shown, f.name
        else:
            assert f"{env})" in shown, f.name
    assert "--port PORT TCP port (env E2EE_PORT; default 8765)" in shown
