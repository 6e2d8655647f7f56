"""The wheel built from this tree carries every data file beside the code (``bench/peers.mjs``, the
``.tcss``, the bench's web page, the report's prose, Alembic's template, ``py.typed``), the MIT
licence as an SPDX expression with its file, and the extras that keep a relay install free of the
client's libraries and a client install free of the relay's."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

pytestmark = pytest.mark.process  # pip builds and installs the wheel

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("shared", "server", "client_tui", "bench", "migrations")
TYPED = ("shared", "server", "client_tui", "bench")


def _data_files() -> set[str]:
    """Every file under the package folders that is not Python source (wheel paths)."""
    found = set()
    for top in PACKAGES:
        for path in (ROOT / top).rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix not in (".py", ".pyc"):
                found.add(path.relative_to(ROOT).as_posix())
    return found


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    """``pip wheel`` of a copy of the tree (the build writes ``build/`` and ``*.egg-info`` beside it)."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(ROOT / name, src / name)
    for top in PACKAGES:
        shutil.copytree(ROOT / top, src / top, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    run = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "-q", "-w", str(tmp / "dist")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    (built,) = (tmp / "dist").glob("e2ee_chat-*.whl")
    with zipfile.ZipFile(built) as zf:
        yield zf


def _metadata(wheel: zipfile.ZipFile):
    (name,) = [n for n in wheel.namelist() if n.endswith(".dist-info/METADATA")]
    return Parser().parsestr(wheel.read(name).decode())


def test_every_data_file_and_marker_is_in_the_wheel(wheel):
    names = set(wheel.namelist())
    data = _data_files()
    assert {
        "bench/peers.mjs",
        "client_tui/chat.tcss",
        "bench/web/index.html",
        "bench/report/prose.toml",
        "migrations/script.py.mako",
    } <= data  # the scan sees what it must
    assert {f"{top}/py.typed" for top in TYPED} <= data
    assert sorted(data - names) == []


def test_every_package_is_in_the_wheel(wheel):
    names = set(wheel.namelist())
    packages = {p.parent.relative_to(ROOT).as_posix() for top in PACKAGES for p in (ROOT / top).rglob("__init__.py")}
    assert "bench/tools" in packages  # the demonstration tooling ships, apart from the product packages
    assert sorted(p for p in packages if f"{p}/__init__.py" not in names) == []


def test_licence_is_an_spdx_expression_with_its_file(wheel):
    meta = _metadata(wheel)
    assert meta["License-Expression"] == "MIT"
    assert meta["License"] is None  # not the deprecated free-text field
    assert any(re.search(r"\.dist-info/licenses/LICENSE$", n) for n in wheel.namelist())


def test_extras_split_the_relay_and_the_client(wheel):
    meta = _metadata(wheel)
    assert set(meta.get_all("Provides-Extra")) >= {"server", "postgres", "client", "demo", "bench", "dev"}
    requires = meta.get_all("Requires-Dist")
    base = {re.split(r"[<>=\[; ]", r)[0].lower() for r in requires if "extra ==" not in r}
    assert base == {"cryptography", "msgspec", "pybase64", "precis-i18n"}

    def extra(name: str) -> set[str]:
        return {re.split(r"[<>=\[; ]", r)[0].lower() for r in requires if f'extra == "{name}"' in r}

    assert not extra("server") & {"textual", "zxcvbn", "matplotlib", "asyncpg", "redis", "playwright"}
    assert not extra("client") & {"starlette", "uvicorn", "sqlalchemy", "alembic", "asyncpg", "redis", "matplotlib"}
    assert "pytest-timeout" in extra("dev")
    (sqla,) = [r for r in requires if r.lower().startswith("sqlalchemy")]
    assert ">=2.0.46" in sqla
