"""The key attacks of ``e2ee-demo --attacks`` hold (each against a real relay), the key transparency
ones (bench/tools/kt_attacks.py) included."""

from __future__ import annotations

import pytest

from bench.tools import key_attacks, kt_attacks

ATTACKS = {**key_attacks.ATTACKS, **kt_attacks.ATTACKS}


@pytest.mark.parametrize("name", list(ATTACKS))
async def test_each_key_attack_holds(tmp_path, name):
    result = await ATTACKS[name](tmp_path)
    assert result.ok and result.held, result
    assert result.shown and result.relay_did and result.name == name
    assert all(words for words in result.shown.values())


async def test_the_key_transparency_attacks_say_what_each_user_was_told(tmp_path):
    planted = await kt_attacks.ATTACKS["plant-key"](tmp_path / "plant")
    assert planted.details["alerts"] == ["log_key_mismatch"] and "never published" in planted.shown["bob"]
    split = await kt_attacks.ATTACKS["split-view"](tmp_path / "split")
    assert "showing you and bob different key directories" in split.shown["alice"]
    assert split.shown["alice"].endswith("her next key answer: refused (consistency_proof_invalid)")
