"""Becoming one account on this machine: register (make keys, publish them), log in (open the
keystore), and open what is kept locally (trust store, history cache, cursor, counters, outbox).

Key generation, Argon2id and SQLite run in worker threads. The keystore is written once, through
:func:`client_tui.core.keystore.save_bundle` (mode 0600, atomic); a profile that existed before a
registration is moved aside, never overwritten.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import TYPE_CHECKING

from shared.errors import E2EEError, ErrorCode, KeyAnswerMismatch
from shared.keys import Identity

from . import keystore, profiles
from .events import LocalDataWarning
from .history import History
from .inbox import Progress
from .transparency import Transparency

if TYPE_CHECKING:
    from .client import ChatClient

log = logging.getLogger("e2ee.client")


async def register(c: ChatClient, password: str, passphrase: str, bits: int, identity: Identity | None) -> Identity:
    """See :meth:`ChatClient.register`."""
    if not passphrase:
        raise keystore.KeystoreError("a passphrase is required", field="passphrase")
    await c.rest.check_level()  # a relay of a lower level learns nothing: no account, no key published
    if identity is None:
        identity = await asyncio.to_thread(Identity.generate, c.username, bits)
    pub = identity.public.to_json()
    data = await c.rest.request(
        "POST",
        "/v1/accounts",
        {"username": c.username, "password": password, "wrap_key": pub["wrap_key"], "sign_key": pub["sign_key"]},
        auth=False,
    )
    if data.get("username") != c.username:  # the name is ours to decide, never the relay's
        raise KeyAnswerMismatch(
            f"the relay registered {str(data.get('username'))[:40]!r}, not {c.username!r}", field="username"
        )
    if c.profile.exists() and any(c.profile.iterdir()):
        aside = c.profile.with_name(f"{c.username}.replaced-{int(time.time())}")
        log.warning("a profile for %s existed; moved to %s", c.username, aside)
        c.profile.rename(aside)
        c.transparency = Transparency(c)  # the heads held were the replaced profile's
    bundle = keystore.KeyBundle(identity, b"").complete(c.wall_clock())  # made now: the schedule starts here
    await asyncio.to_thread(keystore.save_bundle, c.keystore_path, bundle, passphrase, c.kdf)
    await open_local(c, bundle, passphrase, fresh=True)
    await c.rest.login(password)
    await monitor_own_keys(c)
    c.epochs.start()  # the hourly key schedule (client_tui.core.epochs)
    return identity


async def login(c: ChatClient, password: str, passphrase: str) -> Identity:
    """See :meth:`ChatClient.login`."""
    if not c.keystore_path.exists():  # name the profiles this user has instead
        raise profiles.missing_keystore(c.profile.parent.parent, c.server_url, c.username)
    bundle = await asyncio.to_thread(keystore.load_bundle, c.keystore_path, passphrase)
    await open_local(c, bundle, passphrase)
    await c.rest.login(password)
    await c._finish_rotation()  # a rotation published before its keystore save failed
    await monitor_own_keys(c)
    await c.epochs.after_login()  # a scheduled rotation, retired keys erased; then hourly
    assert c.identity is not None
    return c.identity


async def monitor_own_keys(c: ChatClient, *, quiet: bool = True) -> int:
    """The key transparency monitor for this account (docs/PROTOCOL.md §14): the relay's log must
    hold exactly the keys this keystore published under the username: every current, retired and
    erased key (``ChatClient.my_public_keys``), and nothing else but a pending rotation's.
    A failure is alerted (``TransparencyAlert`` event, warning) and does not stop the login: the
    user is told, and the keys of others are still checked on every fetch. A relay that does not
    answer is tried again at the next login. Returns the leaves read (0 after a failure).

    Raises (only when not ``quiet``): TransparencyFailed, ClientError."""
    assert c.identity is not None
    mine = {(i.wrap_kid, i.sign_kid) for i in c.my_public_keys()}
    pending = c._bundle.pending if c._bundle is not None else None
    waiting = pending is not None and pending.wrap_kid != c.identity.wrap_kid  # not the keys in use already
    unpublished = {(pending.wrap_kid, pending.sign_kid)} if waiting and pending is not None else set()
    try:
        required = mine - unpublished  # a pending rotation's keys: maybe not published yet
        return await c.transparency.monitor(mine, required)
    except E2EEError as exc:
        log.warning("key transparency monitor: %s", exc.code)
        if not quiet:
            raise
        return 0


async def _open_history(c: ChatClient) -> History:
    assert c.trust is not None
    missing = not c.history_path.exists() and c.trust.history_made
    history = await History.open(c.history_path, c._local_key)
    lost = (
        "was damaged and set aside as " + history.set_aside.name
        if history.set_aside
        else "is missing"
        if missing
        else ""
    )
    if lost:
        text = (
            f"Your message history on this machine ({c.history_path.name}) {lost}. Messages are "
            "fetched again from the relay; those it no longer keeps cannot be shown again."
        )
        c.local_warnings.append(text)
        await c.events.put(LocalDataWarning(text))
    c.trust.history_made = True
    return history


async def open_local(c: ChatClient, bundle: keystore.KeyBundle, passphrase: str, *, fresh: bool = False) -> None:
    """See :meth:`ChatClient.open_local`."""
    had_trust_key = bool(bundle.trust_key) and not fresh
    bundle = bundle.complete(c.wall_clock())  # a file older than the key schedule: its keys date from now
    if bundle.upgrade:  # an older keystore: it gains its missing keys and the normalised passphrase form
        await asyncio.to_thread(keystore.save_bundle, c.keystore_path, bundle, passphrase, c.kdf)
    c.identity, c.retired = bundle.identity, bundle.retired
    c._passphrase = passphrase
    c._local_key = bundle.local_key
    c._bundle = bundle
    c._note_keystore()  # as read (and upgraded) now: a later save reads it again only if another session wrote it
    c._open_trust(bundle.trust_key, existed=had_trust_key)
    profiles.remember(c.profile, c.server_url)
    c.membership.load()  # the verified heads, kept in the trust store
    if c.history is None:
        c.history = await _open_history(c)
    meta = await c.history.meta()
    legacy = c.profile / "state.json"
    if not meta and legacy.exists():  # cursor and counters of an older client
        doc = json.loads(legacy.read_text())
        meta = {"cursor": doc.get("cursor", 0), "counters": doc.get("counters", {})}
    c.progress = Progress.from_meta(meta)
    c.receipts.load(meta)
    c.expiry.load(meta)
    c.inbox.seen = await c.history.seen()
    await c.pending.load()
    c._pos = max(float(c.progress.cursor), await c.history.max_pos())
    for conv in await c.history.conversations():
        c.titles[conv["id"]] = conv["title"]
        c.members[conv["id"]] = conv["members"]
        c.unread[conv["id"]] = conv["unread"]
        if not conv["active"]:
            c.inactive.add(conv["id"])
    await c.outgoing.restore(await c.history.outbox())
    await c.expiry.sweep()  # what expired while the client was closed; the timer for the next
    c._save_state()
    # sealed to keys this session has
    await c._retry_unreadable((ErrorCode.NOT_A_RECIPIENT, ErrorCode.UNWRAP_FAILED))
