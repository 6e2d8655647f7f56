"""``e2ee-chat send --attach PATH`` and ``e2ee-chat get-attachment MID --out PATH``: files as
messages from scripts, with a progress bar on standard error (redrawn in place on a terminal,
a line every 10 % otherwise).

The file is sealed and streamed to the relay first (``client.attachments``), then its reference
goes out as the message; ``get-attachment`` finds the message in the history stored here,
downloads the blob, checks every chunk and its SHA-256, and writes the file with mode 0600 —
an existing file is never replaced, and nothing is written unless everything verified.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TextIO

from shared.errors import InvalidRequest

from .chatfiles import safe_name
from .commands import find_conversation, logged_in
from .core.attachments import check_file
from .safe import one_line

MiB = 1024 * 1024
WIDTH = 24


class ProgressBar:
    """``bar(done, total)`` draws ``label [#####-----]  42 %  4.2/10.0 MiB`` on ``stream``: in
    place on a terminal (only when the percentage changes), else one line per 10 %."""

    def __init__(self, label: str, stream: TextIO | None = None) -> None:
        self.label, self.stream = one_line(label), stream or sys.stderr
        self.tty = self.stream.isatty()
        self.shown = -1

    def __call__(self, done: int, total: int) -> None:
        pct = 100 * done // total if total else 100
        if pct == self.shown or (not self.tty and pct // 10 == self.shown // 10 and pct < 100):
            return
        self.shown = pct
        filled = WIDTH * pct // 100
        text = (
            f"{self.label} [{'#' * filled}{'-' * (WIDTH - filled)}] {pct:3d} %  {done / MiB:.1f}/{total / MiB:.1f} MiB"
        )
        print(f"\r{text}" if self.tty else text, end="" if self.tty else "\n", file=self.stream, flush=True)

    def close(self) -> None:
        """End the line of a bar drawn in place."""
        if self.tty and self.shown >= 0:
            print(file=self.stream, flush=True)


async def send_file(args) -> int:
    """``send --attach PATH [--text CAPTION]``: upload, then send the reference; prints its seq."""
    path = Path(args.attach)
    check_file(path)
    caption = "" if args.text is None else (sys.stdin.read() if args.text == "-" else args.text)
    client, _ = await logged_in(args)
    bar = ProgressBar(f"upload {path.name}")
    try:
        conv = args.conversation or await find_conversation(client, args.to, args.title)
        await client.connect()
        await client.wait_synced()
        rec = await client.attachments.send(conv, path, caption=caption, progress=bar)
        bar.close()
        print(f"stored seq={rec.seq} mid={rec.mid} conversation={conv} file={one_line(path.name)}")
        return 0
    finally:
        bar.close()
        await client.close()


async def get_attachment(args) -> int:
    """``get-attachment MID --out PATH``: the file of a message stored here, verified, 0600.
    ``PATH`` an existing folder: saved in it under the file's own name made safe
    (:func:`~client_tui.chatfiles.safe_name`); a file is never replaced and a missing folder
    is never created (``InvalidRequest``, field ``out``)."""
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise InvalidRequest(f"{out} exists: choose another --out (nothing is replaced)", field="out")
    if not out.exists() and not out.parent.is_dir():
        raise InvalidRequest(f"{out}: the folder {out.parent} does not exist (create it first)", field="out")
    client, _ = await logged_in(args)
    try:
        await client.connect()
        await client.wait_synced()  # the message may have arrived since this machine last synced
        which = {"conversation": args.conversation, "sender": args.sender}
        ref = await client.attachments.reference(args.mid, **which)
        if out.is_dir():
            out = out / safe_name(ref.name)
            if out.exists():
                raise InvalidRequest(f"{out} exists: choose another --out (nothing is replaced)", field="out")
        bar = ProgressBar(f"download {ref.name}")
        try:
            await client.attachments.save(args.mid, out, progress=bar, **which)
        finally:
            bar.close()
        print(f"saved {one_line(out)} ({ref.size} bytes, {one_line(ref.type)}, SHA-256 of the blob verified)")
        return 0
    finally:
        await client.close()
