"""Fixtures for the fault tests: a World of real relays and clients torn down after each test, and a
watchdog that turns a hang into a failure with every thread's stack (instead of a stalled CI)."""

from __future__ import annotations

import faulthandler
import os

import pytest

from tests.helpers.world import World

WATCHDOG_S = float(os.environ.get("E2EE_FAULTS_WATCHDOG_S", "1800"))


@pytest.fixture(autouse=True)
def watchdog():
    faulthandler.dump_traceback_later(WATCHDOG_S, exit=True)
    yield
    faulthandler.cancel_dump_traceback_later()


@pytest.fixture
async def world(tmp_path, identities):
    w = World(tmp_path, identities)
    yield w
    await w.close()
