"""``e2ee-bench membership``: what the membership log costs (issue 11).

* verifying one statement after the previous one (``membership_chain.verify_next``: link, actor,
  key id, Ed25519, policy), and parsing one (canonical JSON, field rules), in µs;
* verifying a whole 100-epoch log from its creation (parse + verify every statement), in ms;
* the bytes envelope v2 adds to every message (``ep``, ``mh``, ``kc`` in the protected header,
  base64url'd), against the same envelope without them, at small and large epochs;
* the size of a statement (3 and 100 members).

Everything runs in this process with the project's own code; medians of ``n`` runs.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Callable

from client_tui.core.record import now_ms
from shared import envelope, membership
from shared.content import Text
from shared.keys import Identity
from shared.membership_chain import Chain, verify_next

from .timing import measure

CHAIN_EPOCHS = 100


def _people(n: int) -> list[Identity]:
    return [Identity.generate(f"user{i:03d}", 2048) for i in range(n)]


def build_chain(people: list[Identity], epochs: int = CHAIN_EPOCHS) -> list[membership.Statement]:
    """A log of ``epochs`` statements: a creation by people[0] with people[1], then adds, renames
    and removals by several members (every op that changes members or title)."""
    m = [membership.member_of(p.public) for p in people]
    log = [membership.create(people[0], "bench-log", "bench", m[:2], ts=0)]
    while len(log) < epochs:
        head, i = log[-1], len(log)
        actor = people[i % 2]
        outside = [x for x in m if head.member(x.username) is None]
        if i % 3 == 0 and outside:
            st = membership.change(head, actor, "add", add=[outside[0]], ts=i)
        elif i % 3 == 1 and len(head.members) > 2:
            st = membership.change(head, actor, "remove", remove=[head.members[-1].username], ts=i)
        else:
            st = membership.change(head, actor, "title", title=f"bench {i}", ts=i)
        log.append(st)
    return log


def _statement_of(actor: Identity, members: int) -> membership.Statement:
    """A creation statement with ``members`` members (the others' key ids are random: only the
    size is measured, the statement is never verified)."""

    def kid() -> str:
        return base64.urlsafe_b64encode(os.urandom(32)).rstrip(b"=").decode()

    others = [membership.Member(f"member{i:03d}", kid(), kid()) for i in range(members - 1)]
    return membership.create(actor, "bench-size", "bench", [membership.member_of(actor.public), *others])


def _b64len(n: int) -> int:
    return (4 * n + 2) // 3


def extra_bytes(sender: Identity, recipients: list, epoch: int) -> dict:
    """Bytes of a v2 envelope, and what ``ep``/``mh``/``kc`` add to it (the same header without them)."""
    data = envelope.seal(
        Text("x" * 1024, ts=now_ms(), ctr=1),
        sender,
        "bench-log",
        [r.public for r in recipients],
        epoch=epoch,
        head="A" * 43,
    )
    doc = json.loads(data)
    header = json.loads(base64.urlsafe_b64decode(doc["protected"] + "=" * (-len(doc["protected"]) % 4)))
    without = {k: v for k, v in header.items() if k not in ("ep", "mh", "kc")}
    v1_len = _b64len(len(json.dumps(without, separators=(",", ":")).encode()))
    return {
        "epoch": epoch,
        "envelope_bytes": len(data),
        "protected_bytes": len(doc["protected"]),
        "added_bytes": len(doc["protected"]) - v1_len,
    }


def run(progress: Callable[[str], None] | None = None, n: int = 1000) -> dict:
    """Run the measurements; JSON-ready (µs and ms as named, bytes)."""
    say = progress or (lambda _label: None)
    say("membership: keys and a 100-epoch log")
    people = _people(6)
    keys = {p.username: p.public.sign_key for p in people}
    log = build_chain(people)
    signed = [st.signed for st in log]
    pairs = list(zip(log, log[1:], strict=False))
    say("membership: one statement")
    k = [0]

    def verify_one() -> None:
        prev, st = pairs[k[0] % len(pairs)]
        k[0] += 1
        verify_next(prev, st, keys[st.actor])

    verify = measure(verify_one, n)
    parse = measure(lambda: membership.parse(signed[k[0] % len(signed)]), n)
    say("membership: the whole log")

    def whole() -> None:
        Chain("bench-log").extend([membership.parse(s) for s in signed], lambda user, _kid: keys[user])

    chain = measure(whole, max(5, n // 50))
    say("membership: envelope bytes")
    sizes = [extra_bytes(people[0], people[:3], ep) for ep in (1, 100, 2**53 - 1)]
    sizes_by_members = {n_members: len(_statement_of(people[0], n_members).signed) for n_members in (3, 100, 256)}
    return {
        "params": {"n": n, "epochs": len(log)},
        "verify_statement_us": verify.median * 1000,
        "verify_statement_p95_us": verify.p95 * 1000,
        "parse_statement_us": parse.median * 1000,
        "chain_ms": chain.median,
        "chain_per_statement_us": chain.median * 1000 / len(log),
        "envelope": sizes,
        "statement_bytes": sizes_by_members,
    }


def section(result: dict, results: dict) -> str:
    """The membership log's lines of REPORT.md ("Beyond the article")."""
    env = result["envelope"]
    rows = [
        f"| verify one statement (link, actor, key id, Ed25519, policy) | {result['verify_statement_us']:.0f} µs |",
        f"| parse one statement (canonical JSON, field rules) | {result['parse_statement_us']:.0f} µs |",
        f"| verify a {result['params']['epochs']}-epoch log from its creation (parse + verify each) | "
        f"{result['chain_ms']:.1f} ms ({result['chain_per_statement_us']:.0f} µs per statement) |",
    ]
    rows += [
        f"| bytes v2 adds to an envelope (`ep`, `mh`, `kc`), epoch {e['epoch']:,} | +{e['added_bytes']} B "
        f"(of {e['envelope_bytes']:,} B: 1 KiB text, 3 recipients) |"
        for e in env
    ]
    rows += [f"| a statement with {k} members (signed form) | {v:,} B |" for k, v in result["statement_bytes"].items()]
    return (
        "### Membership log (issue 11)\n\nEvery change of members is a signed statement that each client "
        "verifies; every envelope names the epoch it was sealed to. What that costs here:\n\n"
        "| what | cost |\n|---|---|\n" + "\n".join(rows)
    )


def print_result(console, result: dict) -> None:
    """The same figures on the console."""
    console.print(
        f"membership: verify one statement {result['verify_statement_us']:.0f} µs (p95 "
        f"{result['verify_statement_p95_us']:.0f}), parse {result['parse_statement_us']:.0f} µs, "
        f"{result['params']['epochs']}-epoch log {result['chain_ms']:.1f} ms; envelope +"
        + ", +".join(f"{e['added_bytes']} B (epoch {e['epoch']})" for e in result["envelope"])
    )
