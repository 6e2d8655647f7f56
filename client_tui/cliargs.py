"""``e2ee-chat``'s arguments, and its entry point: parsing needs no extra (``--help`` and
``--version`` work on any install), then :func:`shared.extras.require` checks the client extra
before :mod:`client_tui.cli`, which imports the client's libraries, runs the command."""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

from shared.extras import require

from . import __version__


def _common(p: argparse.ArgumentParser, *, sub: bool) -> None:
    """The options of the program and of every sub-command (``--version`` at every level)."""
    default = argparse.SUPPRESS if sub else None
    p.add_argument("--version", action="version", version=f"e2ee-chat {__version__}")
    p.add_argument(
        "--server",
        default=argparse.SUPPRESS if sub else os.environ.get("E2EE_SERVER", "http://127.0.0.1:8765"),
        help="relay address (E2EE_SERVER; default http://127.0.0.1:8765)",
    )
    p.add_argument("--user", default=default, help="your username (E2EE_USER; default: the only account here)")
    p.add_argument(
        "--profile",
        type=Path,
        default=default,
        help="folder for keystores and caches (E2EE_PROFILE; default: the user data folder)",
    )
    p.add_argument("--cafile", default=default, help="trust this relay certificate (PEM) too (E2EE_CAFILE)")
    p.add_argument(
        "--key-lifetime",
        type=key_lifetime,
        default=default,
        metavar="DAYS",
        help="replace your keys when they are older than DAYS days, and delete the replaced ones once their "
        f"messages are delivered: forward secrecy (E2EE_KEY_LIFETIME_DAYS; default {DEFAULT_KEY_LIFETIME_DAYS:g}; "
        "0: never on a schedule)",
    )


DEFAULT_KEY_LIFETIME_DAYS = 7.0
MAX_KEY_LIFETIME_DAYS = 3650.0


def key_lifetime(text: str) -> float:
    """``--key-lifetime``/``E2EE_KEY_LIFETIME_DAYS``: days, 0 (never on a schedule) to 3650.

    Raises:
        argparse.ArgumentTypeError: not a number in that range.
    """
    try:
        days = float(text)
    except ValueError:
        days = -1.0
    if not 0 <= days <= MAX_KEY_LIFETIME_DAYS:  # also NaN
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of days from 0 to {MAX_KEY_LIFETIME_DAYS:g}")
    return days


EXIT_INTERRUPTED = 130  # Ctrl+C, as a shell reports SIGINT (client_tui.cli uses the same)
MID_COMMANDS = ("edit", "delete", "react", "get-attachment")
_MID = re.compile(r"-[A-Za-z0-9_-]{21}")


def _mid(p: argparse.ArgumentParser) -> None:
    p.add_argument("mid", metavar="MID", nargs="?", help="the message id (tail --json prints it)")
    p.add_argument("--mid", dest="mid_option", metavar="MID", help=argparse.SUPPRESS)


def mid_argv(argv: list[str]) -> list[str]:
    """``argv`` with a message id that starts with ``-`` (a quarter of them: base64url) given to
    ``edit``/``delete``/``react``/``get-attachment`` as ``--mid=ID``, which argparse would
    otherwise take for an option."""
    out = list(argv)
    if not any(a in MID_COMMANDS for a in out):
        return out
    for i in range(1, len(out)):
        after_value = out[i - 1].startswith("-") and out[i - 1] != "--off"  # the value of an option (--text)
        if _MID.fullmatch(out[i]) and not after_value:
            out[i] = f"--mid={out[i]}"
    return out


def _conversation_id(value: str) -> str:
    """``--conversation``: a conversation id (:func:`shared.membership.check_conversation_id`)."""
    from shared.errors import InvalidRequest
    from shared.membership import check_conversation_id

    try:
        return check_conversation_id(value)
    except InvalidRequest as exc:
        raise argparse.ArgumentTypeError(exc.message) from None


def _which(p: argparse.ArgumentParser) -> None:
    """``--conversation``/``--from``: which message a MID means when it names several here."""
    p.add_argument(
        "--conversation", type=_conversation_id, help="the message's conversation (when its id names several here)"
    )
    p.add_argument("--from", dest="sender", help="the message's author (when its id names several here)")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="e2ee-chat",
        description="End-to-end encrypted terminal chat.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Sub-commands: register, send, edit, delete, react, expire, get-attachment, tail, search, keys, audit "
        "(e2ee-chat SUB-COMMAND --help).",
    )
    _common(p, sub=False)
    p.add_argument("--register", action="store_true", help="create the account and its keys first")
    p.add_argument("--bits", type=int, default=3072, choices=[2048, 3072, 4096], help="RSA wrap key size")
    p.add_argument(
        "--with",
        dest="with_",
        type=lambda s: [u for u in s.split(",") if u],
        default=None,
        help="start a conversation with these users (comma-separated)",
    )
    p.add_argument("--title", help="title of the new conversation")
    p.add_argument("--conversation", type=_conversation_id, help="open this conversation id")
    sub = p.add_subparsers(
        dest="command", metavar="{register,send,edit,delete,react,expire,get-attachment,tail,search,keys,audit}"
    )
    p.subcommands = {}

    def add(name: str, text: str) -> argparse.ArgumentParser:
        sp = sub.add_parser(name, help=text, description=text)
        _common(sp, sub=True)
        p.subcommands[name] = sp
        return sp

    r = add("register", "create an account: keys made here, both secrets typed twice")
    r.add_argument("--bits", type=int, default=3072, choices=[2048, 3072, 4096], help="RSA wrap key size")

    s = add("send", "send one message and print its sequence number")
    target = s.add_mutually_exclusive_group(required=True)
    target.add_argument(
        "--to",
        type=lambda v: [u for u in v.split(",") if u],
        help="recipients (comma-separated); their newest shared conversation, or a new one",
    )
    target.add_argument("--conversation", dest="conversation", type=_conversation_id, help="conversation id")
    s.add_argument("--text", help="the message ('-' reads standard input); with --attach, its caption")
    s.add_argument("--attach", metavar="PATH", help="send this file (sealed here, stored by the relay as ciphertext)")
    s.add_argument(
        "--reply", metavar="MID", help="a reply quoting message MID (its id, as tail prints it); not with --attach"
    )
    s.add_argument("--title", help="title if a conversation is created")
    s.add_argument(
        "--wait-delivered",
        type=float,
        default=0,
        metavar="SECONDS",
        help="also wait until every member acknowledged it",
    )

    e = add("edit", "replace the text of your message MID for everyone (earlier texts stay visible)")
    _mid(e)
    e.add_argument("--text", required=True, help="the new text")

    d = add("delete", "delete your message MID for everyone (from every member's device)")
    _mid(d)

    x = add("react", "react to message MID with an emoji (one per emoji; --off takes it back)")
    _mid(x)
    x.add_argument("emoji", help="1-16 characters, no spaces, e.g. 👍")
    x.add_argument("--off", action="store_true", help="take the reaction back")
    _which(x)

    ex = add("expire", "set a conversation's disappearing-message timer for every member (0: off)")
    where = ex.add_mutually_exclusive_group(required=True)
    where.add_argument(
        "--to", type=lambda v: [u for u in v.split(",") if u], help="members (comma-separated): their conversation"
    )
    where.add_argument("--conversation", dest="conversation", type=_conversation_id, help="conversation id")
    ex.add_argument("seconds", type=int, help="messages written after it disappear this many seconds after sending")

    g = add("get-attachment", "save the file of an attachment message stored here (verified; mode 0600)")
    _mid(g)
    g.add_argument(
        "--out",
        type=Path,
        required=True,
        help="the file to write, or a folder to save it in under its own name (never replaces a file; "
        "the folder must exist)",
    )
    _which(g)

    t = add("tail", "print the latest messages, then new ones (offline: the stored ones)")
    t.add_argument("--conversation", type=_conversation_id, help="only this conversation")
    t.add_argument("-n", "--lines", type=int, default=10, help="stored messages to print first (default 10)")
    t.add_argument("-f", "--follow", action="store_true", help="keep running and print messages as they arrive")
    t.add_argument("--json", action="store_true", help="one JSON object per line")

    q = add("search", "search your decrypted history on this machine (no relay needed)")
    q.add_argument("text", help='words (all must occur) or "a phrase"; case does not matter')
    q.add_argument("--conversation", type=_conversation_id, help="only this conversation")
    q.add_argument("-n", "--limit", type=int, default=50, help="most results, newest first (default 50)")
    q.add_argument("--json", action="store_true", help="one JSON object per line")

    k = add("keys", "show, export, import, accept, verify or rotate keys")
    k.add_argument("action", choices=["show", "export", "import", "accept", "verify", "rotate"])
    k.add_argument("contact", nargs="?", help="the contact (accept, verify, show)")
    k.add_argument("--file", type=Path, help="export to / import from this file")
    k.add_argument(
        "--compare",
        metavar="NUMBER",
        help="verify: the safety number you compared with the contact (or the WRAP.SIGN key-id "
        "prefixes 'keys show' printed); required while a key change is pending. accept: the "
        "same, required for a new key that the pinned key did not sign",
    )
    add("audit", "check the relay's key transparency log against the heads held here and your own keys")
    for name in MID_COMMANDS:  # MID is optional to argparse only because --mid=ID may give it
        mp = p.subcommands[name]
        mp.usage = mp.format_usage().removeprefix("usage: ").strip().replace(" [MID]", " MID")
    return p


def main(argv: list[str] | None = None) -> int:
    """The ``e2ee-chat`` program: exits 0 after ``--help``/``--version``, 2 on a usage error or
    without the client extra (one line naming it), 130 quietly on Ctrl+C while the client's
    libraries are still being imported (the first seconds), else :func:`client_tui.cli.main`'s
    status."""
    try:
        build_parser().parse_args(mid_argv(sys.argv[1:] if argv is None else argv))
        require("e2ee-chat", "client")
        from . import cli
    except KeyboardInterrupt:
        print(file=sys.stderr)  # after the ^C the terminal echoed
        return EXIT_INTERRUPTED
    return cli.main(argv)
