"""``e2ee-chat audit``: the key transparency heads this client holds for the relay, checked against
the relay's log now (docs/PROTOCOL.md §14).

Prints what is held (tree size, root, when the relay signed it, the pinned log key), the pairs of
signed heads that no proof joined (the relay's evidence of a fork, kept since it was found), the heads
other users showed this client that the relay has not proven consistent yet (asked again now), the
relay's current head and whether it extends the held one (a consistency proof), and the monitor's verdict
on the user's own keys (every leaf under the name is a key this keystore published; the current
keys are in the log). Needs the keystore passphrase (the keys published) and the relay password
(reading the log's leaves takes a token: they name every account).

Exit status: 0 consistent, 5 the log does not verify or the relay answers its routes with errors
(an alert line says how), 1 other failures (the relay not reachable at all).
"""

from __future__ import annotations

import time

from shared.b64 import b64u_encode
from shared.errors import TransparencyFailed
from shared.keys import key_id

from .commands import client_for, err, open_local
from .core import account
from .safe import one_line

EXIT_LOG_INCONSISTENT = 5


def _head_line(label: str, head) -> str:
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(head.timestamp_ms / 1000))
    return f"{label}: {head.size} keys, root {b64u_encode(head.root)}, signed {when}"


async def audit(args) -> int:
    """Run the audit for ``args.user`` at ``args.server``; the exit status (module docstring)."""
    client = client_for(args)
    try:
        await open_local(client, args.passphrase)
        kt = client.transparency
        held = kt.head
        print(f"relay {client.server_url}, account {client.username}")
        if held is None or kt.log_key is None:
            print("held: no head yet (this client has not verified the relay's log before)")
        else:
            print(f"log key: {key_id(kt.log_key)}")
            print(_head_line("held", held))
            print(f"monitored: the first {kt.edge.size} keys of the log")
        for e in kt.evidence:  # what the relay signed that no proof joins: its own evidence of a fork
            print(f"evidence (shown by {one_line(e.by)}): {_head_line('held', e.held)}; {_head_line('shown', e.shown)}")
        for u in kt.unproven:  # gossiped heads the relay has not proven consistent yet: asked again now
            print(f"unproven: a head of {u.head.size} keys {one_line(u.by)} showed you, asked {u.tries} time(s)")
        await client.rest.login(args.password)  # a token, nothing else: the monitor runs below
        try:
            current = await kt.refresh()
            print(_head_line("relay", current))
            if kt.unproven:
                print(f"still unproven: {len(kt.unproven)} head(s) others showed you (the relay did not answer)")
            if held is not None:
                print(f"consistent: the relay's log extends the held head of {held.size} keys")
            read = await account.monitor_own_keys(client, quiet=False)
            print(f"monitor: {read} new keys read; yours in the log: {len(kt.mine)}, none planted under your name")
        except TransparencyFailed as exc:
            print(f"ALERT {exc.code}: {one_line(exc.message)}")
            err(f"the relay's key directory does not verify ({exc.code})")
            return EXIT_LOG_INCONSISTENT
        return 0
    finally:
        await client.close()
