"""The membership vectors (``membership.json``): valid logs, refused statements, forks, and
envelopes checked against a log (docs/PROTOCOL.md §12).

Part of ``make_vectors.py`` (run that). Statements are deterministic (canonical JSON, fixed
times, Ed25519); tampered ones are built here from the document's rules, with knobs the real
builder (``shared.membership``) does not have.
"""

from __future__ import annotations

import hashlib
import json

from vectorlib import NOTICE, TS, b64u, det, key_pool, unb64u

from shared import content, envelope, membership
from shared.keys import Identity
from shared.membership import Member, member_of

CONTEXT = "e2ee-chat/v1/membership"


def canonical(body: dict) -> bytes:
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def raw_signed(body: dict | bytes, signer, *, sig: bytes | None = None) -> str:
    """A signed form built by the document: ``b64url(body) "." b64url(Ed25519(context "." b64url(body)))``."""
    body_b64 = b64u(body if isinstance(body, bytes) else canonical(body))
    if sig is None:
        sig = signer.sign(f"{CONTEXT}.{body_b64}".encode("ascii"))
    return f"{body_b64}.{b64u(sig)}"


def body_of(signed: str) -> dict:
    return json.loads(unb64u(signed.split(".")[0]))


def entry(m: Member) -> dict:
    return {"sk": m.sign_kid, "u": m.username, "wk": m.wrap_kid}


def next_body(base: membership.Statement, actor: Identity, op: str, members: list[Member], **over) -> dict:
    body = {
        "actor": actor.username,
        "admins": list(base.admins) if base.admins is not None else None,
        "akid": actor.sign_kid,
        "cid": base.cid,
        "ep": base.ep + 1,
        "members": [entry(m) for m in sorted(members, key=lambda m: m.username)],
        "op": op,
        "prev": base.hash,
        "title": base.title,
        "ts": TS + (base.ep + 1) * 1000,
        "typ": membership.TYP,
        "v": 1,
    }
    return body | over


def chain_doc(name: str, statements: list[membership.Statement]) -> dict:
    return {
        "name": name,
        "cid": statements[0].cid,
        "statements": [
            {
                "ep": s.ep,
                "op": s.op,
                "actor": s.actor,
                "signed": s.signed,
                "hash": s.hash,
                "body_json": unb64u(s.body_b64).decode("utf-8"),
                "signing_input_sha256": hashlib.sha256(membership.signing_input(s.body_b64)).hexdigest(),
                "members": list(s.usernames),
                "title": s.title,
                "admins": list(s.admins) if s.admins is not None else None,
            }
            for s in statements
        ],
    }


def membership_vectors(ids: dict[str, Identity]) -> dict:
    alice, bob, carol, mallory = (ids[n] for n in ("alice", "bob", "carol", "mallory"))
    pool = key_pool()
    carol2 = Identity("carol", pool[0].wrap_private, pool[0].sign_private)  # carol's keys after a rotation
    bob_other = Identity("bob", pool[1].wrap_private, pool[1].sign_private)  # a key bob never bound
    m = {n: member_of(i.public) for n, i in ids.items()}

    def ts(ep: int) -> int:
        return TS + ep * 1000

    # -- chain A: every op, in order
    a0 = membership.create(alice, "conv-m1", "Launch ✓ team", [m["alice"], m["bob"]], ts=ts(0))
    a1 = membership.change(a0, bob, "add", add=[m["carol"]], ts=ts(1))
    a2 = membership.change(a1, carol, "title", title="Launch team — final 🚀", ts=ts(2))
    a3 = membership.change(a2, carol, "update", keys=member_of(carol2.public), ts=ts(3))
    a4 = membership.change(a3, alice, "admins", admins=["alice"], ts=ts(4))
    a5 = membership.change(a4, alice, "remove", remove=["bob"], ts=ts(5))
    a6 = membership.change(a5, carol2, "remove", remove=["carol"], ts=ts(6))
    chain_a = [a0, a1, a2, a3, a4, a5, a6]
    # -- chain B: another conversation (its statements replayed into A must be refused)
    b0 = membership.create(alice, "conv-m3", "elsewhere", [m["alice"], m["mallory"]], ts=ts(0))
    b1 = membership.change(b0, alice, "add", add=[m["bob"]], ts=ts(1))
    chains = [chain_doc("every_op", chain_a), chain_doc("other_conversation", [b0, b1])]

    neg: list[dict] = []

    def add(name: str, about: str, upto: int, statement: str, code: str, field: str | None, log=None) -> None:
        neg.append(
            {
                "name": name,
                "about": about,
                "log": [s.signed for s in (log if log is not None else chain_a[:upto])],
                "statement": statement,
                "code": code,
                "field": field,
            }
        )

    members_1 = [m["alice"], m["bob"], m["carol"]]
    add_mallory = next_body(a1, bob, "add", [*members_1, m["mallory"]])
    add(
        "forged_signature",
        "bob's add of mallory signed by mallory's key (akid still bob's)",
        2,
        raw_signed(add_mallory, mallory.sign_private),
        "statement_signature_invalid",
        "sig",
    )
    altered = body_of(a2.signed) | {"members": [entry(x) for x in [*members_1, m["mallory"]]]}
    add(
        "body_altered",
        "epoch 2 with mallory added to its members after carol signed it",
        2,
        raw_signed(altered, None, sig=a2.sig),
        "statement_signature_invalid",
        "sig",
    )
    add(
        "skipped_epoch",
        "alice's statement at epoch 3 after epoch 1",
        2,
        raw_signed(next_body(a1, alice, "title", members_1, ep=3, title="skip"), alice.sign_private),
        "epoch_skipped",
        "ep",
    )
    add(
        "broken_link",
        "epoch 2 whose prev is the hash of epoch 0",
        2,
        raw_signed(next_body(a1, alice, "title", members_1, prev=a0.hash, title="fork"), alice.sign_private),
        "chain_broken",
        "prev",
    )
    add(
        "non_member_actor",
        "mallory (not a member) adds herself, signed by her own key",
        2,
        raw_signed(next_body(a1, mallory, "add", [*members_1, m["mallory"]]), mallory.sign_private),
        "actor_not_member",
        "actor",
    )
    add(
        "actor_key_not_bound",
        "bob signs with a key he never bound in the log",
        2,
        raw_signed(next_body(a1, bob_other, "add", [*members_1, m["mallory"]]), bob_other.sign_private),
        "actor_key_mismatch",
        "akid",
    )
    add(
        "replayed_from_other_conversation",
        "a valid statement of conv-m3 (alice adds bob) in conv-m1's log",
        1,
        b1.signed,
        "conversation_mismatch",
        "cid",
    )
    add("first_statement_not_a_creation", "a log that starts at epoch 1", 0, a1.signed, "epoch_skipped", "ep")
    add(
        "create_after_creation",
        "a second creation at epoch 2, linked",
        2,
        raw_signed(next_body(a1, alice, "create", members_1), alice.sign_private),
        "policy_violation",
        "op",
    )
    add(
        "non_admin_adds",
        "carol is not an admin (admins: alice) and adds mallory",
        5,
        raw_signed(next_body(a4, carol2, "add", [*a4.members, m["mallory"]]), carol2.sign_private),
        "policy_violation",
        "op",
    )
    add(
        "add_that_removes",
        "an add of mallory that also drops bob",
        2,
        raw_signed(next_body(a1, alice, "add", [m["alice"], m["carol"], m["mallory"]]), alice.sign_private),
        "policy_violation",
        "op",
    )
    add(
        "update_of_another_member",
        "carol's update that changes bob's keys",
        3,
        raw_signed(
            next_body(a2, carol, "update", [m["alice"], member_of(bob_other.public), m["carol"]]), carol.sign_private
        ),
        "policy_violation",
        "op",
    )
    add(
        "title_that_adds",
        "a title change that also adds mallory",
        2,
        raw_signed(next_body(a1, alice, "title", [*members_1, m["mallory"]], title="new"), alice.sign_private),
        "policy_violation",
        "op",
    )
    spaced = canonical(body_of(a1.signed)).replace(b",", b", ")
    add(
        "not_canonical",
        "epoch 1 with spaces after commas, signed by bob",
        1,
        raw_signed(spaced, bob.sign_private),
        "statement_malformed",
        "body",
    )
    unsorted = body_of(a1.signed)
    unsorted["members"] = list(reversed(unsorted["members"]))
    add(
        "members_not_sorted",
        "epoch 1 with its members in reverse order, signed by bob",
        1,
        raw_signed(unsorted, bob.sign_private),
        "statement_malformed",
        "members",
    )
    add(
        "unknown_member",
        "epoch 1 with an extra body member 'note', signed by bob",
        1,
        raw_signed(body_of(a1.signed) | {"note": "x"}, bob.sign_private),
        "statement_malformed",
        "body",
    )
    add(
        "admin_not_a_member",
        "admins names mallory, who is not a member",
        1,
        raw_signed(body_of(a1.signed) | {"admins": ["mallory"]}, bob.sign_private),
        "statement_malformed",
        "admins",
    )
    add(
        "title_with_control",
        "a title with an escape character",
        2,
        raw_signed(next_body(a1, alice, "title", members_1, title="x\u001b[31m"), alice.sign_private),
        "statement_malformed",
        "title",
    )
    add(
        "signature_63_bytes",
        "epoch 1 with its signature cut by one byte",
        1,
        f"{a1.body_b64}.{b64u(a1.sig[:63])}",
        "statement_malformed",
        "sig",
    )

    rival = membership.change(a1, bob, "add", add=[m["mallory"]], ts=ts(2))
    forks = [
        {
            "name": "two_valid_statements_for_epoch_2",
            "about": "carol's title change and bob's add of mallory, "
            "both signed by members of epoch 1: each verifies alone; seen together they are a fork",
            "log": [s.signed for s in chain_a[:2]],
            "a": a2.signed,
            "b": rival.signed,
            "code": "membership_fork",
            "field": "ep",
        },
        {
            "name": "log_older_than_verified",
            "about": "epochs 0-3 were verified; the relay now serves 0-1",
            "log": [s.signed for s in chain_a[:2]],
            "verified": {"ep": a3.ep, "hash": a3.hash},
            "code": "membership_fork",
            "field": "ep",
        },
        {
            "name": "other_statement_at_verified_epoch",
            "about": "epoch 2 verified as carol's title change; the relay now serves bob's add of mallory as epoch 2",
            "log": [*(s.signed for s in chain_a[:2]), rival.signed],
            "verified": {"ep": a2.ep, "hash": a2.hash},
            "code": "membership_fork",
            "field": "ep",
        },
    ]
    return {
        "notice": NOTICE,
        "about": "Membership statements (PROTOCOL.md §12). Keys: keys.json users; carol's keys after "
        "her update and bob's unbound key are key_pool.json entries 0 and 1 (extra_keys). "
        "chains verify in order; each negative: verify log, then statement must fail with "
        "code and field; forks: see each; audience: check the envelope against chain "
        "every_op (log), then open it as alice when code is null.",
        "signing_context": CONTEXT,
        "extra_keys": [
            {"username": i.username, "pool_index": n, "wrap_kid": i.wrap_kid, "sign_kid": i.sign_kid}
            for n, i in ((0, carol2), (1, bob_other))
        ],
        "chains": chains,
        "negative": neg,
        "forks": forks,
        "audience": audience_vectors(ids, chain_a, carol2),
    }


def audience_vectors(ids: dict[str, Identity], chain: list[membership.Statement], carol2: Identity) -> list[dict]:
    alice, bob, carol, mallory = (ids[n] for n in ("alice", "bob", "carol", "mallory"))
    out = []

    def add(
        name: str,
        about: str,
        sender: Identity,
        ep: int,
        to: list[Identity],
        code: str | None,
        field: str | None,
        mh: str | None = None,
    ) -> None:
        st = chain[min(ep, len(chain) - 1)]
        data = envelope._seal_with(
            content.Text(f"sealed to epoch {ep}", ts=TS, ctr=ep + 1),
            sender,
            st.cid,
            [r.public for r in to],
            epoch=ep,
            head=mh or st.hash,
            cek=det(f"aud/{name}/cek", 32),
            iv=det(f"aud/{name}/iv", 12),
            message_id=det(f"aud/{name}/mid", 16),
            scheme="padme",
            max_bytes=1 << 18,
            max_recipients=256,
        )
        out.append(
            {
                "name": name,
                "about": about,
                "sender": sender.username,
                "conversation": st.cid,
                "envelope": data.decode(),
                "body": f"sealed to epoch {ep}",
                "code": code,
                "field": field,
            }
        )

    add("members_of_epoch_1", "alice seals to alice, bob, carol at epoch 1", alice, 1, [alice, bob, carol], None, None)
    add(
        "members_of_epoch_5",
        "alice seals to alice and carol's new key at epoch 5",
        alice,
        5,
        [alice, carol2],
        None,
        None,
    )
    add(
        "extra_recipient",
        "epoch 1 sealed to mallory too",
        alice,
        1,
        [alice, bob, carol, mallory],
        "audience_mismatch",
        "rkids",
    )
    add("missing_recipient", "epoch 1 sealed without carol", alice, 1, [alice, bob], "audience_mismatch", "rkids")
    add(
        "other_order",
        "epoch 1 sealed to its members in another order",
        alice,
        1,
        [bob, alice, carol],
        "audience_mismatch",
        "rkids",
    )
    add(
        "removed_member_still_sealed",
        "epoch 5 (bob removed) sealed to bob too",
        alice,
        5,
        [alice, bob, carol2],
        "audience_mismatch",
        "rkids",
    )
    add(
        "old_key_after_update",
        "epoch 4 sealed to carol's key from before her update",
        alice,
        4,
        [alice, bob, carol],
        "audience_mismatch",
        "rkids",
    )
    add(
        "sender_not_a_member",
        "mallory seals to exactly the members of epoch 1",
        mallory,
        1,
        [alice, bob, carol],
        "audience_mismatch",
        "snd",
    )
    add(
        "other_statement_hash",
        "epoch 1 with the hash of epoch 2 as mh",
        alice,
        1,
        [alice, bob, carol],
        "epoch_mismatch",
        "mh",
        mh=chain[2].hash,
    )
    add("epoch_not_in_log", "epoch 9 (the log ends at 6)", alice, 9, [alice], "epoch_mismatch", "ep")
    return out
