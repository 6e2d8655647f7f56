"""shared.digests: known-answer tests from the standards, and the rule that no product module
takes a hash, an HMAC or a constant-time comparison from Python's ``hashlib``/``hmac``."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from shared import digests

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("shared", "server", "client_tui", "bench", "migrations")


def test_sha256_known_answers() -> None:
    # FIPS 180-2 appendix B.1 ("abc") and the empty string
    assert digests.sha256(b"abc").hex() == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    assert digests.sha256(b"a", b"b", b"c") == digests.sha256(b"abc")
    assert digests.sha256().hex() == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


def test_sha512_known_answer() -> None:
    # FIPS 180-2 appendix C.1 ("abc")
    assert digests.sha512(b"abc").hex() == (
        "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a"
        "2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f"
    )


def test_hmac_sha256_rfc4231_case_2() -> None:
    tag = digests.hmac_sha256(b"Jefe", b"what do ya want ", b"for nothing?")
    assert tag.hex() == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"


def test_incremental_digest_reads_twice_and_continues() -> None:
    h = digests.Sha256(b"a")
    h.update(b"b")
    assert h.digest() == h.digest() == digests.sha256(b"ab")
    h.update(b"c")
    assert h.digest() == digests.sha256(b"abc")


@pytest.mark.parametrize(
    ("a", "b", "same"), [(b"", b"", True), (b"x" * 32, b"x" * 32, True), (b"a", b"b", False), (b"a", b"ab", False)]
)
def test_equal(a: bytes, b: bytes, same: bool) -> None:
    assert digests.equal(a, b) is same


def _stdlib_crypto_imports(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.split(".")[0] in {"hashlib", "hmac"}]
        elif (
            isinstance(node, ast.ImportFrom)
            and node.level == 0
            and (node.module or "").split(".")[0] in {"hashlib", "hmac"}
        ):
            found.append(node.module or "")
    return found


def test_no_product_module_imports_hashlib_or_hmac() -> None:
    offenders = {
        str(p.relative_to(ROOT)): names
        for pkg in PACKAGES
        for p in sorted((ROOT / pkg).rglob("*.py"))
        if (names := _stdlib_crypto_imports(p))
    }
    assert offenders == {}, "take hashes, HMAC and comparisons from shared.digests (cryptography)"
