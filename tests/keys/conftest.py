"""Fixtures of the key-trust tests: a World of real relays and clients (see tests/helpers/world.py)."""

from __future__ import annotations

import pytest

from tests.helpers.world import World


@pytest.fixture
async def world(tmp_path, identities):
    w = World(tmp_path, identities)
    yield w
    await w.close()
