"""Every reason an envelope can fail to open has plain words for the inspector."""

from __future__ import annotations

import json
from pathlib import Path

from client_tui.widgets import reason_words

NEGATIVE = Path(__file__).parents[1] / "vectors" / "l4_negative.json"


def test_every_opening_error_of_the_negative_vectors_has_its_own_plain_words():
    codes = sorted({v["code"] for v in json.loads(NEGATIVE.read_text())["vectors"]})
    assert len(codes) >= 15
    fallback = reason_words("no-such-code")
    for code in codes:
        words = reason_words(code)
        assert words != fallback and code not in words, code
