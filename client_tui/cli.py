"""``e2ee-chat``: the terminal client, and headless subcommands for scripts.

    e2ee-chat                                              # login screen
    e2ee-chat --user alice --register --with bob           # create alice and a conversation with bob
    e2ee-chat --user bob                                   # open bob's newest conversation
    e2ee-chat send --user alice --to bob --text "hi"       # send one message, print its seq
    e2ee-chat tail --user bob [-n 20] [--follow] [--json]  # print messages (cached, then new ones)
    e2ee-chat keys show|export|import|accept|verify|rotate --user alice ...

Passwords and passphrases are asked for on the terminal (or read from ``E2EE_PASSWORD`` and
``E2EE_PASSPHRASE`` for scripts). Without ``--with`` or ``--conversation`` the client opens the
newest conversation the user belongs to. The TUI writes its log to the platform's log folder
(``client.log``: error codes and sequence numbers, never message text or keys).

Exit status of the subcommands: 0 done, 1 failed, 3 blocked by a key change waiting for a
decision (``keys accept`` or ``keys verify``, after comparing fingerprints).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import getpass
import json
import logging
import os
import sys
import time
from pathlib import Path

import platformdirs

from shared.errors import E2EEError, InvalidRequest
from shared.keys import fingerprint, safety_number
from shared.names import canonical_username

from . import keystore
from .contacts import kid_token
from .core import ChatClient, ClientError, Delivered, KeyChangeBlocked, RecordChanged
from .history import Record
from .inspector import unreadable_text
from .private import append_private
from .safe import harmless, one_line

EXIT_FAILED = 1
EXIT_BLOCKED = 3


def _secret(env: str, prompt: str) -> str:
    return os.environ.get(env) or getpass.getpass(prompt)


def _startup(args, password: str, passphrase: str):
    """The account and conversation steps, run inside the app's event loop by its session worker."""

    async def startup(client: ChatClient) -> str:
        if args.register:
            await client.register(password, passphrase, bits=args.bits)
        else:
            await client.login(password, passphrase)
        convs = await client.refresh_conversations()
        if args.conversation:
            return args.conversation
        if args.with_:
            title = args.title or ", ".join([client.username, *args.with_])
            return await client.create_conversation(title, args.with_)
        if convs:
            return list(convs)[-1]
        return ""  # the window opens without a conversation: Ctrl+N starts one

    return startup


def _common(p: argparse.ArgumentParser, *, sub: bool) -> None:
    default = argparse.SUPPRESS if sub else None
    p.add_argument("--server", default=argparse.SUPPRESS if sub else os.environ.get("E2EE_SERVER",
                                                                                    "http://127.0.0.1:8765"),
                   help="relay URL (E2EE_SERVER)")
    p.add_argument("--user", default=default, help="your username")
    p.add_argument("--profile", type=Path, default=default,
                   help="folder for keystores and caches (E2EE_PROFILE; default: the user data folder)")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="e2ee-chat", description="End-to-end encrypted terminal chat.",
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="Subcommands: send, tail, keys (e2ee-chat SUBCOMMAND --help).")
    _common(p, sub=False)
    p.add_argument("--register", action="store_true", help="create the account and its keys first")
    p.add_argument("--bits", type=int, default=3072, choices=[2048, 3072, 4096], help="RSA wrap key size")
    p.add_argument("--with", dest="with_", type=lambda s: [u for u in s.split(",") if u], default=None,
                   help="start a conversation with these users (comma-separated)")
    p.add_argument("--title", help="title of the new conversation")
    p.add_argument("--conversation", help="open this conversation id")
    sub = p.add_subparsers(dest="command", metavar="{send,tail,keys}")

    s = sub.add_parser("send", help="send one message and print its sequence number")
    _common(s, sub=True)
    target = s.add_mutually_exclusive_group(required=True)
    target.add_argument("--to", type=lambda v: [u for u in v.split(",") if u],
                        help="recipients (comma-separated); their newest shared conversation, or a new one")
    target.add_argument("--conversation", dest="conversation", help="conversation id")
    s.add_argument("--text", required=True, help="the message ('-' reads standard input)")
    s.add_argument("--title", help="title if a conversation is created")
    s.add_argument("--wait-delivered", type=float, default=0, metavar="SECONDS",
                   help="also wait until every member acknowledged it")

    t = sub.add_parser("tail", help="print the latest messages, then new ones")
    _common(t, sub=True)
    t.add_argument("--conversation", help="only this conversation")
    t.add_argument("-n", "--lines", type=int, default=10, help="cached messages to print first (default 10)")
    t.add_argument("-f", "--follow", action="store_true", help="keep running and print messages as they arrive")
    t.add_argument("--json", action="store_true", help="one JSON object per line")

    k = sub.add_parser("keys", help="show, export, import, accept, verify or rotate keys")
    _common(k, sub=True)
    k.add_argument("action", choices=["show", "export", "import", "accept", "verify", "rotate"])
    k.add_argument("contact", nargs="?", help="the contact (accept, verify, show)")
    k.add_argument("--file", type=Path, help="export to / import from this file")
    k.add_argument("--compare", metavar="NUMBER",
                   help="verify: the safety number you compared with the contact (or the WRAP.SIGN key-id "
                        "prefixes 'keys show' printed); required while a key change is pending")
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    args.profile = getattr(args, "profile", None) or (Path(os.environ["E2EE_PROFILE"])
                                                      if os.environ.get("E2EE_PROFILE") else None)
    try:  # every name typed is canonical before it names a profile, a contact or a conversation member
        for attr in ("user", "contact"):
            if getattr(args, attr, None):
                setattr(args, attr, canonical_username(getattr(args, attr)))
        for attr in ("to", "with_"):
            if getattr(args, attr, None):
                setattr(args, attr, [canonical_username(u) for u in getattr(args, attr)])
    except InvalidRequest as exc:
        parser.error(exc.message)
    if args.command is None:
        return _interactive(args)
    if not getattr(args, "user", None):
        parser.error(f"{args.command}: --user is required")
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    runner = {"send": _send, "tail": _tail, "keys": _keys}[args.command]
    try:
        return asyncio.run(runner(args))
    except KeyboardInterrupt:
        return 130


class HarmlessFormatter(logging.Formatter):
    """Log lines with every control character shown as a symbol: names and reasons in them come
    from other users and the relay, and ``cat client.log`` must not run their escape sequences."""

    def format(self, record: logging.LogRecord) -> str:
        return one_line(super().format(record))


def _log_to_file() -> Path:
    path = Path(platformdirs.user_log_dir("e2ee-chat", appauthor=False)) / "client.log"
    handler = logging.StreamHandler(append_private(path))
    handler.setFormatter(HarmlessFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger("e2ee")
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    return path


def run_app(app, **run_options) -> int:
    """Run a Textual app; its exit status: 0, or non-zero when it ended on an error (a crash
    must never look like success to a script or a shell ``&&``)."""
    app.run(**run_options)
    return app.return_code or 0


def _interactive(args) -> int:
    from .app import ChatApp

    _log_to_file()
    if not args.user:
        return run_app(ChatApp(server=args.server, profile_root=args.profile))
    password = _secret("E2EE_PASSWORD", f"relay password for {args.user}: ")
    passphrase = _secret("E2EE_PASSPHRASE", "keystore passphrase: ")
    return run_app(ChatApp(ChatClient(args.server, args.user, args.profile),
                           startup=_startup(args, password, passphrase)))


# -- headless subcommands ------------------------------------------------------------------------------
async def _logged_in(args) -> ChatClient:
    client = ChatClient(args.server, args.user, args.profile)
    password = _secret("E2EE_PASSWORD", f"relay password for {args.user}: ")
    passphrase = _secret("E2EE_PASSPHRASE", "keystore passphrase: ")
    try:
        await client.login(password, passphrase)
    except BaseException:
        await client.close()
        raise
    for text in client.local_warnings:  # what was lost or damaged on this machine, said once, in words
        print(f"e2ee-chat: warning: {harmless(text)}", file=sys.stderr)
    return client


def _fail(exc: E2EEError) -> int:
    print(f"e2ee-chat: {exc.message} ({exc.code})", file=sys.stderr)
    if isinstance(exc, KeyChangeBlocked):
        for user in exc.users or ():
            print(f"  review {user}'s new key with: e2ee-chat keys show {user}; then keys accept or keys verify",
                  file=sys.stderr)
        return EXIT_BLOCKED
    return EXIT_FAILED


async def _find_conversation(client: ChatClient, to: list[str], title: str | None) -> str:
    wanted = {client.username, *to}
    convs = await client.refresh_conversations()
    for cid in reversed(list(convs)):
        if set(convs[cid]) == wanted:
            return cid
    return await client.create_conversation(title or ", ".join([client.username, *to]), to)


async def _send(args) -> int:
    text = sys.stdin.read() if args.text == "-" else args.text
    try:
        client = await _logged_in(args)
    except E2EEError as exc:
        return _fail(exc)
    try:
        conv = args.conversation or await _find_conversation(client, args.to, args.title)
        await client.connect()
        await client.wait_synced()
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
        print("e2ee-chat: timed out", file=sys.stderr)
        return EXIT_FAILED
    except E2EEError as exc:
        return _fail(exc)
    finally:
        await client.close()


def _line(client: ChatClient, r: Record, as_json: bool) -> str:
    mark = client.mark(r)
    if as_json:
        return json.dumps({
            "seq": r.seq, "conversation": r.conversation, "title": client.titles.get(r.conversation),
            "sender": r.sender, "sent_at_ms": r.ts, "text": r.text, "state": r.state, "mark": mark,
            "reason": r.reason or None, "mid": r.mid}, ensure_ascii=False)
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(r.ts / 1000)) if r.ts else "?"
    glyph = {"verified": "✔", "unverified": "", "warning": " ⚠", "previous": " ↺ (signed by a previous key)",
             "unreadable": " ✖"}[mark]
    body = (r.text if r.text is not None and r.state != "unreadable"
            else f"[{unreadable_text(r.reason, r.sender)}: {r.reason}]")
    title = harmless(client.titles.get(r.conversation, r.conversation))
    head = f"{when}  [{title}]  {harmless(r.sender)}{glyph}: "
    return head + harmless(body).replace("\n", "\n" + " " * 4)


async def _tail(args) -> int:
    try:
        client = await _logged_in(args)
    except E2EEError as exc:
        return _fail(exc)
    out = sys.stdout
    try:
        with contextlib.suppress(E2EEError):
            await client.refresh_conversations()
        convs = [args.conversation] if args.conversation else list(client.titles)
        cached: list[Record] = []
        for cid in convs:
            cached += await client.load_history(cid, limit=max(args.lines, 0) or 1)
        cached.sort(key=lambda r: r.pos)
        for r in cached[-args.lines:] if args.lines > 0 else []:
            print(_line(client, r, args.json), file=out, flush=True)

        def show(ev) -> None:
            if isinstance(ev, RecordChanged) and ev.new and (not args.conversation
                                                            or ev.record.conversation == args.conversation):
                if not ev.record.mine:
                    print(_line(client, ev.record, args.json), file=out, flush=True)

        if args.follow:
            client.start()
            while True:
                show(await client.events.get())
        await client.connect()
        await client.wait_synced()
        while not client.events.empty():
            show(client.events.get_nowait())
        return 0
    except E2EEError as exc:
        return _fail(exc)
    finally:
        await client.close()


async def _keys(args) -> int:
    if args.action in ("import", "export") and not args.file:
        print(f"e2ee-chat: keys {args.action} needs --file", file=sys.stderr)
        return EXIT_FAILED
    if args.action == "import":
        client = ChatClient(args.server, args.user, args.profile)
        try:
            passphrase = _secret("E2EE_PASSPHRASE", "keystore passphrase: ")
            await asyncio.to_thread(keystore.import_from, args.file, client.keystore_path, passphrase, args.user)
            print(f"imported keys of {args.user} into {client.keystore_path}")
            return 0
        except E2EEError as exc:
            return _fail(exc)
        finally:
            await client.close()
    if args.action == "export":
        client = ChatClient(args.server, args.user, args.profile)
        try:
            keystore.export_to(client.keystore_path, args.file)
            print(f"exported {client.keystore_path} to {args.file} (still encrypted under your passphrase)")
            return 0
        except E2EEError as exc:
            return _fail(exc)
        finally:
            await client.close()
    try:
        client = await _logged_in(args)
    except E2EEError as exc:
        return _fail(exc)
    try:
        if args.action == "rotate":
            new = await client.rotate_keys()
            print(f"new keys published: wrap {fingerprint(new.wrap_kid)}\n                    "
                  f"sign {fingerprint(new.sign_kid)}")
            return 0
        user = args.contact or client.username
        if user not in client.contacts or args.action in ("show", "verify"):
            with contextlib.suppress(ClientError):
                await client.fetch_keys(user)
        c = client.contacts.get(user)
        if c is None:
            print(f"e2ee-chat: no keys known for {user}", file=sys.stderr)
            return EXIT_FAILED
        if args.action == "accept":
            client.accept_key(user)
        elif args.action == "verify":
            if c.pending is not None and not args.compare:
                print(f"e2ee-chat: {user}'s key changed and the new keys were not compared: nothing verified.\n"
                      f"  compare the new safety number (e2ee-chat keys show {user}) with {user}, then:\n"
                      f"  e2ee-chat keys verify {user} --compare \"<the number you both read>\"", file=sys.stderr)
                return EXIT_BLOCKED
            shown = client.compare(user, args.compare) if args.compare else None
            client.verify_contact(user, shown=shown)
        _show_contact(client, user)
        return EXIT_BLOCKED if client.contacts[user].pending is not None else 0
    except E2EEError as exc:
        return _fail(exc)
    finally:
        await client.close()


def _show_contact(client: ChatClient, user: str) -> None:
    """Print a contact's keys; during a pending change, the NEW safety number to compare first."""
    c, me = client.contacts[user], client.contacts[client.username]
    print(f"{user}: {'verified' if c.verified else 'not verified'}")
    if c.note:
        print(f"  NOTE: {harmless(c.note)}")
    print(f"  wrap key  {fingerprint(c.identity.wrap_kid)}")
    print(f"  sign key  {fingerprint(c.identity.sign_kid)}")
    if c.pending is None:
        if user != client.username:
            print(f"  safety number with {client.username}: {safety_number(me.identity, c.identity)}")
        return
    evidence = {True: "signed by the old key", False: "NOT signed by the pinned key",
                None: "no rotation evidence"}[c.pending_signed_by_old]
    shown = client.shown_key(user)
    print(f"  CHANGED ({evidence}); sending is blocked until you accept or verify:")
    print(f"  new wrap  {fingerprint(c.pending.wrap_kid)}")
    print(f"  new sign  {fingerprint(c.pending.sign_kid)}")
    print(f"  NEW safety number with {client.username} (compare this one): {shown.safety}")
    print(f"  previous safety number (pinned, for reference): {shown.previous_safety}")
    print(f"  new key ids: {kid_token(shown.kids)}")


if __name__ == "__main__":
    sys.exit(main())
