"""Fixtures for the independent-implementation checks (Node WebCrypto, OpenSSL, jwcrypto).

A check may skip only when its tool is missing AND the ``CI`` environment variable is unset; in
CI a missing tool fails the test, so the independent checks can never silently stop running.
"""

from __future__ import annotations

import os
import shutil

import pytest

from shared.keys import Identity
from tests.vectors import vectorlib


def require_tool(name: str) -> str:
    """Path of executable ``name``; skip when missing outside CI, fail when missing in CI."""
    path = shutil.which(name)
    if path is None:
        if os.environ.get("CI"):
            pytest.fail(f"{name} is required in CI (CI is set) but is not on PATH")
        pytest.skip(f"{name} not found on PATH (set CI=1 to make this a failure)")
    return path


@pytest.fixture(scope="session")
def ids() -> dict[str, Identity]:
    return vectorlib.identities()
