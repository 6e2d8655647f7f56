"""The key attacks of ``e2ee-demo --attacks`` hold (each against a real relay)."""

from __future__ import annotations

import pytest

from bench.tools import key_attacks


@pytest.mark.parametrize("name", list(key_attacks.ATTACKS))
async def test_each_key_attack_holds(tmp_path, name):
    result = await key_attacks.ATTACKS[name](tmp_path)
    assert result.ok and result.held, result
    assert result.shown and result.relay_did and result.name == name
    assert all(words for words in result.shown.values())
