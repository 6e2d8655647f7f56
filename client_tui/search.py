"""Search through one's own decrypted history: ``/`` in the app, ``e2ee-chat search TEXT``.

The history cache keeps message text encrypted at rest (:mod:`.history`); a search decrypts the
rows one by one in the cache's thread and keeps only the matches, in memory. There is no
plaintext index on disk. A query is a list of words and ``"quoted phrases"``; a message matches
when it contains all of them, ignoring case and compatibility forms (NFKC + casefold: ``ﬁ`` is
``fi``, ``Straße`` matches ``strasse``).
"""

from __future__ import annotations

import re
import shlex
import time
import unicodedata
from collections.abc import Callable

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label, OptionList, Static
from textual.widgets.option_list import Option

from .core import ChatClient
from .core.record import Record
from .safe import one_line, plain

SNIPPET_CHARS = 60
RESULTS = 100


def _fold(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()


def terms(query: str) -> list[str]:
    """The words and quoted phrases of ``query``, folded (an unbalanced quote is a character)."""
    try:
        parts = shlex.split(query)
    except ValueError:
        parts = query.split()
    return [t for t in (_fold(p).strip() for p in parts) if t]


def matcher(query: str) -> Callable[[str], bool]:
    """A test ``text -> bool``: every term of ``query`` occurs in the text (none: nothing matches)."""
    wanted = terms(query)

    def match(text: str) -> bool:
        folded = _fold(text)
        return bool(wanted) and all(t in folded for t in wanted)

    return match


def snippet(text: str, query: str, width: int = SNIPPET_CHARS) -> Text:
    """One harmless line of ``text`` around the first term of ``query``, the terms highlighted."""
    flat = one_line(text)
    folded = _fold(flat)
    wanted = terms(query)
    at = min((folded.find(t) for t in wanted if t in folded), default=0)
    start = max(0, at - width // 3)
    piece = flat[start : start + width]
    out = plain(("…" if start else "") + piece + ("…" if start + width < len(flat) else ""))
    low = _fold(out.plain)
    for t in wanted:
        for m in re.finditer(re.escape(t), low):
            if m.end() <= len(out.plain):
                out.stylize("reverse bold", m.start(), m.end())
    return out


class SearchScreen(ModalScreen[Record | None]):
    """Type to search every conversation's history on this machine; Enter jumps to the message."""

    BINDINGS = [
        Binding("escape", "dismiss(None)", "Close", show=True),
        Binding("down", "focus_results", "Results", show=False),
    ]

    def __init__(self, client: ChatClient, query: str = "") -> None:
        super().__init__()
        self.client, self.query_text = client, query
        self.results: list[Record] = []

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog wide tall"):
            yield Static("Search your messages (decrypted on this machine only)", classes="dialog-title")
            yield Input(self.query_text, placeholder='words or "a phrase"', id="search-query")
            yield Label("", id="search-count")
            yield OptionList(id="search-results")

    def on_mount(self) -> None:
        self.query_one("#search-query", Input).focus()
        if self.query_text:
            self._run(self.query_text)

    @on(Input.Changed, "#search-query")
    def _changed(self, event: Input.Changed) -> None:
        self._run(event.value)

    @on(Input.Submitted, "#search-query")
    def _submitted(self) -> None:
        if self.results:
            self.dismiss(self.results[0])

    def action_focus_results(self) -> None:
        options = self.query_one("#search-results", OptionList)
        options.focus()
        if options.highlighted is None and options.option_count:
            options.highlighted = 0  # Enter opens the first result at once

    @on(OptionList.OptionSelected, "#search-results")
    def _picked(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(self.results[event.option_index])

    @work(exclusive=True, group="search")
    async def _run(self, query: str) -> None:
        options = self.query_one("#search-results", OptionList)
        count = self.query_one("#search-count", Label)
        if not terms(query) or self.client.history is None:
            self.results = []
            options.clear_options()
            count.update("")
            return
        found = await self.client.history.search(matcher(query), limit=RESULTS)
        if query != self.query_one("#search-query", Input).value:
            return  # the user typed on: a newer search runs
        self.results = found
        options.clear_options()
        options.add_options([Option(self._row(r, query)) for r in found])
        more = "+" if len(found) >= RESULTS else ""
        count.update(f"{len(found)}{more} message(s)" if found else "no message matches")

    def _row(self, r: Record, query: str) -> Text:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(r.ts / 1000)) if r.ts else "?"
        head = Text(f"{when}  ", style="dim")
        head.append_text(plain(self.client.titles.get(r.conversation, r.conversation)[:24], "bold", newlines=False))
        head.append("  ")
        head.append_text(plain(r.sender, "italic", newlines=False))
        head.append("\n  ")
        head.append_text(snippet(r.text or "", query))
        return head
