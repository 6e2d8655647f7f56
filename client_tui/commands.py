"""Headless sub-commands of ``e2ee-chat`` for scripts: ``register``, ``send``, ``tail``, ``search``
(``keys`` lives in :mod:`.cli`). Secrets are gathered by the caller *before* the event loop
starts (so the first Ctrl+C at a prompt ends the program); errors reach the user through
:func:`fail` as one line.

``tail`` and ``search`` work from the history stored on this machine when the relay cannot be
reached (and say so on standard error); ``search`` never needs the relay at all.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import sys
import time
from typing import Any

from shared.errors import E2EEError, ErrorCode
from shared.keys import fingerprint

from .core import (
    AudienceGrew,
    ChatClient,
    ClientError,
    Delivered,
    KeyChangeBlocked,
    RecordChanged,
    Sent,
    keystore,
    profiles,
)
from .core.record import Record
from .inspector import unreadable_text
from .messagebody import line_words, quote_words
from .safe import harmless, one_line
from .search import matcher
from .userwords import describe

DEFAULT_SERVER = "http://127.0.0.1:8765"
EXIT_FAILED = 1
EXIT_BLOCKED = 3
EXIT_AUDIENCE = 4  # members joined after the message was written: not sent to them without consent


def err(text: str) -> None:
    print(f"e2ee-chat: {text}", file=sys.stderr, flush=True)


def fail(exc: BaseException) -> int:
    """Print ``exc`` as one line (no class names, no traceback); the exit status it means."""
    err(describe(exc))
    if isinstance(exc, AudienceGrew):
        print(
            f"  not sent: {one_line(', '.join(exc.users))} joined after it was written; send it again to "
            "write it for everyone now",
            file=sys.stderr,
        )
        return EXIT_AUDIENCE
    if isinstance(exc, KeyChangeBlocked):
        for user in exc.users or ():
            print(
                f"  review {one_line(user)}'s new key with: e2ee-chat keys show {one_line(user)}; then keys "
                "accept or keys verify",
                file=sys.stderr,
            )
        return EXIT_BLOCKED
    return EXIT_FAILED


LOOK_ONLY = ("keys", "audit", "search")
"""Commands that only look: they never rotate or erase keys as a side effect (``keys rotate`` rotates
because it is asked to)."""


def client_for(args) -> ChatClient:
    lifetime = getattr(args, "key_lifetime", None)  # days (cli._prepare fills it from E2EE_KEY_LIFETIME_DAYS)
    client = ChatClient(
        args.server,
        args.user,
        args.profile,
        cafile=args.cafile,
        key_lifetime_days=7.0 if lifetime is None else lifetime,
    )
    client.epochs.enabled = getattr(args, "command", None) not in LOOK_ONLY
    return client


async def open_local(client: ChatClient, passphrase: str) -> None:
    """Open the keystore and the local stores (history, contacts) without the relay.

    Raises:
        KeystoreError (naming the profiles that exist when there is none here), WrongPassphrase.
    """
    if not client.keystore_path.exists():
        raise profiles.missing_keystore(client.profile.parent.parent, client.server_url, client.username)
    bundle = await asyncio.to_thread(keystore.load_bundle, client.keystore_path, passphrase)
    await client.open_local(bundle, passphrase)


async def logged_in(args, *, offline_ok: bool = False) -> tuple[ChatClient, bool]:
    """The user's client, logged in; with ``offline_ok`` a relay that cannot be reached leaves it
    open on this machine only (``online`` False, a note on standard error)."""
    client = client_for(args)
    try:
        await client.login(args.password, args.passphrase)
    except ClientError as exc:
        if not (offline_ok and exc.code == ErrorCode.UNREACHABLE and client.identity is not None):
            await client.close()
            raise
        err(f"offline: {describe(exc)}; showing what is stored on this machine")
        online = False
    except BaseException:
        await client.close()
        raise
    else:
        online = True
    for text in client.local_warnings:  # what was lost or damaged on this machine, said once, in words
        err(f"warning: {harmless(text)}")
    return client, online


async def register(args) -> int:
    client = client_for(args)
    try:
        await client.rest.check_level()  # a relay of another level is refused before the key's long wait
        print(f"generating an RSA-{args.bits} key for {client.username}…", file=sys.stderr, flush=True)
        ident = await client.register(args.password, args.passphrase, bits=args.bits)
        print(
            f"registered {client.username} at {client.server_url}\n  wrap key  {fingerprint(ident.wrap_kid)}\n"
            f"  sign key  {fingerprint(ident.sign_kid)}\n  keys in   {client.keystore_path}"
        )
        where = "" if client.server_url == DEFAULT_SERVER else f" --server {client.server_url}"
        where += f" --cafile {client.cafile}" if client.cafile else ""
        print(
            f"next: e2ee-chat{where} --user {client.username}   (or: e2ee-chat send{where} --user "
            f"{client.username} --to NAME --text TEXT)"
        )
        return 0
    finally:
        await client.close()


async def find_conversation(client: ChatClient, to: list[str], title: str | None) -> str:
    wanted = {client.username, *to}
    convs = await client.refresh_conversations()
    for cid in reversed(list(convs)):
        if set(convs[cid]) == wanted:
            return cid
    return await client.create_conversation(title or ", ".join([client.username, *to]), to)


async def send(args) -> int:
    text = sys.stdin.read() if args.text == "-" else args.text
    client, _ = await logged_in(args)
    try:
        conv = args.conversation or await find_conversation(client, args.to, args.title)
        await client.connect()
        await client.wait_synced()
        if args.reply:
            rec = await client.messaging.send(conv, text, reply=args.reply, wait=True)
            sent = Sent(rec.mid or "", rec.seq or 0)
        else:
            sent = await client.send_text(conv, text)
        print(f"stored seq={sent.seq} mid={sent.mid} conversation={conv}")
        if args.wait_delivered:
            others = {u for u in client.members.get(conv, []) if u != client.username}
            deadline = time.monotonic() + args.wait_delivered
            got: set[str] = set()
            while others - got:
                ev = await asyncio.wait_for(client.events.get(), max(0.01, deadline - time.monotonic()))
                if isinstance(ev, Delivered) and ev.seq == sent.seq:
                    got.add(ev.user)
            print(f"delivered to {', '.join(sorted(got))}")
        return 0
    except TimeoutError:
        err("timed out")
        return EXIT_FAILED
    finally:
        await client.close()


_JSON_ATT_NAMES = {"sha256": "blob_sha256"}
"""Reference members renamed in ``tail --json`` for what they are (the protocol's names stay)."""


def message_json(client: ChatClient, r: Record) -> dict[str, Any]:
    """The members ``tail --json`` adds for a record's document: ``type``; ``ref`` (the message
    a reply, edit, reaction ... names); ``reactions`` (emoji -> users); ``edits`` (earlier texts,
    oldest first, with their ``ts``) and ``edited_at_ms``; ``attachment`` (name, type, size,
    ``blob_sha256``: the reference's ``sha256``, base64url, over the encrypted blob, so never
    what ``sha256sum`` prints for the file; blob id, chunk: never the file key);
    ``expires_at_ms``; ``read_by`` (my messages: who read them, by their receipts); ``timer_s``
    (an ``expire`` line); ``title`` (a ``title`` line)."""
    d = r.content
    att = {_JSON_ATT_NAMES.get(k, k): v for k, v in (d.att or {}).items() if k != "key"} or None
    out: dict[str, Any] = {
        "type": d.t,
        "ref": d.ref,
        "reactions": d.reactions,
        "edits": [{"text": v.body, "sent_at_ms": v.ts} for v in d.versions],
        "edited_at_ms": d.edited,
        "attachment": att,
        "expires_at_ms": d.exp,
        "read_by": client.receipts.readers(r) if r.mine else [],
    }
    if d.t == "expire":
        out["timer_s"] = d.seconds
    if d.t == "title":
        out["title_set"] = d.title
    return out


def text_marks(r: Record) -> str:
    """What a terminal line adds after a message's text: ``(edited)`` and its reactions."""
    d = r.content
    marks = " (edited)" if d.versions else ""
    if d.reactions:
        marks += "  [" + " ".join(f"{emoji} {len(users)}" for emoji, users in d.reactions.items()) + "]"
    return marks


_JSON_UNSAFE = re.compile("[\x7f-\x9f\u202a-\u202e\u2066-\u2069\u2028\u2029]")
"""Characters JSON may carry raw that a terminal acts on (DEL, C1 controls such as the 8-bit CSI)
or that reorder or split what is shown (bidi embeddings/overrides/isolates, line/paragraph
separators); C0 controls are escaped by JSON itself."""


def json_line(doc: dict) -> str:
    """``doc`` as one line of JSON for a terminal or a log pipeline: non-ASCII text kept readable,
    but every character of :data:`_JSON_UNSAFE` written as a ``\\uXXXX`` escape (RFC 8259 §7),
    so ``json.loads`` gives back the exact strings and no raw control reaches the terminal."""
    text = json.dumps(doc, ensure_ascii=False)
    return _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


async def quote_of(client: ChatClient, r: Record) -> str | None:
    """A reply's quote for a terminal line (who wrote the quoted message and its start, as the
    chat window shows it: :func:`~client_tui.messagebody.quote_words`); None for other records."""
    if r.content.t != "reply" or not r.content.ref or client.history is None:
        return None
    found = await client.history.by_mid(r.content.ref, r.conversation)
    return quote_words(found[0] if found else None)


def line(client: ChatClient, r: Record, as_json: bool, quote: str | None = None) -> str:
    """One message for a terminal (harmless; a reply starts with ``[↪ QUOTE]``, ``quote`` from
    :func:`quote_of`) or as one JSON object (exact text; a reply has its ``ref``)."""
    mark = client.mark(r)
    if as_json:
        return json_line(
            {
                "seq": r.seq,
                "conversation": r.conversation,
                "title": client.titles.get(r.conversation),
                "sender": r.sender,
                "sent_at_ms": r.ts,
                "text": r.text,
                "state": r.state,
                "mark": mark,
                "reason": r.reason or None,
                "mid": r.mid,
                **message_json(client, r),
            }
        )
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(r.ts / 1000)) if r.ts else "?"
    glyph = {
        "verified": "✔",
        "unverified": "",
        "warning": " ⚠",
        "previous": " ↺ (signed by a previous key)",
        "unreadable": " ✖",
    }[mark]
    words = line_words(r)  # a timer or title line, an action refused
    body = (
        words.plain
        if words is not None
        else r.text
        if r.text is not None and r.state != "unreadable"
        else f"[{unreadable_text(r.reason, r.sender, r.detail)}: {r.reason}]"
    )
    if quote is not None and r.state != "unreadable":
        body = f"[↪ {quote}] {body}"
    if r.content.att and r.state != "unreadable":
        att = r.content.att
        body = f"[file {att.get('name')} · {att.get('type')} · {att.get('size')} bytes · mid {r.mid}]" + (
            f" {body}" if body else ""
        )
    title = one_line(client.titles.get(r.conversation, r.conversation))
    head = f"{when}  [{title}]  {one_line(r.sender)}{glyph}: "
    return head + harmless(body + text_marks(r)).replace("\n", "\n" + " " * 4)


async def tail(args) -> int:
    """Print the last ``args.lines`` messages in the history's order (the relay's seq; my unsent
    ones after the last seq known when they were written), then, with ``--follow``, new ones as
    they arrive. Online without ``--follow``, the relay's messages are synced into the history
    first, so the lines printed are the newest ones, in that order."""
    client, online = await logged_in(args, offline_ok=True)
    out = sys.stdout
    try:
        if online:
            with contextlib.suppress(E2EEError):
                await client.refresh_conversations()
            if not args.follow:
                await client.connect()
                await client.wait_synced()
        convs = [args.conversation] if args.conversation else list(client.titles)
        cached: list[Record] = []
        for cid in convs:
            cached += await client.load_history(cid, limit=max(args.lines, 0) or 1)
        cached.sort(key=lambda r: r.pos)  # each list is in the history's order: (pos, then as stored)
        printed = {r.lid for r in cached}  # lines the refresh above added are in the cache already
        for r in cached[-args.lines :] if args.lines > 0 else []:
            print(line(client, r, args.json, None if args.json else await quote_of(client, r)), file=out, flush=True)

        async def show(ev) -> None:
            if (
                isinstance(ev, RecordChanged)
                and ev.new
                and (not args.conversation or ev.record.conversation == args.conversation)
            ):
                r = ev.record
                if not r.mine and r.visible and r.lid not in printed:
                    quote = None if args.json else await quote_of(client, r)
                    print(line(client, r, args.json, quote), file=out, flush=True)

        if args.follow:  # offline too: the session logs in when the relay answers
            client.start()
            while True:
                await show(await client.events.get())
        return 0
    finally:
        await client.close()


async def search(args) -> int:
    """Search the decrypted history on this machine (no relay; nothing written)."""
    client = client_for(args)
    try:
        await open_local(client, args.passphrase)
        found = await client.history.search(matcher(args.text), args.conversation, limit=args.limit)
        for r in reversed(found):
            print(line(client, r, args.json), flush=True)
        if not found:
            err(f"no message matches {one_line(args.text)!r}")
            return EXIT_FAILED
        return 0
    finally:
        await client.close()
