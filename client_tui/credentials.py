"""Rules for the secrets a user picks when creating an account, shared by the login screen and
``e2ee-chat register``: both typed twice, a minimum length, and a strength hint.

There are two secrets. The relay password proves to the relay who you are; the keystore
passphrase encrypts your private keys on this machine (Argon2id) and never leaves it: lose it and
the keys cannot be opened again, so a typo at registration must be caught then.
"""

from __future__ import annotations

from dataclasses import dataclass

import zxcvbn

MIN_PASSWORD_CHARS = 8
MIN_PASSPHRASE_CHARS = 8
_ZXCVBN_MAX = 72  # the estimator refuses longer inputs; a longer secret is not weaker
SCORE_WORDS = ("very weak", "weak", "fair", "good", "strong")


@dataclass(frozen=True)
class Strength:
    """A strength estimate: ``score`` 0 (guessed at once) .. 4 (strong), in words, and advice."""

    score: int
    words: str
    advice: str

    def __str__(self) -> str:
        return f"strength: {self.words}" + (f" — {self.advice}" if self.advice else "")


def strength(secret: str, *, context: tuple[str, ...] = ()) -> Strength:
    """Estimate how hard ``secret`` is to guess (zxcvbn: dictionaries, keyboard patterns, dates,
    repeats); ``context`` are words an attacker knows (the username, the relay's host)."""
    if not secret:
        return Strength(0, SCORE_WORDS[0], "")
    result = zxcvbn.zxcvbn(secret[:_ZXCVBN_MAX], user_inputs=[c for c in context if c])
    feedback = result.get("feedback") or {}
    advice = feedback.get("warning") or " ".join(feedback.get("suggestions") or [])
    return Strength(int(result["score"]), SCORE_WORDS[int(result["score"])], advice)


def check_new(kind: str, secret: str, again: str | None) -> str:
    """Why a new ``kind`` ("password" or "passphrase") cannot be used, or ``""`` if it can.

    ``again`` is the second typing (``None``: not asked, e.g. read from the environment).
    """
    least = MIN_PASSWORD_CHARS if kind == "password" else MIN_PASSPHRASE_CHARS
    if len(secret) < least:
        return f"the {kind} needs at least {least} characters"
    if again is not None and again != secret:
        return f"the two {kind}s differ"
    return ""
