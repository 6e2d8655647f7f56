"""Fixtures for the protocol tests: the committed vectors and the fixed test keys they use.

Nothing here generates RSA keys: every key comes from ``tests/vectors/keys.json`` or
``tests/vectors/key_pool.json`` (loaded once per session), so the folder runs in a few seconds.
"""

from __future__ import annotations

import pytest

from shared.keys import Identity
from tests.vectors import vectorlib


@pytest.fixture(scope="session")
def ids() -> dict[str, Identity]:
    """alice (RSA-2048), bob (RSA-3072), carol and mallory (RSA-2048), each with Ed25519."""
    return vectorlib.identities()


@pytest.fixture(scope="session")
def pool() -> tuple[Identity, ...]:
    """64 fixed RSA-2048 identities for property tests with many recipients."""
    return vectorlib.key_pool()
