"""The composer of the chat window; the message list, the inspector and the text-safety helper
live in :mod:`.messagelog`, :mod:`.inspector` and :mod:`.safe` (re-exported here)."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.message import Message
from textual.widgets import TextArea

from shared import content

from .inspector import inspect_record, reason_words, unreadable_text
from .messagelog import MessageLog
from .safe import harmless

__all__ = [
    "Composer",
    "MessageLog",
    "harmless",
    "inspect_record",
    "reason_words",
    "title_and_badges",
    "unreadable_text",
]


class Composer(TextArea):
    """The message composer: Enter sends; Alt+Enter, Shift+Enter or Ctrl+J adds a line; Up in an
    empty composer edits my last message; pasted text (many lines, emoji, CJK, right-to-left) is
    kept exactly."""

    # Not a priority binding: Enter must be handled in order after the characters typed before it.
    BINDINGS = [Binding("enter", "submit", "Send", show=True)]
    NEWLINE_KEYS = ("alt+enter", "shift+enter", "ctrl+j")

    class Submitted(Message):
        def __init__(self, composer: Composer, text: str) -> None:
            super().__init__()
            self.composer = composer
            self.text = text

    def __init__(self, max_bytes: int = content.MAX_CONTENT_BYTES, **kwargs) -> None:
        super().__init__(soft_wrap=True, show_line_numbers=False, tab_behavior="focus", **kwargs)
        self.max_bytes = max_bytes

    # Textual calls the ``_on_*`` handler of every class in the MRO until one prevents the default:
    # these handlers only prevent it for what they handle, and never call the TextArea's themselves.
    def _on_paste(self, event: events.Paste) -> None:
        size = len(event.text.encode("utf-8", "surrogatepass"))
        if size > self.max_bytes:  # refuse before the text area holds megabytes
            event.stop()
            event.prevent_default()
            self.app.notify(
                f"pasted text is {size / 1e6:.1f} MB; one message holds at most about {self.max_bytes // 1024} KB",
                title="too large",
                severity="error",
            )

    def action_submit(self) -> None:
        """Hand the text over and clear at once, so keys typed right after Enter are kept."""
        text = self.text
        self.clear()
        self.post_message(self.Submitted(self, text))

    class SearchRequested(Message):
        """``/`` pressed in an empty composer: the user wants to search, not to write a ``/``."""

    class EditLast(Message):
        """Up pressed in an empty composer: the user wants to edit their last message."""

    def _on_key(self, event: events.Key) -> None:
        # Decided here, in key order: a binding of the screen would see the text as it was before
        # keys still queued for the composer (fast typing, tmux send-keys) and steal a "/" mid-text.
        if event.key == "slash" and not self.text:
            event.stop()
            event.prevent_default()
            self.post_message(self.SearchRequested())
        elif event.key == "up" and not self.text:
            event.stop()
            event.prevent_default()
            self.post_message(self.EditLast())
        elif event.key == "enter":
            event.stop()
            event.prevent_default()
            self.action_submit()
        elif event.key in self.NEWLINE_KEYS:
            event.stop()
            event.prevent_default()
            start, end = self.selection
            self._replace_via_keyboard("\n", start, end)


def title_and_badges(title: Text, badges: Text) -> Table:
    """One line of the conversation list: ``title`` cut short with "…" to leave room for
    ``badges`` (unread count, ⚠, muted), which are always shown whole.

    Args:
        title, badges: styled text (one line each).
    Returns:
        a Rich grid as wide as the line it is drawn in.
    """
    title = title.copy()
    title.no_wrap, title.overflow = True, "ellipsis"
    grid = Table.grid(expand=True)
    grid.add_column(ratio=1, no_wrap=True, overflow="ellipsis")
    grid.add_column(no_wrap=True)
    grid.add_row(title, badges)
    return grid
