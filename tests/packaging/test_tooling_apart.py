"""The relay and the client never import the tooling (bench/, bench/tools/): an install of either
carries it as files at most. ``e2ee-relay --hostile`` imports the hostile relay only when asked,
and says what to install when it is missing."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.process  # fresh interpreters import the packages

PRODUCT = (
    "server.app",
    "server.cli",
    "server.settings",
    "client_tui.app",
    "client_tui.cli",
    "client_tui.cliargs",
    "client_tui.core",
    "migrations",
)


def _python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("module", PRODUCT)
def test_the_product_imports_no_tooling(module):
    run = _python(
        f"import sys, {module}\n"
        "from server.settings import Settings\n"
        "Settings.from_env(data_dir='unused')\n"
        "print(sorted(m for m in sys.modules if m == 'bench' or m.startswith('bench.')))"
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"


def test_hostile_imports_the_tooling_only_when_asked():
    run = _python(
        "import sys\nfrom server.settings import Settings\n"
        "Settings.from_env(data_dir='unused', hostile='drop', demo_level=True)\n"
        "print('bench.tools.hostile' in sys.modules)"
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "True"


def test_hostile_without_the_tooling_says_what_to_install(tmp_path):
    run = _python(
        "import sys\nsys.modules['bench'] = None  # as if the tooling were not installed\n"
        "from server.cli import main\n"
        f"sys.exit(main(['serve', '--data-dir', {str(tmp_path)!r}, '--hostile', 'drop', '--demo-level']))"
    )
    assert run.returncode == 2
    assert run.stderr == (
        "e2ee-relay: --hostile needs the demonstration tooling (bench/tools/hostile.py), which is "
        "not installed here: install e2ee-chat[demo]\n"
    )
    assert list(tmp_path.iterdir()) == []  # refused before the relay touched its data folder
