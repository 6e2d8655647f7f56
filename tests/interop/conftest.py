"""Fixtures for the independent-implementation checks (Node WebCrypto, OpenSSL, jwcrypto).

A check may skip only when its tool is missing AND the ``CI`` environment variable is unset; in
CI a missing tool fails the test, so the independent checks can never silently stop running.
"""

from __future__ import annotations

import pytest

from shared.keys import Identity
from tests.vectors import vectorlib


@pytest.fixture(scope="session")
def ids() -> dict[str, Identity]:
    return vectorlib.identities()
