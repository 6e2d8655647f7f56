"""One canonical username and one normalised secret (issue 12): the relay and the client apply the
same functions of ``shared.names``, so ``Bob``/``bob`` and composed/decomposed secrets are the same."""

from __future__ import annotations

import unicodedata

import pytest

from shared.errors import InvalidRequest
from shared.names import canonical_username, normalise_secret, secret_candidates
from tests.helpers.names import COMPOSED, DECOMPOSED


@pytest.mark.parametrize(
    ("raw", "canonical"),
    [
        ("Bob", "bob"),
        ("BOB", "bob"),
        ("\uff22\uff4f\uff42", "bob"),
        ("Alice.Smith_2", "alice.smith_2"),
        ("Dave-1", "dave-1"),
    ],
)
def test_usernames_are_canonical(raw, canonical):
    assert canonical_username(raw) == canonical


@pytest.mark.parametrize("raw", ["", "ab", "-bob", "bob smith", "b\u00f6b", "x" * 33, "../etc", "bob/..", None, 7])
def test_invalid_usernames_are_refused_with_a_typed_error(raw):
    with pytest.raises(InvalidRequest) as err:
        canonical_username(raw)
    assert err.value.field == "username"


def test_the_server_uses_the_shared_function():
    from server import auth

    assert auth.canonical_username is canonical_username


def test_composed_and_decomposed_secrets_normalise_alike():
    assert COMPOSED != DECOMPOSED
    assert normalise_secret(COMPOSED) == normalise_secret(DECOMPOSED) == unicodedata.normalize("NFC", COMPOSED)
    assert normalise_secret("a\u00a0b\u2003c") == "a b c"  # non-ASCII spaces become U+0020 (RFC 8265 §4.2.1)
    assert normalise_secret(normalise_secret(DECOMPOSED)) == normalise_secret(DECOMPOSED)


@pytest.mark.parametrize("raw", ["", "tab\there", "nul\x00", "esc\x1b[31m"])
def test_secrets_with_control_characters_or_empty_are_refused(raw):
    with pytest.raises(InvalidRequest) as err:
        normalise_secret(raw, "passphrase")
    assert err.value.field == "passphrase"


def test_candidates_try_the_normalised_form_then_the_raw_one_once():
    assert secret_candidates(COMPOSED) == [COMPOSED]
    assert secret_candidates(DECOMPOSED) == [COMPOSED, DECOMPOSED]
    assert secret_candidates("tab\there") == ["tab\there"]  # only ever stored raw
    assert secret_candidates("") == []
