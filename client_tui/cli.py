"""``e2ee-chat``: the terminal client, and headless sub-commands for scripts.

    e2ee-chat                                              # login screen
    e2ee-chat --user alice --register --with bob           # create alice and a conversation with bob
    e2ee-chat --user bob                                   # open bob's newest conversation
    e2ee-chat register --user dora [--bits 3072]           # create an account without the window
    e2ee-chat send --user alice --to bob --text "hi"       # send one message, print its seq
    e2ee-chat send --to bob --attach report.pdf [--text C] # send a file (progress on stderr)
    e2ee-chat get-attachment MID --out PATH [--conversation CID] [--from USER]  # save a received file (verified, 0600)
    e2ee-chat send --to bob --reply MID --text "yes"       # a reply quoting message MID
    e2ee-chat edit MID --text "fixed" | delete MID | react MID 👍 [--off]   # your messages; anyone's (react)
    e2ee-chat expire --to bob 3600                         # disappearing messages for everyone (0: off)
    e2ee-chat tail [--user bob] [-n 20] [--follow] [--json]  # print messages (stored, then new ones)
    e2ee-chat search [--user bob] TEXT                     # search the history on this machine
    e2ee-chat keys show|export|import|accept|verify|rotate [CONTACT] ...
    e2ee-chat audit [--user bob]                           # check the relay's key transparency log

``--user`` defaults to ``E2EE_USER``, else to the only account this machine has for the relay.
Secrets are asked for on the terminal before anything else runs (twice for a new account), or
read from ``E2EE_PASSWORD`` and ``E2EE_PASSPHRASE`` for scripts. ``--cafile`` (``E2EE_CAFILE``)
trusts a relay's own TLS certificate (``e2ee-relay dev-cert`` prints the command). The window
logs to the platform's log folder (``client.log``: states, refusals, error codes and sequence
numbers, never message text or keys).

Exit status: 0 done, 1 failed (one line on standard error, never a traceback), 2 usage, 3 blocked
by a key change waiting for a decision (``keys accept`` or ``keys verify``, after comparing
fingerprints), 4 not sent because members joined the conversation after the message was written
(``send``: it is never sealed to them without its author; send it again to write it for them),
5 the relay's key transparency log does not verify (``audit``), 130 interrupted (Ctrl+C, or
Ctrl+D at a prompt).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import getpass
import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import platformdirs

from shared.errors import E2EEError, InvalidRequest
from shared.keys import fingerprint, safety_number
from shared.names import canonical_username

from . import auditcmd, commands, credentials, filecommands, msgcommands
from .cliargs import DEFAULT_KEY_LIFETIME_DAYS, EXIT_INTERRUPTED, MID_COMMANDS, build_parser, key_lifetime, mid_argv
from .commands import EXIT_BLOCKED, EXIT_FAILED, err
from .commands import fail as _fail
from .core import ChatClient, ClientError, default_profile_root, keystore, profiles, transport
from .core.contacts import kid_token
from .core.private import append_private
from .safe import harmless, one_line

EXIT_USAGE = 2
__all__ = ["EXIT_BLOCKED", "EXIT_FAILED", "build_parser", "main", "run_app"]
# what each sub-command needs before it starts: the relay password, the keystore passphrase
NEEDS = {
    "send": ("password", "passphrase"),
    "get-attachment": ("password", "passphrase"),
    "edit": ("password", "passphrase"),
    "delete": ("password", "passphrase"),
    "react": ("password", "passphrase"),
    "expire": ("password", "passphrase"),
    "tail": ("password", "passphrase"),
    "search": ("passphrase",),
    "audit": ("password", "passphrase"),
    "register": ("password", "passphrase"),
    "keys": (),
}
KEYS_NEEDS = {"export": (), "import": ("passphrase",)}


def _secret(env: str, prompt: str, *, confirm: bool = False, kind: str = "") -> str:
    """A secret from ``env``, or typed (twice with ``confirm``; the rules of a new one checked).

    Raises:
        KeyboardInterrupt: Ctrl+C or Ctrl+D at the prompt (the caller exits 130).
    """
    value = os.environ.get(env)
    if value:
        problem = credentials.check_new(kind, value, None) if confirm else ""
        if problem:
            raise InvalidRequest(f"{env}: {problem}", field=kind)
        return value
    while True:
        try:
            value = getpass.getpass(prompt)
            if not confirm:
                return value
            problem = credentials.check_new(kind, value, None)
            if not problem:
                if kind == "passphrase":
                    print(f"  {credentials.strength(value)}", file=sys.stderr)
                problem = credentials.check_new(kind, value, getpass.getpass(f"{prompt.rstrip(': ')} again: "))
        except EOFError:
            raise KeyboardInterrupt from None
        if not problem:
            return value
        print(f"  {problem}; try again", file=sys.stderr)


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


def _accounts(args) -> list[str]:
    """The accounts with keys on this machine for the relay of ``args``."""
    folder = (args.profile or default_profile_root()) / profiles.relay_key(args.server)
    return sorted(p.parent.name for p in folder.glob("*/keystore.json"))


def _default_user(args) -> str | None:
    """``E2EE_USER``, else the only account with keys here for this relay, else None."""
    if os.environ.get("E2EE_USER"):
        return os.environ["E2EE_USER"]
    users = _accounts(args)
    return users[0] if len(users) == 1 else None


def _prepare(parser: argparse.ArgumentParser, argv: list[str] | None):
    """Parse, fill the defaults from the environment, canonicalise every name; usage errors
    (exit 2) name the sub-command's own usage."""
    args = parser.parse_args(mid_argv(sys.argv[1:] if argv is None else argv))
    usage = parser.subcommands.get(args.command, parser) if args.command else parser
    if args.command in MID_COMMANDS:
        args.mid = args.mid_option or args.mid
        if not args.mid:
            usage.error("the message id (MID) is required")
    args.profile = getattr(args, "profile", None) or (
        Path(os.environ["E2EE_PROFILE"]) if os.environ.get("E2EE_PROFILE") else None
    )
    args.cafile = getattr(args, "cafile", None)
    if getattr(args, "key_lifetime", None) is None:
        env = os.environ.get("E2EE_KEY_LIFETIME_DAYS", "")
        try:
            args.key_lifetime = key_lifetime(env) if env else DEFAULT_KEY_LIFETIME_DAYS
        except argparse.ArgumentTypeError as exc:
            usage.error(f"E2EE_KEY_LIFETIME_DAYS: {exc}")
    try:
        args.server = profiles.normalize_url(args.server)
    except InvalidRequest as exc:
        usage.error(exc.message)
    if args.command and not getattr(args, "user", None):
        args.user = _default_user(args)
        if not args.user:
            users = _accounts(args)
            have = (
                f"this machine has {len(users)} accounts for {args.server} ({', '.join(users)})"
                if users
                else f"this machine has no account for {args.server} yet"
                + ("" if args.command == "register" else " (e2ee-chat register --user NAME)")
            )
            usage.error(f"--user is required (or set E2EE_USER): {have}")
    try:  # every name typed is canonical before it names a profile, a contact or a conversation member
        for attr in ("user", "contact"):
            if getattr(args, attr, None):
                setattr(args, attr, canonical_username(getattr(args, attr)))
        for attr in ("to", "with_"):
            if getattr(args, attr, None):
                setattr(args, attr, [canonical_username(u) for u in getattr(args, attr)])
    except InvalidRequest as exc:
        usage.error(exc.message)
    if args.command == "keys" and args.action in ("import", "export") and not args.file:
        usage.error(f"keys {args.action} needs --file")
    if args.command == "send" and args.text is None and not args.attach:
        usage.error("send needs --text, --attach, or both (the text is then the file's caption)")
    if args.command == "send" and args.attach and args.reply:
        usage.error("--reply and --attach cannot be combined: a file is not sent as a reply (send the reply as text)")
    return args


def _check_local(args) -> None:
    """What this machine can tell before any secret is asked: the ``--cafile`` is a certificate,
    and a command that opens ``args.user``'s keystore (all but ``register`` and ``keys import``)
    finds one (else it is named, with what this machine has instead).

    Raises:
        InvalidRequest: the certificate file; KeystoreError: no keystore for the user at this
            relay here (exit 1, one line).
    """
    transport.ssl_context(transport.cafile_from(args.cafile))
    makes_one = (
        args.command == "register"
        or (args.command is None and args.register)
        or (args.command == "keys" and args.action == "import")
    )
    if makes_one or not args.user:
        return
    root = args.profile or default_profile_root()
    if not (profiles.profile_dir(root, args.server, args.user) / "keystore.json").exists():
        raise profiles.missing_keystore(root, args.server, args.user)


def _ask_secrets(args) -> None:
    """Every secret the command needs, asked now: before the event loop runs (a prompt inside it
    ignored the first Ctrl+C); what is missing here is named first (:func:`_check_local`)."""
    _check_local(args)
    needs = (
        KEYS_NEEDS.get(args.action, ("password", "passphrase"))
        if args.command == "keys"
        else NEEDS.get(args.command, ("password", "passphrase"))
    )
    new = args.command == "register" or (args.command is None and args.register)
    args.password = args.passphrase = ""
    if "password" in needs:
        args.password = _secret("E2EE_PASSWORD", f"relay password for {args.user}: ", confirm=new, kind="password")
    if "passphrase" in needs:
        args.passphrase = _secret("E2EE_PASSPHRASE", "keystore passphrase: ", confirm=new, kind="passphrase")


def main(argv: list[str] | None = None) -> int:
    """Run ``e2ee-chat``; returns the exit status (see the module docstring)."""
    parser = build_parser()
    try:
        args = _prepare(parser, argv)
        if args.command is None:
            return _interactive(args)
        _ask_secrets(args)
        logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
        runner = {
            "send": filecommands.send_file if getattr(args, "attach", None) else commands.send,
            "get-attachment": filecommands.get_attachment,
            "edit": msgcommands.edit,
            "delete": msgcommands.delete,
            "react": msgcommands.react,
            "expire": msgcommands.expire,
            "tail": commands.tail,
            "keys": _keys,
            "register": commands.register,
            "search": commands.search,
            "audit": auditcmd.audit,
        }[args.command]
        return asyncio.run(runner(args))
    except KeyboardInterrupt:
        print(file=sys.stderr)  # end the prompt's line
        return EXIT_INTERRUPTED
    except (E2EEError, OSError, UnicodeError) as exc:
        return _fail(exc)


class _HarmlessFormatter(logging.Formatter):
    """Log lines with every control character shown as a symbol: names and reasons in them come
    from other users and the relay, and ``cat client.log`` must not run their escape sequences."""

    def format(self, record: logging.LogRecord) -> str:
        return one_line(super().format(record))


CLIENT_LOGGERS = ("e2ee.client", "e2ee.tui")
"""The client's loggers: the app configures these and no others (a relay or a test in the same
process keeps its own levels and handlers)."""


@contextlib.contextmanager
def _log_to_file() -> Iterator[Path]:
    """``client.log`` (0600, appended) receives the client's INFO lines while the app runs; on
    exit the handler is removed and the loggers' levels are restored.

    Yields:
        the log file's path (``platformdirs.user_log_dir("e2ee-chat") / "client.log"``).
    """
    path = Path(platformdirs.user_log_dir("e2ee-chat", appauthor=False)) / "client.log"
    handler = logging.StreamHandler(append_private(path))
    handler.setFormatter(_HarmlessFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    loggers = [logging.getLogger(name) for name in CLIENT_LOGGERS]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.addHandler(handler)
        lg.setLevel(logging.INFO)
    try:
        yield path
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.removeHandler(handler)
            lg.setLevel(level)
        handler.close()
        handler.stream.close()


def run_app(app, **run_options) -> int:
    """Run a Textual app; its exit status: 0, or non-zero when it ended on an error (a crash
    must never look like success to a script or a shell ``&&``)."""
    app.run(**run_options)
    return app.return_code or 0


def _interactive(args) -> int:
    from .app import ChatApp

    with _log_to_file():
        if not args.user:
            return run_app(
                ChatApp(
                    server=args.server,
                    username=_default_user(args) or "",
                    profile_root=args.profile,
                    cafile=args.cafile,
                    key_lifetime_days=args.key_lifetime,
                )
            )
        _ask_secrets(args)
        return run_app(
            ChatApp(
                commands.client_for(args),
                startup=_startup(args, args.password, args.passphrase),
            )
        )


async def _keys(args) -> int:
    if args.action == "import":
        client = commands.client_for(args)
        try:
            await asyncio.to_thread(keystore.import_from, args.file, client.keystore_path, args.passphrase, args.user)
            print(f"imported keys of {args.user} into {client.keystore_path}")
            return 0
        finally:
            await client.close()
    if args.action == "export":
        client = commands.client_for(args)
        try:
            keystore.export_to(client.keystore_path, args.file)
            print(f"exported {client.keystore_path} to {args.file} (still encrypted under your passphrase)")
            return 0
        finally:
            await client.close()
    # show, accept and verify work offline from the pinned keys stored here; rotate needs the relay
    client, online = await commands.logged_in(args, offline_ok=args.action != "rotate")
    try:
        if args.action == "rotate":
            new = await client.rotate_keys()
            print(
                f"new keys published: wrap {fingerprint(new.wrap_kid)}\n                    "
                f"sign {fingerprint(new.sign_kid)}"
            )
            return 0
        user = args.contact or client.username
        if online and (user not in client.contacts or args.action in ("show", "verify")):
            with contextlib.suppress(ClientError):
                await client.fetch_keys(user)
        c = client.contacts.get(user)
        if c is None:
            err(f"no keys known for {user}" + ("" if online else " on this machine (offline)"))
            return EXIT_FAILED
        if args.action == "accept":
            if c.pending is not None and not args.compare and c.pending_signed_by_old is not True:
                print(
                    f"e2ee-chat: {user}'s new key is not signed by the key you pinned: nothing accepted "
                    f"without naming it.\n  check it (e2ee-chat keys show {user}), then accept exactly what "
                    f"that showed:\n  e2ee-chat keys accept {user} --compare <the new key ids it printed>",
                    file=sys.stderr,
                )
                return EXIT_BLOCKED
            client.accept_key(user, shown=client.compare(user, args.compare, "accepted") if args.compare else None)
        elif args.action == "verify":
            if c.pending is not None and not args.compare:
                print(
                    f"e2ee-chat: {user}'s key changed and the new keys were not compared: nothing verified.\n"
                    f"  compare the new safety number (e2ee-chat keys show {user}) with {user}, then:\n"
                    f'  e2ee-chat keys verify {user} --compare "<the number you both read>"',
                    file=sys.stderr,
                )
                return EXIT_BLOCKED
            shown = client.compare(user, args.compare) if args.compare else None
            client.verify_contact(user, shown=shown)
        _show_contact(client, user, online)
        return EXIT_BLOCKED if client.contacts[user].pending is not None else 0
    finally:
        await client.close()


def _show_contact(client: ChatClient, user: str, online: bool = True) -> None:
    """Print a contact's keys; during a pending change, the NEW safety number to compare first."""
    c, me = client.contacts[user], client.contacts[client.username]
    print(f"{user}: {'verified' if c.verified else 'not verified'}" + ("" if online else " (pinned here)"))
    if c.note:
        print(f"  NOTE: {harmless(c.note)}")
    print(f"  wrap key  {fingerprint(c.identity.wrap_kid)}")
    print(f"  sign key  {fingerprint(c.identity.sign_kid)}")
    if user == client.username:  # the key schedule (client_tui.core.epochs), in words
        for line in client.epochs.words():
            print(f"  {line}")
    if c.pending is None:
        if user != client.username:
            print(f"  safety number with {client.username}: {safety_number(me.identity, c.identity)}")
        return
    evidence = {True: "signed by the old key", False: "NOT signed by the pinned key", None: "no rotation evidence"}[
        c.pending_signed_by_old
    ]
    shown = client.shown_key(user)
    print(f"  CHANGED ({evidence}); sending is blocked until you accept or verify:")
    print(f"  new wrap  {fingerprint(c.pending.wrap_kid)}")
    print(f"  new sign  {fingerprint(c.pending.sign_kid)}")
    print(f"  NEW safety number with {client.username} (compare this one): {shown.safety}")
    print(f"  previous safety number (pinned, for reference): {shown.previous_safety}")
    print(f"  new key ids: {kid_token(shown.kids)}")


if __name__ == "__main__":
    sys.exit(main())
