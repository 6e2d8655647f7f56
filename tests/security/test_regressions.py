"""Inputs that crashed shared/ or server/ code when the fuzz and fault tests first ran; each is now
answered with its documented project error."""

from __future__ import annotations

import json

import pytest

from shared import l3
from shared.b64 import b64u_decode, b64u_encode
from shared.errors import EnvelopeMalformed, SessionMismatch
from tests.vectors import vectorlib

L3V = vectorlib.load("l3.json")
SESSION = l3.Session._from_key(b64u_decode(L3V["session_key"]))


@pytest.mark.parametrize(("kid", "error"), [("é" + "A" * 21, SessionMismatch), ("\U0001f510", SessionMismatch),
                                           ("ＡＢ", SessionMismatch), ("\ud800", EnvelopeMalformed)])
def test_l3_header_kid_with_non_ascii_text_is_session_mismatch(kid, error):
    """hmac.compare_digest raised TypeError ("comparing strings with non-ASCII characters is not
    supported") for a non-ASCII ``kid``: a crash instead of session_mismatch (PROTOCOL.md §6.3)."""
    msg = L3V["messages"][0]
    parts = msg["token"].split(".")
    header = json.loads(b64u_decode(parts[0]))
    header["kid"] = kid
    parts[0] = b64u_encode(json.dumps(header, ensure_ascii=False).encode("utf-8", "surrogatepass"))
    with pytest.raises(error) as err:  # a lone surrogate is not UTF-8: the header does not decode
        l3.open(SESSION, ".".join(parts), direction=msg["direction"], after_seq=0)
    assert type(err.value) is error and err.value.field == ("kid" if error is SessionMismatch else "protected")
