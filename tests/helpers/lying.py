"""A relay that lies to one client: the real relay process answers, and what one client is served
is rewritten on the way (the log, the conversation list, key answers). A hostile relay controls
every byte it serves; this puts that control in a test's hands, one rewrite at a time."""

from __future__ import annotations

import copy
import json
import sqlite3
import time
from collections.abc import Callable

from client_tui.core import ChatClient
from client_tui.core.errors import ClientError
from shared import kt, membership, merkle
from shared.b64 import b64u_decode, b64u_encode
from shared.keys import PublicIdentity

Rewrite = Callable[[str, str, dict | None, dict], dict]
"""``(method, path, request body, answer) -> answer served``; raise ClientError to refuse."""


def lie(client: ChatClient, *rewrites: Rewrite) -> None:
    """Every relay answer ``client`` gets from now on passes through ``rewrites`` (in order)."""
    real = client.rest.request

    async def served(method: str, path: str, body: dict | None = None, auth: bool = True) -> dict:
        answer = await real(method, path, body, auth)
        for rewrite in rewrites:
            answer = rewrite(method, path, body, copy.deepcopy(answer))
        return answer

    client.rest.request = served


def refuse(client: ChatClient, op: str) -> list[bool]:
    """The relay refuses (500) every statement of ``op`` that ``client`` posts while the returned
    switch holds True (``switch[0] = False`` lets them through again)."""
    real, switch = client.rest.request, [True]

    async def served(method: str, path: str, body: dict | None = None, auth: bool = True) -> dict:
        if switch[0] and method == "POST" and path.endswith("/log") and membership.parse(body["statement"]).op == op:
            raise ClientError("the relay refused it", code="internal_error", status=500)
        return await real(method, path, body, auth)

    client.rest.request = served
    return switch


def flip_signature(signed: str) -> str:
    """The statement with one bit of its signature flipped (it no longer verifies)."""
    body, sig = signed.split(".")
    raw = bytearray(b64u_decode(sig))
    raw[0] ^= 1
    return f"{body}.{b64u_encode(bytes(raw))}"


def log_of(cid: str, change: Callable[[list[str], dict], list[str]]) -> Rewrite:
    """Serve ``cid``'s log with its statements changed by ``change(statements, answer)``."""

    def rewrite(method: str, path: str, body, answer: dict) -> dict:
        if method == "GET" and path.split("?")[0] == f"/v1/conversations/{cid}/log":
            answer["statements"] = change(answer["statements"], answer)
        return answer

    return rewrite


def listed(cid: str, **fields) -> Rewrite:
    """Serve ``cid`` in the conversation list with ``fields`` replaced."""

    def rewrite(method: str, path: str, body, answer: dict) -> dict:
        if method == "GET" and path == "/v1/conversations":
            for conv in answer["conversations"]:
                if conv["id"] == cid:
                    conv.update(fields)
        return answer

    return rewrite


def head_at(cid: str, st: membership.Statement) -> Rewrite:
    """The log's and the list's head of ``cid`` said to be ``st`` (as a relay that withholds what
    follows it would say)."""

    def rewrite(method: str, path: str, body, answer: dict) -> dict:
        if method == "GET" and path.split("?")[0] == f"/v1/conversations/{cid}/log":
            answer["epoch"], answer["head"] = st.ep, st.hash
        return listed(cid, epoch=st.ep, head=st.hash)(method, path, body, answer)

    return rewrite


def only_up_to(cid: str, ep: int) -> Rewrite:
    """Withhold every statement of ``cid`` after epoch ``ep`` (the head said is epoch ``ep``'s)."""

    def change(statements: list[str], answer: dict) -> list[str]:
        return [s for s in statements if membership.parse(s).ep <= ep]

    return log_of(cid, change)


async def logged_substitute(relay, client: ChatClient, ident: PublicIdentity) -> dict:
    """The key answer a relay has to serve now to pass ``ident`` off as ``ident.username``'s keys:
    a leaf for them planted in its key transparency log (written into the relay's SQLite file, as
    a relay holding its database can), with its inclusion proof to the relay's own signed head
    (PROTOCOL.md §14). The owner's monitor would find it; the client it is served to accepts it."""
    db = sqlite3.connect(relay.data_dir / "relay.db")
    with db:
        idx = db.execute("SELECT coalesce(max(idx), -1) + 1 FROM kt_log").fetchone()[0]
        counter = db.execute("SELECT count(*) FROM kt_log WHERE username = ?", (ident.username,)).fetchone()[0]
        leaf = kt.KeyLeaf(ident.username, counter, ident.wrap_kid, ident.sign_kid)
        db.execute(
            "INSERT INTO kt_log (idx, user_key_id, username, leaf, leaf_hash, created_at_ms) VALUES (?, ?, ?, ?, ?, ?)",
            (idx, -1 - idx, ident.username, leaf.data().decode(), leaf.hash(), int(time.time() * 1000)),
        )
    db.close()
    head = kt.TreeHead.from_json((await client.rest.request("GET", "/v1/kt/head"))["head"])
    entries = (await client.rest.request("GET", f"/v1/kt/entries?start=0&end={head.size}"))["entries"]
    tree = merkle.Tree(kt.KeyLeaf.from_json(e).hash() for e in entries)
    proof = kt.Inclusion(idx, leaf, tree.inclusion_proof(idx, head.size), head)
    return json.loads(json.dumps({**ident.to_json(), "kt": proof.to_json()}))
