"""How one row of the message log reads: its prefix and body laid out in the pane's width
(:func:`lay_out`), the day separator (:func:`day_label`), and the body of a message with what
other documents did to it (:func:`body_text`: the quote of a reply, "edited", reactions, read
marks, the disappearing-message mark, an attachment, a refused action, a timer or title line).

Everything another user controls (text, names, emoji, file names, titles) is made
:func:`~client_tui.safe.harmless` and put in a Rich ``Text``: never parsed as markup.
"""

from __future__ import annotations

import time

from rich.text import Text

from .core.annotate import REFUSALS
from .core.expiry import timer_words
from .core.record import Record
from .inspector import unreadable_text
from .safe import harmless, one_line

__all__ = ["MARK_GLYPH", "STATE_GLYPH", "body_text", "day_label", "lay_out", "line_words", "quote_words", "read_words"]

STATE_GLYPH = {
    "sealing": ("…", "dim"),
    "sending": ("…", "dim"),
    "stored": ("✓", "dim"),
    "delivered": ("✓✓", "green"),
    "blocked": ("⛔ waiting for a key decision", "bold yellow"),
    "failed": ("✗ not sent", "bold red"),
}
MARK_GLYPH = {
    "verified": ("✔", "bold green"),
    "unverified": ("·", "dim"),
    "warning": ("⚠", "bold yellow"),
    "previous": ("↺ signed by a previous key", "yellow"),
    "unreadable": ("✖", "bold red"),
}
MIN_FIRST_LINE = 12
"""Fewest cells left to a message's text beside its prefix ("time name mark"); with less, the text
starts on the line below the prefix."""


def lay_out(console, prefix: Text, body: Text, width: int) -> list[Text]:
    """The lines of one message: ``prefix`` ("time name mark") then ``body``, none wider than
    ``width`` cells, no character of either left out.

    The first line of the body is wrapped at the width left beside the prefix; the lines after it
    are indented by the prefix's width, at most a third of ``width``. A prefix that leaves fewer
    than :data:`MIN_FIRST_LINE` cells (a long name, a long mark, a narrow pane) is drawn alone
    (wrapped itself if wider than ``width``) and the body starts below it.

    Args:
        console: the Rich console that measures cells.  prefix, body: styled text.
        width: the cells of the pane (>= 1).
    Returns:
        one ``Text`` per screen line, each at most ``width`` cells.
    """
    width = max(1, width)
    indent = min(prefix.cell_len, width // 3)
    rest_width = max(1, width - indent)
    first_width = width - prefix.cell_len
    if first_width < min(MIN_FIRST_LINE, rest_width):
        lines = list(prefix.wrap(console, width)) or [Text()]
        return lines + [Text.assemble(" " * indent, line) for line in body.wrap(console, rest_width)]
    first = body.wrap(console, first_width)
    if not first:
        return [prefix.copy()]
    head = first[0]
    rest = body[len(head.plain) :]
    if rest.plain.startswith("\n"):
        rest = rest[1:]
    else:  # the wrap broke at spaces: the next line starts at the next word
        rest = rest[len(rest.plain) - len(rest.plain.lstrip(" ")) :]
    out = [Text.assemble(prefix, head)]
    if rest.plain:
        out += [Text.assemble(" " * indent, line) for line in rest.wrap(console, rest_width)]
    return out


def day_label(ts_ms: int) -> str:
    """The day separator's words for a time in ms: Today, Yesterday, "Monday 30 November", or with
    the year when it is not this year (local time)."""
    if not ts_ms:
        return ""
    t, now = time.localtime(ts_ms / 1000), time.localtime()
    days = (
        time.mktime((now.tm_year, now.tm_mon, now.tm_mday, 12, 0, 0, 0, 0, -1))
        - time.mktime((t.tm_year, t.tm_mon, t.tm_mday, 12, 0, 0, 0, 0, -1))
    ) / 86400
    if round(days) == 0:
        return "Today"
    if round(days) == 1:
        return "Yesterday"
    words = f"{time.strftime('%A', t)} {t.tm_mday} {time.strftime('%B', t)}"
    return words if t.tm_year == now.tm_year else f"{words} {t.tm_year}"


QUOTE_CHARS = 60
"""Most characters of a quoted message shown above a reply."""
MAX_REACTIONS_SHOWN = 12
"""Distinct reactions drawn under a message (the inspector lists them all)."""
ACTION_WORDS = {"edit": "an edit", "delete": "a delete", "react": "a reaction", "read": "a read receipt"}


def quote_words(quoted: Record | None) -> str:
    """The quote line of a reply: who wrote the quoted message and its text (newest version),
    cut to :data:`QUOTE_CHARS`; what it is when it is not here or was deleted."""
    if quoted is None:
        return "a message not on this device"
    if quoted.state == "deleted":
        return "a deleted message"
    text = one_line(quoted.text or "")
    text = text if len(text) <= QUOTE_CHARS else text[: QUOTE_CHARS - 1] + "…"
    return f"{one_line(quoted.sender)}: {text}"


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n} B"


def line_words(r: Record) -> Text | None:
    """The body of a line about the conversation, or of a refused action; None for a message."""
    d = r.content
    if r.state == "ignored":
        words = REFUSALS.get(r.reason, r.reason)
        return Text(f"⚠ {ACTION_WORDS.get(d.t, d.t)} from {one_line(r.sender)} was ignored: {words}", "yellow")
    if d.t == "expire":
        seconds = d.seconds or 0
        what = f"set disappearing messages to {timer_words(seconds)}" if seconds else "turned disappearing messages off"
        return Text(f"⏱ {one_line(r.sender)} {what}", "italic")
    if d.t == "title":
        return Text.assemble(("renamed the conversation: ", "italic"), harmless(d.title or ""))
    return None


def read_words(readers: list[str], audience: int) -> str:
    """My message's read mark: ``✓✓ read`` in a conversation of two, else who read it — ``read by
    carol``, ``read by bob, carol``, ``read by 3 of 5`` — so a group never reads as "everyone read
    it" when only some did (newcomer F8). ``audience``: the members other than me (0: unknown)."""
    audience = max(audience, len(readers))
    if audience <= 1:
        return "✓✓ read"
    if len(readers) <= 2:
        return f"✓✓ read by {one_line(', '.join(readers))}"
    return f"✓✓ read by {len(readers)} of {audience}"


def body_text(r: Record, *, me: str, quoted: Record | None, readers: list[str], audience: int = 0) -> Text:
    """The body of row ``r``: its text (a reply's quote above it, an attachment's name, size and
    caption), "edited", the disappearing mark ⏱, my message's state and read marks, and the
    reactions under it.

    Args:
        r: the record (``visible``).  me: my username.
        quoted: the message a reply quotes, as it is here (None: not here).
        readers: who read ``r`` by their receipts (mine only).
        audience: how many members besides me could read it (0: unknown).
    """
    if r.state == "unreadable" or (r.text is None and r.content.t in ("text", "reply")):
        return Text(unreadable_text(r.reason, r.sender, r.detail), style="red")
    line = line_words(r)
    if line is not None:
        return line
    d = r.content
    body = Text()
    if d.t == "reply":
        body.append(f"↪ {quote_words(quoted)}\n", style="dim italic")
    if d.t == "attachment" and d.att:
        att = d.att
        body.append(f"📎 {one_line(att.get('name', 'file'))}", style="bold")
        body.append(f" ({one_line(att.get('type', '?'))}, {_size(int(att.get('size', 0)))})", style="dim")
        if r.text:
            body.append("\n")
    body.append(harmless(r.text or ""))
    if d.versions:
        body.append(" (edited)", style="dim italic")
    if d.exp:
        body.append(" ⏱", style="dim")
    if r.sender == me and r.state in STATE_GLYPH:
        glyph, style = STATE_GLYPH[r.state]
        if readers and r.state in ("stored", "delivered"):
            glyph, style = read_words(readers, audience), "bold green"
        body.append(f"  {glyph}", style=style)
    if d.reactions:
        shown = list(d.reactions.items())[:MAX_REACTIONS_SHOWN]
        parts = [f"{harmless(emoji)} {len(users)}" for emoji, users in shown]
        more = len(d.reactions) - len(shown)
        body.append("\n" + "  ".join(parts) + (f"  +{more}" if more > 0 else ""), style="bold")
    return body
