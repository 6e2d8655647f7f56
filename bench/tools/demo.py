"""``e2ee-demo``: a relay, three users, a group chat, then proof the relay holds only ciphertext.

Starts a relay on a free 127.0.0.1 port with a fresh data folder, registers alice, bob and carol,
creates a group, exchanges messages (unicode included) and a file, prints what each client
decrypted and what the relay stored for one message, then searches the relay's SQLite file (with -wal) and log
for every plaintext sent (as UTF-8, base64, base64url and hex). Exit status 1 if anything is found.

Then it runs the same chat through a level-3 relay (TLS-like session keys between each client and
the relay, which decrypts to read) and shows that the same search finds the text there: the search
works, and only level 4 keeps the relay blind. ``--level N`` runs one level only.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import signal
import sqlite3
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from bench import __version__
from shared.extras import require

if TYPE_CHECKING:  # the demo extra's libraries: imported once the arguments are parsed
    from rich.console import Console

SCRIPT = [
    ("alice", "Hello team! 👋 The launch plan is in the shared folder."),
    ("bob", "Grüß dich, Alice — ça va? 你好! I'll review it tonight."),
    ("carol", "مرحبا! Numbers look good; ship it 🚀"),
    ("alice", "Thanks both. Meeting at 10:30 ☕ — bring the 2FA codes."),
]
USERS = ("alice", "bob", "carol")
FILE_NAME = "launch-plan.txt"
FILE_LINE = "Launch plan: go/no-go on Friday 09:00, budget 48k EUR, rollback owner Carol."
"""A line of the file alice sends at level 4 (searched for like the messages)."""
EDIT = "Thanks both. Meeting moved to 11:15 ☕ — bring the 2FA codes."
"""What alice's last message becomes at level 4 (an edit: a document sealed like any message)."""
PASSWORD = "correct horse battery staple"


def forms(text: str) -> dict[str, bytes]:
    """The plaintext as the bytes someone might find it stored as."""
    raw = text.encode("utf-8")
    return {
        "utf-8": raw,
        "base64": base64.b64encode(raw).rstrip(b"="),
        "base64url": base64.urlsafe_b64encode(raw).rstrip(b"="),
        "hex": raw.hex().encode(),
    }


def search(paths: list[Path], texts: list[str]) -> list[tuple[str, str, str]]:
    """Every (file, form, text) where a plaintext form occurs in a file."""
    hits = []
    for path in paths:
        if not path.exists():
            continue
        blob = path.read_bytes()
        for text in texts:
            for name, needle in forms(text).items():
                if needle in blob:
                    hits.append((path.name, name, text))
    return hits


async def run_chat(relay_url: str, profiles: Path, console: Console, level: int = 4) -> dict[str, list]:
    """Register the three users, create the group and run :data:`SCRIPT`; return what each received."""
    from client_tui.core import ChatClient, MessageReceived
    from client_tui.levels import LevelClient, LevelMessage

    accounts = {
        u: ChatClient(relay_url, u, profiles, kdf={"iterations": 2, "memory_kib": 19456, "lanes": 1}, relay_level=level)
        for u in USERS
    }
    console.print("[bold]1.[/] registering alice, bob, carol (RSA-3072 + Ed25519 keys generated locally)")
    await asyncio.gather(*(c.register(PASSWORD, f"{u} passphrase") for u, c in accounts.items()))
    conv = await accounts["alice"].create_conversation("launch team", ["bob", "carol"])
    console.print(f"[bold]2.[/] alice created the group [cyan]launch team[/] ({conv})")
    if level == 4:
        clients = accounts
        for c in clients.values():
            await c.connect()
        await asyncio.gather(*(c.wait_synced() for c in clients.values()))
    else:
        clients = {u: LevelClient(relay_url, u, level, token=a.token) for u, a in accounts.items()}
        for a in accounts.values():
            await a.close()
        for c in clients.values():
            await c.connect()
    received: dict[str, list] = {u: [] for u in USERS}

    async def collect(user: str) -> None:
        while sum(1 for m in received[user] if m.sender != user) < sum(1 for s, _ in SCRIPT if s != user):
            ev = await clients[user].events.get()
            if isinstance(ev, MessageReceived | LevelMessage):
                received[user].append(ev)

    collectors = [asyncio.create_task(collect(u)) for u in USERS]
    console.print(
        "[bold]3.[/] chatting "
        + (
            "(each message: 1 AES-256-GCM encryption, 3 RSA-OAEP wraps, 1 signature)"
            if level == 4
            else f"at level {level}: the relay reads every message"
        )
    )
    for sender, text in SCRIPT:
        sent = await clients[sender].send_text(conv, text)
        console.print(f"   {sender} sent seq={sent.seq}")
    await asyncio.wait_for(asyncio.gather(*collectors), 30)
    if level == 4:
        await send_file(clients, conv, profiles, console)
        await edit_last(clients, conv, received, console)
    for c in clients.values():
        await c.close()
    return received


async def send_file(clients: dict, conv: str, folder: Path, console: Console) -> None:
    """alice sends a file; bob saves it once its message arrived (verified, 0600)."""
    from client_tui.core import MessageReceived

    path = folder / FILE_NAME
    path.write_text("\n".join([FILE_LINE] * 2000) + "\n")
    console.print(
        f"   alice sent {FILE_NAME} ({path.stat().st_size:,} bytes): sealed here in 64 KiB AES-256-GCM chunks "
        "under a fresh key; the relay stores only ciphertext"
    )
    rec = await clients["alice"].attachments.send(conv, path, caption="the plan, as promised")
    while True:
        ev = await asyncio.wait_for(clients["bob"].events.get(), 30)
        if isinstance(ev, MessageReceived) and ev.mid == rec.mid:
            break
    out = await clients["bob"].attachments.save(rec.mid, folder / f"bob-{FILE_NAME}")
    same = out.read_bytes() == path.read_bytes()
    console.print(f"   bob saved {out.name}: each chunk and the blob's SHA-256 verified, mode 0600, same bytes: {same}")


async def edit_last(clients: dict, conv: str, received: dict[str, list], console: Console) -> None:
    """alice edits her last message; bob's and carol's clients apply it (only its author may) and
    keep the earlier text as a version; their screens show the edited text."""
    from client_tui.core import RecordChanged

    last = max((m for m in received["bob"] if m.sender == "alice"), key=lambda m: m.seq)
    await clients["alice"].messaging.edit(last.mid, EDIT, wait=True)
    console.print("   alice edited her last message (an edit document: to the relay, one more message)")
    for user in ("bob", "carol"):
        while True:
            ev = await asyncio.wait_for(clients[user].events.get(), 30)
            if isinstance(ev, RecordChanged) and ev.record.mid == last.mid and ev.record.text == EDIT:
                break
        received[user] = [ev.record if m.mid == last.mid else m for m in received[user]]
    console.print(f"   bob and carol now show it as edited: [italic]{EDIT}[/]")


def run_level(level: int, root: Path, console: Console, runner: asyncio.Runner) -> tuple[dict[str, list], list, Path]:
    """Run the chat at ``level`` with its own relay; return (received, hits, relay folder)."""
    from bench.tools.relayproc import RelayProcess

    relay_dir = root / f"relay-l{level}"
    extra = [] if level == 4 else ["--level", str(level), "--demo-level"]
    relay = RelayProcess(relay_dir, extra_args=extra)
    texts = [t for _, t in SCRIPT] + ([FILE_LINE, EDIT] if level == 4 else [])
    try:  # from before the relay exists: Ctrl+C at any point stops it
        relay.start()
        console.print(f"relay (level {level}) at {relay.url} (pid {relay.proc.pid}), database {relay_dir / 'relay.db'}")
        received = runner.run(run_chat(relay.url, root / f"clients-l{level}", console, level))
        hits = search([relay_dir / n for n in ("relay.db", "relay.db-wal", "relay.log", "relay.stdout")], texts)
    finally:
        relay.stop()
    hits += search([relay_dir / "relay.db", relay_dir / "relay.log"], texts)
    return received, sorted(set(hits)), relay_dir


def print_screens(received: dict[str, list], console: Console) -> None:
    from rich.table import Table

    for user in USERS:
        table = Table(title=f"{user}'s screen", show_lines=False, title_justify="left")
        table.add_column("seq", justify="right")
        table.add_column("from")
        table.add_column("text")
        for m in sorted(received[user], key=lambda m: m.seq):
            edited = bool(getattr(getattr(m, "content", None), "versions", None))
            table.add_row(str(m.seq), m.sender, m.text + ("  (edited)" if edited else ""))
        console.print(table)


def print_stored(relay_dir: Path, console: Console) -> None:
    from client_tui.display import shorten

    db = sqlite3.connect(f"file:{relay_dir / 'relay.db'}?mode=ro", uri=True)
    seq, size, env = db.execute("SELECT seq, size, envelope FROM messages ORDER BY seq LIMIT 1").fetchone()
    rows = db.execute("SELECT count(*) FROM messages").fetchone()[0]
    db.close()
    doc = json.loads(env)
    console.print(f"\n[bold]5.[/] what the relay stored for seq={seq} ({size} bytes; {rows} messages stored)")
    console.print_json(data=shorten(doc, 48))
    if "protected" in doc:
        header = json.loads(base64.urlsafe_b64decode(doc["protected"] + "=" * (-len(doc["protected"]) % 4)))
        console.print("protected header (readable by the relay: routing metadata, no text):")
        console.print_json(data=shorten(header, 24))


def main(argv: list[str] | None = None) -> int:
    """Run the demo; Ctrl+C ends it quietly with status 130, SIGTERM with 143 (the relays it started
    are stopped either way)."""
    previous = signal.signal(signal.SIGTERM, _terminated)
    try:
        with _signals_held():  # a signal inside the loop's construction left a half-built loop
            runner = asyncio.Runner()  # whose __del__ printed a traceback after "interrupted"
            runner.get_loop()
        with runner:  # one loop for the whole demo, closed on every path (SIGTERM included)
            return _main(argv, runner)
    except KeyboardInterrupt:
        print("\ne2ee-demo: interrupted", file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """SIGINT and SIGTERM are held back (delivered on exit) where POSIX allows it."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _terminated(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)  # unwinds through the finally blocks that stop the relays


def _main(argv: list[str] | None, runner: asyncio.Runner) -> int:
    parser = argparse.ArgumentParser(prog="e2ee-demo", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("--data-dir", type=Path, help="folder for the relay and client files (default: a new temp dir)")
    parser.add_argument(
        "--level",
        type=int,
        choices=[1, 2, 3, 4],
        help="run only this level (default: level 4, then the level-3 contrast)",
    )
    parser.add_argument(
        "--attacks",
        action="store_true",
        help="instead: run the attacks on the trust layer against hostile relays and print a table "
        "(status 1 if any attacker read anything); --only NAME... picks some",
    )
    parser.add_argument("--only", nargs="+", metavar="NAME", help="with --attacks: only these attacks")
    args = parser.parse_args(argv)
    require("e2ee-demo", "demo")  # --help and --version need no extra; the demo runs a relay and clients
    from rich.console import Console

    if args.attacks:
        from . import attacks

        return attacks.main(
            [
                *(["--only", *args.only] if args.only else []),
                *(["--data-dir", str(args.data_dir)] if args.data_dir else []),
            ]
        )
    console = Console()
    if not console.is_terminal:
        console = Console(width=120)  # piped output: do not wrap paths and texts at 80 columns
    root = args.data_dir or Path(tempfile.mkdtemp(prefix="e2ee-demo-"))
    levels = [args.level] if args.level else [4, 3]
    console.print(f"data folder: {root}")
    status = 0
    for level in levels:
        title = "end-to-end encrypted group chat" if level == 4 else "the relay can read this one"
        console.rule(f"[bold]e2ee-chat demo, level {level}: {title}")
        received, hits, relay_dir = run_level(level, root, console, runner)
        console.print("\n[bold]4.[/] what each client " + ("decrypted" if level == 4 else "received"))
        print_screens(received, console)
        print_stored(relay_dir, console)
        console.print(
            "\n[bold]6.[/] searching the relay's database (with -wal) and logs for every plaintext "
            "(UTF-8, base64, base64url, hex)"
        )
        for name, form, text in hits:
            console.print(f"   {'[red]HIT[/]' if level == 4 else 'found'} {name}: {form} of {text!r}")
        console.print(f"plaintext hits: {len(hits)}" + ("" if level == 4 else " (expected at this level)"))
        if level == 4 and hits:
            console.print("[red bold]FAIL: the relay stored or logged plaintext[/]")
            status = 1
        elif level == 4:
            console.print("[green bold]the relay holds only ciphertext[/]")
        elif not hits:
            console.print("[red bold]FAIL: the search found nothing at a level where the relay reads the text[/]")
            status = 1
        else:
            console.print(
                f"[yellow]at level {level} the relay stores readable text: the same search finds "
                f"{len({t for _, _, t in hits})} of {len(SCRIPT)} messages[/]"
            )
    return status


if __name__ == "__main__":
    sys.exit(main())
