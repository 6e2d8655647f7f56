"""The inspector's part about a message's document, shown here only (the relay never sees it):
its type and the message it refers to, the earlier texts of an edit, who reacted with what, who
read it (their end-to-end read receipts), when it disappears, and why an action was refused.
Every string another user controls goes through :mod:`.safe`."""

from __future__ import annotations

import time

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from .core.annotate import REFUSALS
from .core.expiry import timer_words
from .core.record import Record
from .safe import plain

__all__ = ["inspect_document"]


def _when(ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000))


def inspect_document(record: Record, readers: list[str]) -> RenderableType | None:
    """What ``record``'s document says and what later documents did to it; None for a plain text
    message nobody edited, reacted to, read or timed (nothing to add)."""
    d = record.content
    rows: list[tuple[str, RenderableType]] = []
    if d.t != "text":
        rows.append(("type", plain(d.t)))
    if d.ref:
        rows.append(("refers to", plain(d.ref)))
    if record.state == "ignored":
        rows.append(("ignored", Text.assemble((record.reason, "bold yellow"), "  ", REFUSALS.get(record.reason, ""))))
        rows.append(("why", plain(record.detail, "yellow")))
    if d.t == "expire":
        rows.append(("timer", Text(timer_words(d.seconds or 0))))
    for i, v in enumerate(d.versions, 1):
        rows.append((f"version {i}", Text.assemble((_when(v.ts) + "  ", "dim"), plain(v.body))))
    if d.versions and d.edited:
        rows.append((f"version {len(d.versions) + 1}", Text.assemble((_when(d.edited) + "  ", "dim"), "(shown)")))
    for emoji, users in d.reactions.items():
        rows.append(("reaction", Text.assemble(plain(emoji, newlines=False), "  ", plain(", ".join(users)))))
    if readers:
        rows.append(("read by", plain(", ".join(readers))))
    if d.exp:
        rows.append(("disappears", Text(_when(d.exp))))
    if not rows:
        return None
    table = Table.grid(padding=(0, 2))
    table.add_column(style="dim")
    table.add_column()
    for name, value in rows:
        table.add_row(name, value)
    title = Text("The message's document (here only: sealed, the relay cannot read it)", style="bold")
    return Group(title, table)
