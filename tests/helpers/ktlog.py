"""A key transparency log held by a test that answers key fetches itself (``httpx2.MockTransport``):
its own Ed25519 log key, leaves, signed heads, and the ``/v1/kt/*`` answers (PROTOCOL.md §14), so a
client's proof checks run for real against whatever keys the test chooses to publish."""

from __future__ import annotations

import time
from urllib.parse import parse_qs

import httpx2
from cryptography.hazmat.primitives.asymmetric import ed25519

from shared import kt, merkle
from shared.b64 import b64u_encode
from shared.keys import PublicIdentity, spki_der


class SignedLog:
    """Leaves appended by :meth:`publish`; answers carry proofs to a head signed by :attr:`key`."""

    def __init__(self) -> None:
        self.key = ed25519.Ed25519PrivateKey.generate()
        self.tree = merkle.Tree()
        self.leaves: list[kt.KeyLeaf] = []

    def publish(self, ident: PublicIdentity, counter: int = 0) -> int:
        """Log ``ident`` as its user's ``counter``-th key; returns the leaf index."""
        leaf = kt.KeyLeaf(ident.username, counter, ident.wrap_kid, ident.sign_kid)
        self.leaves.append(leaf)
        return self.tree.append(leaf.data())

    def head(self) -> kt.TreeHead:
        return kt.sign_head(self.key, self.tree.size, self.tree.root(), int(time.time() * 1000))

    def key_answer(self, ident: PublicIdentity) -> dict:
        """``GET /v1/users/{name}/keys``'s JSON for ``ident``, with the proof of its newest leaf."""
        index = max(i for i, leaf in enumerate(self.leaves) if leaf.kids == (ident.wrap_kid, ident.sign_kid))
        head = self.head()
        proof = kt.Inclusion(index, self.leaves[index], self.tree.inclusion_proof(index), head)
        return {**ident.to_json(), "kt": proof.to_json()}

    def route(self, request: httpx2.Request) -> httpx2.Response | None:
        """The answer to ``/v1/kt/head`` or ``/v1/kt/consistency``; None for other paths."""
        if request.url.path == "/v1/kt/head":
            return httpx2.Response(
                200, json={"head": self.head().to_json(), "log_key": b64u_encode(spki_der(self.key.public_key()))}
            )
        if request.url.path == "/v1/kt/consistency":
            q = {k: int(v[0]) for k, v in parse_qs(request.url.query.decode()).items()}
            proof = self.tree.consistency_proof(q["from"], q.get("to", self.tree.size))
            return httpx2.Response(200, json={"from": q["from"], "to": q.get("to"), "proof": kt.encode_proof(proof)})
        return None
