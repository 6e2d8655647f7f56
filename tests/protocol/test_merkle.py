"""shared.merkle against the Certificate Transparency reference vectors (RFC 6962 / RFC 9162 test data
of certificate-transparency and transparency-dev/merkle) and against a plain recursive
implementation of the RFC's definitions written here, for every tree up to 70 leaves."""

from __future__ import annotations

import hashlib

import pytest

from shared import merkle
from shared.errors import ConsistencyProofInvalid, InclusionProofInvalid, TransparencyFailed

H = bytes.fromhex
DATA = ("", "00", "10", "2021", "3031", "40414243", "5051525354555657", "606162636465666768696a6b6c6d6e6f")
LEAVES = [H(x) for x in DATA]
ROOTS = [
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
]
INCLUSION = {  # (leaf index, tree size) -> audit path
    (0, 8): [
        "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
        "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
        "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
    ],
    (5, 8): [
        "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
        "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    ],
    (2, 3): ["fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"],
    (0, 1): [],
}
CONSISTENCY = {  # (old size, new size) -> proof
    (2, 8): [
        "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
        "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
    ],
    (6, 8): [
        "0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
        "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    ],
    (2, 5): [
        "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
        "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
    ],
    (1, 1): [],
}


def ref_leaf(d: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + d).digest()


def ref_mth(d: list[bytes]) -> bytes:
    """MTH(D[n]) over leaf data, straight from RFC 9162 §2.1.1."""
    if not d:
        return hashlib.sha256(b"").digest()
    if len(d) == 1:
        return ref_leaf(d[0])
    k = 1
    while k * 2 < len(d):
        k *= 2
    return hashlib.sha256(b"\x01" + ref_mth(d[:k]) + ref_mth(d[k:])).digest()


def ref_path(m: int, d: list[bytes]) -> list[bytes]:
    """PATH(m, D[n]), RFC 9162 §2.1.3.1, recursive as written."""
    if len(d) == 1:
        return []
    k = 1
    while k * 2 < len(d):
        k *= 2
    return ref_path(m, d[:k]) + [ref_mth(d[k:])] if m < k else ref_path(m - k, d[k:]) + [ref_mth(d[:k])]


def ref_subproof(m: int, d: list[bytes], b: bool) -> list[bytes]:
    """SUBPROOF(m, D[n], b), RFC 9162 §2.1.4.1, recursive as written."""
    if m == len(d):
        return [] if b else [ref_mth(d)]
    k = 1
    while k * 2 < len(d):
        k *= 2
    if m <= k:
        return ref_subproof(m, d[:k], b) + [ref_mth(d[k:])]
    return ref_subproof(m - k, d[k:], False) + [ref_mth(d[:k])]


@pytest.fixture(scope="module")
def ct() -> merkle.Tree:
    tree = merkle.Tree()
    for d in LEAVES:
        tree.append(d)
    return tree


def test_roots_are_the_reference_roots(ct):
    assert merkle.EMPTY_ROOT.hex() == ROOTS[0]
    assert [ct.root(n).hex() for n in range(9)] == ROOTS
    assert merkle.root_from_leaves([ct.leaf(i) for i in range(8)]).hex() == ROOTS[8]


@pytest.mark.parametrize(("index", "size"), sorted(INCLUSION))
def test_inclusion_proofs_are_the_reference_paths(ct, index, size):
    proof = ct.inclusion_proof(index, size)
    assert [p.hex() for p in proof] == INCLUSION[(index, size)]
    merkle.verify_inclusion(index, size, ref_leaf(LEAVES[index]), proof, H(ROOTS[size]))


@pytest.mark.parametrize(("old", "new"), sorted(CONSISTENCY))
def test_consistency_proofs_are_the_reference_proofs(ct, old, new):
    proof = ct.consistency_proof(old, new)
    assert [p.hex() for p in proof] == CONSISTENCY[(old, new)]
    merkle.verify_consistency(old, new, H(ROOTS[old]), H(ROOTS[new]), proof)


def test_every_proof_up_to_70_leaves_is_the_rfcs_and_verifies():
    data = [i.to_bytes(2, "big") * (i % 5) for i in range(70)]
    tree = merkle.Tree()
    roots = [merkle.EMPTY_ROOT]
    for d in data:
        tree.append(d)
        roots.append(tree.root())
    for n in range(1, 71):
        assert roots[n] == ref_mth(data[:n]) == tree.root(n)
        for m in range(n):
            path = tree.inclusion_proof(m, n)
            assert path == ref_path(m, data[:n])
            merkle.verify_inclusion(m, n, ref_leaf(data[m]), path, roots[n])
        for m in range(0, n + 1):
            proof = tree.consistency_proof(m, n)
            assert proof == ([] if m == 0 else ref_subproof(m, data[:n], True))
            merkle.verify_consistency(m, n, roots[m], roots[n], proof)


def test_every_mangled_inclusion_proof_fails():
    tree = merkle.Tree(ref_leaf(bytes([i])) for i in range(37))
    for n in (2, 3, 7, 8, 13, 32, 37):
        root = tree.root(n)
        for m in range(n):
            proof, leaf = tree.inclusion_proof(m, n), tree.leaf(m)
            wrong = [
                (m, n, leaf, [*proof[:-1], bytes(32)], root),  # a hash changed
                (m, n, leaf, proof[:-1], root),  # truncated
                (m, n, leaf, [*proof, bytes(32)], root),  # extended
                (m, n, ref_leaf(b"planted"), proof, root),  # another leaf
                (m, n, leaf, proof, tree.root(n - 1)),  # another root
                ((m + 1) % n, n, leaf, proof, root) if n > 2 else (n, n, leaf, proof, root),  # another index
                (m, n, leaf, proof[::-1], root) if len(set(proof)) > 1 else (m, n + 1, leaf, proof, root),
            ]
            for args in wrong:
                with pytest.raises(InclusionProofInvalid) as err:
                    merkle.verify_inclusion(*args)
                assert err.value.field == "proof" and isinstance(err.value, TransparencyFailed)


def test_every_mangled_consistency_proof_fails():
    tree = merkle.Tree(ref_leaf(bytes([i])) for i in range(33))
    for n in (2, 3, 5, 8, 9, 16, 33):
        for m in range(1, n):
            proof, old, new = tree.consistency_proof(m, n), tree.root(m), tree.root(n)
            forked = merkle.Tree([*(tree.leaf(i) for i in range(m - 1)), ref_leaf(b"rewritten")]).root(m)
            wrong = [
                (m, n, old, new, [bytes(32), *proof[1:]]),
                (m, n, old, new, proof[:-1]),
                (m, n, old, new, [*proof, bytes(32)]),
                (m, n, forked, new, proof),  # the old head is not a prefix of the new one
                (m, n, old, tree.root(n - 1) if n - 1 > m else bytes(32), proof),
                (n, m, new, old, proof),  # shrinking
            ]
            for args in wrong:
                with pytest.raises(ConsistencyProofInvalid):
                    merkle.verify_consistency(*args)


def test_equal_and_empty_trees():
    tree = merkle.Tree(ref_leaf(bytes([i])) for i in range(5))
    merkle.verify_consistency(5, 5, tree.root(), tree.root(), [])
    merkle.verify_consistency(0, 5, merkle.EMPTY_ROOT, tree.root(), [])
    for args in [
        (5, 5, tree.root(), tree.root(4), []),  # one size, two roots: a split view
        (5, 5, tree.root(), tree.root(), [bytes(32)]),
        (0, 5, merkle.EMPTY_ROOT, tree.root(), [bytes(32)]),
        (3, 5, tree.root(3), tree.root(), []),
    ]:
        with pytest.raises(ConsistencyProofInvalid):
            merkle.verify_consistency(*args)


def test_malformed_proofs_and_ranges_are_refused():
    tree = merkle.Tree(ref_leaf(bytes([i])) for i in range(8))
    with pytest.raises(InclusionProofInvalid):
        merkle.verify_inclusion(0, 8, tree.leaf(0), [b"short", *tree.inclusion_proof(0)[1:]], tree.root())
    with pytest.raises(InclusionProofInvalid):
        merkle.verify_inclusion(0, 8, tree.leaf(0), [bytes(32)] * 65, tree.root())
    for index in (-1, 8):
        with pytest.raises(InclusionProofInvalid):
            merkle.verify_inclusion(index, 8, tree.leaf(0), tree.inclusion_proof(0), tree.root())
    for bad in (lambda: tree.inclusion_proof(8), lambda: tree.root(9), lambda: tree.consistency_proof(5, 3)):
        with pytest.raises(ValueError):
            bad()
    with pytest.raises(ValueError):
        tree.append_hash(b"\x00" * 31)


def test_a_compact_range_gives_every_root_and_resumes_from_its_own_hashes():
    tree, edge = merkle.Tree(), merkle.CompactRange()
    assert edge.root() == merkle.EMPTY_ROOT
    for i in range(70):
        h = ref_leaf(bytes([i]))
        tree.append_hash(h)
        edge.append_hash(h)
        assert edge.root() == tree.root() and len(edge.hashes) == edge.size.bit_count()
        edge = merkle.CompactRange(edge.size, edge.hashes)  # as a monitor stores and loads it
    with pytest.raises(ValueError):
        merkle.CompactRange(3, [bytes(32)])
