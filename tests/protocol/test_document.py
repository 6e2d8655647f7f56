"""docs/PROTOCOL.md keeps up with the code: every error code, frame, frame member and route is in it.

A new frame, member, route or error added without documenting it fails here, so the document
stays enough to write a compatible client.
"""

from __future__ import annotations

import re
from pathlib import Path

import msgspec
import pytest

from shared import envelope, errors, frames, l3

DOC = (Path(__file__).resolve().parents[2] / "docs" / "PROTOCOL.md").read_text("utf-8")


def section(title_start: str) -> str:
    """The text of the section whose heading starts with ``title_start`` (up to the next heading)."""
    m = re.search(rf"^#+ {re.escape(title_start)}.*?$(.*?)(?=^#+ )", DOC, re.M | re.S)
    assert m, title_start
    return m.group(1)


ERROR_CODES = sorted(errors.ErrorCode)
ERROR_CLASSES = [c for c in vars(errors).values() if isinstance(c, type) and issubclass(c, errors.E2EEError)]


@pytest.mark.parametrize("code", ERROR_CODES)
def test_every_error_code_is_in_the_table(code):
    assert f"| `{code}`" in section("9. Error codes")


@pytest.mark.parametrize("cls", ERROR_CLASSES, ids=lambda c: c.code)
def test_the_tables_http_status_is_the_errors(cls):
    """A status in brackets is the code's own; without one, the nearest ancestor's with one."""
    rows = {
        m[1]: (int(m[2]) if m[2] else None, m[3])
        for m in re.finditer(r"^\| `([a-z0-9_]+)`(?: \[(\d+)\])? \| ([a-z0-9_–]+)", section("9. Error codes"), re.M)
    }
    code, status = cls.code, None
    while status is None:
        status, parent = rows[code]
        code = parent
    assert status == cls.status


def frame_classes(union) -> list[type[msgspec.Struct]]:
    return list(union.__args__)


@pytest.mark.parametrize(
    "cls", frame_classes(frames.ClientFrame) + frame_classes(frames.RelayFrame), ids=lambda c: c.__name__
)
def test_every_frame_and_member_is_documented(cls):
    text = section("4.3 Frames")
    tag = cls.__struct_config__.tag
    row = next((line for line in text.splitlines() if line.startswith(f"| `{tag}`")), None)
    assert row is not None, f"frame {tag!r} missing from §4.3"
    for member in cls.__struct_fields__:
        assert f"`{member}`" in row, f"member {member!r} of frame {tag!r} missing from §4.3"


def test_every_route_is_in_the_rest_table():
    from server.app import routes

    text = section("4.1 REST")
    for route in routes:
        methods = sorted(getattr(route, "methods", None) or {"GET"})
        method = next(m for m in ("POST", "DELETE", "GET") if m in methods)
        assert f"`{method} {route.path}`" in text, f"{method} {route.path} missing from §4.1"


def test_header_members_and_constants_are_documented():
    text = section("5.2 Protected header")
    for member in envelope.Header.__struct_fields__:
        assert f"| `{member}`" in text
    for value in (envelope.ALG, envelope.ENC, envelope.TYP, envelope.CTY, envelope.SIG_CONTEXT.decode()):
        assert value in DOC
    for value in (l3.TYP, l3.HS_TYP, l3.SESSION_ID_CONTEXT.decode().rstrip("\x00")):
        assert value in DOC
    l3_text = section("6.2 Messages")
    for member in l3.Header.__struct_fields__:
        assert f"`{member}`" in l3_text


def test_limits_in_the_document_match_the_code():
    assert f"{envelope.DEFAULT_MAX_ENVELOPE_BYTES:,}".replace(",", " ") in DOC
    assert f"| {envelope.DEFAULT_MAX_RECIPIENTS} |" in DOC
    assert f"≤ {l3.MAX_HANDSHAKE_BYTES} bytes" in DOC
