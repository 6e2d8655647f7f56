"""Test settings: cheap password hashing and keystore KDF, the test password, CI detection."""

from __future__ import annotations

import os
import shutil

import pytest

# Cheap argon2id for the relay's password hashes in tests (production defaults are 64 MiB, t=3).
FAST_RELAY_ENV = {
    "E2EE_ARGON2_TIME_COST": "1",
    "E2EE_ARGON2_MEMORY_KIB": "8192",
    "E2EE_ARGON2_PARALLELISM": "1",
}
FAST = {"argon2_time_cost": 1, "argon2_memory_kib": 8192, "argon2_parallelism": 1}
"""The same as ``Settings`` fields."""
SECRET = "ab" * 32
"""An HS256 secret for in-process relays (64 hex digits)."""
FAST_KDF = {"iterations": 1, "memory_kib": 8192, "lanes": 1}
TEST_BITS = 2048
PASSWORD = "pw-for-tests-only"


def passphrase(name: str) -> str:
    """The keystore passphrase of test user ``name``."""
    return f"{name} passphrase"


def in_ci() -> bool:
    return bool(os.environ.get("CI"))


def require_tool(name: str) -> str:
    """Path of executable ``name``; skip when missing outside CI, fail when missing in CI."""
    path = shutil.which(name)
    if path is None:
        if in_ci():
            pytest.fail(f"{name} is required in CI (CI is set) but is not on PATH")
        pytest.skip(f"{name} not found on PATH (set CI=1 to make this a failure)")
    return path
