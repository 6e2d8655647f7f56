"""Merkle tree hashing, inclusion and consistency proofs: RFC 9162 §2.1 (Certificate Transparency
2.0), with SHA-256.

- leaf hash: ``SHA-256(0x00 || leaf data)``; interior node: ``SHA-256(0x01 || left || right)``;
  the empty tree's hash is ``SHA-256("")`` (§2.1.1). Every hash is 32 bytes.
- :class:`Tree` is an append-only tree over leaf hashes that keeps every complete (perfect, aligned)
  subtree hash, so the root at any earlier size, an inclusion proof (§2.1.3.1) and a consistency
  proof (§2.1.4.1) each cost O(log n) hashes, never a pass over the leaves. Memory: two hashes per
  leaf, 64 bytes, in one ``bytearray`` per tree level (64 MB for 10^6 leaves).
- :func:`verify_inclusion` (§2.1.3.2) and :func:`verify_consistency` (§2.1.4.2) are the RFC's
  verification algorithms, step by step; they raise :class:`~shared.errors.InclusionProofInvalid`
  and :class:`~shared.errors.ConsistencyProofInvalid`.

Pure: no I/O. The key transparency log that uses it is :mod:`shared.kt`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from . import digests
from .errors import ConsistencyProofInvalid, InclusionProofInvalid

__all__ = [
    "HASH_BYTES",
    "EMPTY_ROOT",
    "MAX_PROOF_HASHES",
    "leaf_hash",
    "node_hash",
    "Tree",
    "CompactRange",
    "verify_inclusion",
    "verify_consistency",
    "root_from_leaves",
]

HASH_BYTES = 32
EMPTY_ROOT = digests.sha256()
MAX_PROOF_HASHES = 64  # a tree of 2^63 leaves needs 63; more is not a proof of ours


def leaf_hash(data: bytes) -> bytes:
    """``SHA-256(0x00 || data)`` (RFC 9162 §2.1.1): the 32-byte hash of one leaf."""
    return digests.sha256(b"\x00", data)


def node_hash(left: bytes, right: bytes) -> bytes:
    """``SHA-256(0x01 || left || right)`` (RFC 9162 §2.1.1): the 32-byte hash of an interior node."""
    return digests.sha256(b"\x01", left, right)


def _split(n: int) -> int:
    """The largest power of two strictly smaller than ``n`` (``n`` ≥ 2): RFC 9162's ``k``."""
    return 1 << ((n - 1).bit_length() - 1)


def root_from_leaves(hashes: Sequence[bytes]) -> bytes:
    """MTH(D[n]) computed directly from the RFC's recursive definition (§2.1.1), O(n): the
    reference the fast :class:`Tree` is tested against, and what a small client-side check uses."""
    n = len(hashes)
    if n == 0:
        return EMPTY_ROOT
    if n == 1:
        return hashes[0]
    k = _split(n)
    return node_hash(root_from_leaves(hashes[:k]), root_from_leaves(hashes[k:]))


class Tree:
    """An append-only Merkle tree over 32-byte leaf hashes (RFC 9162 §2.1).

    Hash ``j`` of level ``h`` (kept end to end in one ``bytearray`` per level) is the hash of the
    complete subtree of leaves ``[j·2^h, (j+1)·2^h)``; appending
    a leaf adds the complete subtrees it closes. Every subtree the RFC's recursions ask for is
    either such a complete subtree or splits, at its ``k``, into one and a smaller right part.

    Args:
        hashes: leaf hashes to start with, in log order.
    """

    def __init__(self, hashes: Iterable[bytes] = ()) -> None:
        self._levels: list[bytearray] = [bytearray()]  # each level: its hashes end to end, 32 bytes each
        for h in hashes:
            self.append_hash(h)

    @property
    def size(self) -> int:
        """Number of leaves."""
        return len(self._levels[0]) // HASH_BYTES

    def _hash(self, height: int, j: int) -> bytes:
        return bytes(self._levels[height][j * HASH_BYTES : (j + 1) * HASH_BYTES])

    def append_hash(self, h: bytes) -> int:
        """Append one leaf hash (32 bytes); returns its index. Raises ValueError on a wrong length."""
        if len(h) != HASH_BYTES:
            raise ValueError(f"a leaf hash is {HASH_BYTES} bytes, not {len(h)}")
        level = 0
        self._levels[0] += h
        while len(self._levels[level]) % (2 * HASH_BYTES) == 0:  # a complete subtree of 2^(level+1) leaves closed
            row = self._levels[level]
            if len(self._levels) == level + 1:
                self._levels.append(bytearray())
            self._levels[level + 1] += node_hash(bytes(row[-2 * HASH_BYTES : -HASH_BYTES]), bytes(row[-HASH_BYTES:]))
            level += 1
        return self.size - 1

    def append(self, data: bytes) -> int:
        """Append one leaf by its data (hashed with :func:`leaf_hash`); returns its index."""
        return self.append_hash(leaf_hash(data))

    def leaf(self, index: int) -> bytes:
        """The hash of leaf ``index``."""
        if not 0 <= index < self.size:
            raise IndexError(f"leaf {index} outside 0..{self.size - 1}")
        return self._hash(0, index)

    def _range(self, lo: int, hi: int) -> bytes:
        """MTH of leaves ``[lo, hi)``, ``lo`` aligned to the largest power of two ≤ ``hi - lo``."""
        n = hi - lo
        if n & (n - 1) == 0:  # a complete subtree
            height = n.bit_length() - 1
            return self._hash(height, lo >> height)
        k = _split(n)
        return node_hash(self._range(lo, lo + k), self._range(lo + k, hi))

    def _check_size(self, size: int) -> None:
        if not 0 <= size <= self.size:
            raise ValueError(f"tree size {size} outside 0..{self.size}")

    def root(self, size: int | None = None) -> bytes:
        """MTH(D[size]) (RFC 9162 §2.1.1), 32 bytes; ``size`` defaults to the whole tree.

        Raises:
            ValueError: ``size`` is negative or larger than the tree.
        """
        size = self.size if size is None else size
        self._check_size(size)
        return EMPTY_ROOT if size == 0 else self._range(0, size)

    def inclusion_proof(self, index: int, size: int | None = None) -> list[bytes]:
        """PATH(index, D[size]) (RFC 9162 §2.1.3.1): the audit path of leaf ``index`` in the tree
        of the first ``size`` leaves, leaf side first; ⌈log2 size⌉ hashes at most.

        Raises:
            ValueError: ``index`` is not below ``size``, or ``size`` is larger than the tree.
        """
        size = self.size if size is None else size
        self._check_size(size)
        if not 0 <= index < size:
            raise ValueError(f"leaf {index} is not in a tree of {size}")
        path: list[bytes] = []
        lo, hi = 0, size
        while hi - lo > 1:  # walk down from the root; the RFC's recursion appends on the way back up
            k = _split(hi - lo)
            if index < lo + k:
                path.append(self._range(lo + k, hi))
                hi = lo + k
            else:
                path.append(self._range(lo, lo + k))
                lo += k
        path.reverse()
        return path

    def consistency_proof(self, old_size: int, size: int | None = None) -> list[bytes]:
        """PROOF(old_size, D[size]) (RFC 9162 §2.1.4.1): the hashes that prove the tree of the first
        ``old_size`` leaves is a prefix of the tree of ``size``; empty when ``old_size`` is 0 or
        equals ``size``.

        Raises:
            ValueError: ``old_size`` > ``size``, or ``size`` larger than the tree.
        """
        size = self.size if size is None else size
        self._check_size(size)
        if not 0 <= old_size <= size:
            raise ValueError(f"consistency from {old_size} to {size}")
        if old_size in (0, size):
            return []
        proof: list[bytes] = []
        m, lo, hi, whole = old_size, 0, size, True  # SUBPROOF(m, D[lo:hi], whole)
        while m != hi - lo:
            k = _split(hi - lo)
            if m <= k:
                proof.append(self._range(lo + k, hi))
                hi = lo + k
            else:
                proof.append(self._range(lo, lo + k))
                m, lo, whole = m - k, lo + k, False
        if not whole:
            proof.append(self._range(lo, hi))
        proof.reverse()
        return proof


class CompactRange:
    """The right edge of a tree of ``size`` leaves: the roots of its complete subtrees, left to
    right (one per set bit of ``size``, at most 64 hashes). Enough to append leaves and compute
    the root without the leaves before: what a monitor keeps between two visits.

    Args:
        size: leaves covered so far.  hashes: their complete subtree roots, largest first.

    Raises:
        ValueError: ``hashes`` is not one 32-byte hash per set bit of ``size``.
    """

    def __init__(self, size: int = 0, hashes: Sequence[bytes] = ()) -> None:
        if size < 0 or len(hashes) != size.bit_count() or any(len(h) != HASH_BYTES for h in hashes):
            raise ValueError(f"a compact range of {size} leaves has {max(size, 0).bit_count()} hashes of 32 bytes")
        self.size = size
        self.hashes = list(hashes)

    def append_hash(self, h: bytes) -> None:
        """Append one 32-byte leaf hash: it merges with the complete subtrees it closes."""
        n = self.size
        self.hashes.append(h)
        while n & 1:
            right = self.hashes.pop()
            self.hashes[-1] = node_hash(self.hashes[-1], right)
            n >>= 1
        self.size += 1

    def root(self) -> bytes:
        """MTH of the leaves covered (RFC 9162 §2.1.1): the subtree roots folded from the right."""
        if not self.hashes:
            return EMPTY_ROOT
        r = self.hashes[-1]
        for h in reversed(self.hashes[:-1]):
            r = node_hash(h, r)
        return r


def _check_proof(proof: Sequence[bytes], error: type[InclusionProofInvalid | ConsistencyProofInvalid]) -> None:
    if len(proof) > MAX_PROOF_HASHES or any(len(p) != HASH_BYTES for p in proof):
        raise error(f"a proof is at most {MAX_PROOF_HASHES} hashes of {HASH_BYTES} bytes", field="proof")


def verify_inclusion(index: int, size: int, leaf: bytes, proof: Sequence[bytes], root: bytes) -> None:
    """Check that ``leaf`` (a 32-byte leaf hash) is leaf ``index`` of the tree of ``size`` leaves
    whose root is ``root``, by the audit path ``proof`` (RFC 9162 §2.1.3.2, step by step).

    Raises:
        InclusionProofInvalid: it is not (``field`` ``proof``), or the proof is malformed.
    """
    _check_proof(proof, InclusionProofInvalid)
    if not 0 <= index < size:
        raise InclusionProofInvalid(f"leaf {index} cannot be in a tree of {size}", field="proof")
    fn, sn, r = index, size - 1, leaf
    for p in proof:
        if sn == 0:
            raise InclusionProofInvalid("the proof is longer than the tree is deep", field="proof")
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            while not fn & 1 and fn != 0:
                fn, sn = fn >> 1, sn >> 1
        else:
            r = node_hash(r, p)
        fn, sn = fn >> 1, sn >> 1
    if sn != 0 or r != root:
        raise InclusionProofInvalid(f"leaf {index} is not in the tree of {size} under this root", field="proof")


def verify_consistency(old_size: int, size: int, old_root: bytes, root: bytes, proof: Sequence[bytes]) -> None:
    """Check that the tree of ``old_size`` leaves with root ``old_root`` is a prefix of the tree of
    ``size`` leaves with root ``root`` (RFC 9162 §2.1.4.2, step by step). Equal sizes need equal
    roots and an empty proof; every tree extends the empty one.

    Raises:
        ConsistencyProofInvalid: it is not (``field`` ``proof``), or the proof is malformed.
    """
    _check_proof(proof, ConsistencyProofInvalid)
    if not 0 <= old_size <= size:
        raise ConsistencyProofInvalid(f"a log cannot shrink from {old_size} to {size} leaves", field="proof")
    if old_size == size:
        if proof or old_root != root:
            raise ConsistencyProofInvalid(f"two different roots for one tree of {size} leaves", field="proof")
        return
    if old_size == 0:
        if proof:
            raise ConsistencyProofInvalid("a proof from the empty tree is empty", field="proof")
        return
    if not proof:
        raise ConsistencyProofInvalid(f"no consistency proof from {old_size} to {size}", field="proof")
    path = list(proof)
    if old_size & (old_size - 1) == 0:  # the old tree is a complete subtree: its root starts the path
        path.insert(0, old_root)
    fn, sn = old_size - 1, size - 1
    while fn & 1:
        fn, sn = fn >> 1, sn >> 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            raise ConsistencyProofInvalid("the proof is longer than the tree is deep", field="proof")
        if fn & 1 or fn == sn:
            fr, sr = node_hash(c, fr), node_hash(c, sr)
            while not fn & 1 and fn != 0:
                fn, sn = fn >> 1, sn >> 1
        else:
            sr = node_hash(sr, c)
        fn, sn = fn >> 1, sn >> 1
    if sn != 0 or fr != old_root or sr != root:
        raise ConsistencyProofInvalid(
            f"the tree of {size} leaves does not extend the tree of {old_size} under these roots", field="proof"
        )
