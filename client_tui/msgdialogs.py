"""Dialogs about one message (F4 on the selected message): what to do with it (reply, react, edit,
delete), the reaction picker, and the confirmation of a delete for everyone. Each returns the
user's choice; the chat screen (:mod:`.chatactions`) does it. The message's text and sender are
shown through :mod:`.safe`, never as markup."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from .core.record import Record
from .messagebody import quote_words
from .safe import plain

__all__ = ["REACTIONS", "ConfirmDelete", "MessageActions", "ReactionPicker"]

REACTIONS = ("👍", "👎", "😂", "🎉", "😮", "🙏")
"""The picker's reactions: emoji drawn two cells wide in every terminal (no joiner, no variation
selector, no skin tone), chosen with 1-6."""


class MessageActions(ModalScreen[str | None]):
    """Reply (r), react (+), and for my own message edit (e) and delete (d); Escape cancels."""

    BINDINGS = [
        Binding("r", "dismiss('reply')", "Reply"),
        Binding("plus,equals_sign", "dismiss('react')", "React"),
        Binding("e", "pick('edit')", "Edit"),
        Binding("d", "pick('delete')", "Delete"),
        Binding("s", "file('save')", "Save file"),
        Binding("o", "file('open')", "Open file"),
        Binding("escape", "dismiss(None)", "Cancel"),
    ]

    def __init__(self, record: Record, mine: bool) -> None:
        super().__init__()
        self.record, self.mine = record, mine

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog", id="message-actions"):
            yield Static("Message", classes="dialog-title")
            yield Static(plain(quote_words(self.record), newlines=False), id="message-quote")
            with Horizontal(classes="buttons choices"):
                yield Button("Reply (r)", id="reply", variant="primary")
                yield Button("React (+)", id="react")
                if self.mine:
                    yield Button("Edit (e)", id="edit")
                    yield Button("Delete (d)", id="delete", variant="error")
                if self.record.content.t == "attachment" and self.record.content.att:
                    yield Button("Save file (s)", id="save")
                    yield Button("Open file (o)", id="open")

    def action_pick(self, choice: str) -> None:
        if self.mine:  # only the author edits or deletes
            self.dismiss(choice)

    def action_file(self, choice: str) -> None:
        if self.record.content.t == "attachment":  # save or open: only a message with a file
            self.dismiss(choice)

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id)


class ReactionPicker(ModalScreen[str | None]):
    """One of :data:`REACTIONS` (keys 1-6 or a click); Escape cancels. A reaction I already gave
    is marked: choosing it takes it back."""

    BINDINGS = [
        *(Binding(str(i + 1), f"pick({i})", emoji, show=False) for i, emoji in enumerate(REACTIONS)),
        Binding("escape", "dismiss(None)", "Cancel"),
    ]

    def __init__(self, given: set[str] = frozenset()) -> None:
        super().__init__()
        self.given = set(given)

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog", id="reaction-picker"):
            yield Static("React (1-6; again to take it back)", classes="dialog-title")
            with Horizontal(classes="buttons choices"):
                for i, emoji in enumerate(REACTIONS):
                    label = f"{emoji}{' ✓' if emoji in self.given else ''}"
                    yield Button(plain(label, newlines=False), id=f"emoji-{i}")

    def action_pick(self, index: int) -> None:
        self.dismiss(REACTIONS[index])

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.dismiss(REACTIONS[int((event.button.id or "emoji-0").rsplit("-", 1)[1])])


class ConfirmDelete(ModalScreen[bool]):
    """Delete my message for everyone? (y / Enter: yes; n / Escape: no)."""

    BINDINGS = [
        Binding("y", "dismiss(True)", "Delete"),
        Binding("n,escape", "dismiss(False)", "Keep"),
    ]

    def __init__(self, record: Record) -> None:
        super().__init__()
        self.record = record

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog", id="confirm-delete"):
            yield Static("Delete for everyone?", classes="dialog-title")
            yield Static(plain(quote_words(self.record), newlines=False))
            yield Static(
                "It is removed from this device and from every member's device when they receive "
                "the delete (a member's client that ignores deletes keeps it).",
                classes="dim",
            )
            with Horizontal(classes="buttons"):
                yield Button("Delete (y)", id="yes", variant="error")
                yield Button("Keep (n)", id="no", variant="primary")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")
