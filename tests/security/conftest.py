"""Fixtures for the security tests: a World of real relays and real clients, torn down after each test."""

from __future__ import annotations

import pytest

from tests.helpers.world import World


@pytest.fixture
async def world(tmp_path, identities):
    w = World(tmp_path, identities)
    yield w
    await w.close()
