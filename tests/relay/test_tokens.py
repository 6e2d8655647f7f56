"""Token service unit checks (no relay needed): the verified-token cache never outlives exp."""

from __future__ import annotations

import os
import time

import pytest

from server.auth import Tokens, canonical_username
from shared.errors import AuthFailed, InvalidRequest


def test_cached_token_is_not_served_after_its_expiry():
    tokens = Tokens("HS256", os.urandom(32), "iss", "aud", ttl_s=1, leeway_s=0)
    token, exp = tokens.issue("alice", "s1")
    assert tokens.verify(token).sub == "alice"
    assert tokens.verify(token).sub == "alice"  # from the cache
    time.sleep(max(0.0, exp - time.time()) + 1.05)  # exp has whole seconds; PyJWT needs now > exp
    with pytest.raises(AuthFailed, match="expired"):
        tokens.verify(token)
    assert token not in tokens._verified


def test_failed_verification_is_not_cached():
    tokens = Tokens("HS256", os.urandom(32), "iss", "aud", ttl_s=60, leeway_s=0)
    other = Tokens("HS256", os.urandom(32), "iss", "aud", ttl_s=60, leeway_s=0)
    forged, _ = other.issue("alice", "s1")
    for _ in range(2):
        with pytest.raises(AuthFailed, match="signature"):
            tokens.verify(forged)


def test_cache_is_bounded():
    tokens = Tokens("HS256", os.urandom(32), "iss", "aud", ttl_s=60, leeway_s=0)
    tokens.cache_size = 3
    for i in range(10):
        tokens.verify(tokens.issue(f"user{i}", "s1")[0])
    assert len(tokens._verified) == 3


@pytest.mark.parametrize(
    ("raw", "canonical"), [("Alice", "alice"), ("ＡＬＩＣＥ", "alice"), ("bob.smith-2", "bob.smith-2")]
)
def test_usernames_are_nfkc_casefolded(raw, canonical):
    assert canonical_username(raw) == canonical


@pytest.mark.parametrize("raw", ["ab", "a" * 33, "-alice", "alice bob", "alice\u200b", "élodie", ""])
def test_bad_usernames_are_refused(raw):
    with pytest.raises(InvalidRequest):
        canonical_username(raw)


@pytest.mark.parametrize(
    "line",
    [
        "< authorization: Bearer {t}",
        "Authorization: {t}",
        '127.0.0.1:5 - "WebSocket /v1/ws?token={t}" 403',
        "got {t} from somewhere",
    ],
)
def test_log_redaction_removes_every_form_of_a_token(line):
    from server.logs import redact

    tokens = Tokens("HS256", os.urandom(32), "iss", "aud", ttl_s=60, leeway_s=0)
    token, _ = tokens.issue("alice", "s1")
    out = redact(line.format(t=token))
    assert token.split(".")[2] not in out and token.split(".")[1] not in out
