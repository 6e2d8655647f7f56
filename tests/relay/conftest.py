"""In-process relays: ``create_app`` on a real SQLite file, driven through httpx2.ASGITransport
(or Starlette's TestClient for websockets). The schema is migrated once per test session into a
template file that every test copies (DESIGN §11: the Alembic upgrade is most of a test's cost)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from server.migrate import upgrade
from server.settings import Settings
from tests.helpers.asgi import FAST, SECRET


@pytest.fixture(scope="session")
def template_db(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("template") / "relay.db"
    upgrade(f"sqlite+aiosqlite:///{path}")
    return path


@pytest.fixture
def settings_for(tmp_path: Path, template_db: Path):
    """``settings_for(**overrides)``: Settings on a fresh copy of the migrated template."""
    made = 0

    def make(**overrides) -> Settings:
        nonlocal made
        made += 1
        data = tmp_path / f"relay{made}"
        data.mkdir()
        shutil.copy(template_db, data / "relay.db")
        return Settings(data_dir=str(data), jwt_secret=SECRET, **{**FAST, **overrides})

    return make
