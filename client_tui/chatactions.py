"""What the user does to a message in the chat window: reply (the quote shown above the
composer), edit (Up in an empty composer edits my last message), delete for everyone (after a
confirmation), react (a short picker) - F4 on the selected message offers them (Ctrl+Up/Down
select; without a selection, the last message). Escape cancels a reply or an edit in progress.

A mixin of :class:`~client_tui.chatscreen.ChatScreen` (which owns the layout: ``#context`` above
the composer). The work runs in the client core (``client.messaging``); a refusal (not the
author, a message not here, a key change waiting) is shown as a toast and nothing is sent.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

from rich.text import Text
from textual import work
from textual.widgets import Static

from shared.errors import E2EEError

from .core.record import Record, RecordState
from .messagebody import quote_words
from .msgdialogs import ConfirmDelete, MessageActions, ReactionPicker
from .safe import toast
from .widgets import Composer

__all__ = ["ChatActions"]

EDITABLE = (RecordState.SENDING, RecordState.STORED, RecordState.DELIVERED)
"""States of my messages that can be edited or deleted (sealed: they have a message id)."""


class ChatActions:
    """Reply, edit, delete and react (mixed into ``ChatScreen``, which provides ``app``, ``client``,
    ``conversation``, ``log_view`` and ``query_one``)."""

    app: Any
    client: Any
    conversation: str
    log_view: Any
    query_one: Any
    composing: tuple[str, Record] | None = None
    """A reply to or an edit of a message being written: ("reply" or "edit", the message)."""

    # -- which message -------------------------------------------------------------------------------
    def message_target(self) -> Record | None:
        """The selected message, else the last one on screen (a message with an id, not a line)."""
        sel = self.log_view.selected_record
        if sel is not None and sel.is_message and sel.mid:
            return sel
        messages = [r for r in self.log_view.records if r.is_message and r.mid]
        return messages[-1] if messages else None

    def _mine(self, rec: Record) -> bool:
        return rec.sender == self.client.username and rec.state in EDITABLE

    def action_message_menu(self) -> None:
        """F4: what to do with the selected message."""
        rec = self.message_target()
        if rec is None:
            toast(self.app, "no message to act on yet", severity="warning")
            return

        def chosen(choice: str | None) -> None:
            if choice == "reply":
                self.start_composing("reply", rec)
            elif choice == "edit":
                self.start_composing("edit", rec)
            elif choice == "delete":
                self.ask_delete(rec)
            elif choice == "react":
                self.ask_reaction(rec)
            elif choice in ("save", "open"):
                self.file_action(choice, rec)  # type: ignore[attr-defined]  # ChatFiles

        self.app.push_screen(MessageActions(rec, self._mine(rec)), chosen)

    # -- reply and edit: the composer's context ------------------------------------------------------
    def start_composing(self, kind: str, rec: Record) -> None:
        """Write a reply to ``rec`` or an edit of it (its text put in the composer)."""
        composer = self.query_one("#composer", Composer)
        if kind == "edit":
            if not self._mine(rec):
                toast(self.app, "only your own sent messages can be edited", severity="warning")
                return
            composer.text = rec.text or ""
            composer.move_cursor(composer.document.end)
        self.composing = (kind, rec)
        self.show_context()
        composer.focus()

    def show_context(self) -> None:
        bar = self.query_one("#context", Static)
        if self.composing is None:
            bar.display = False
            return
        kind, rec = self.composing
        t = Text()
        if kind == "reply":
            t.append("↪ replying to ", style="bold")
            t.append(quote_words(rec))
        else:
            t.append("✎ editing your message", style="bold")
        t.append("  ·  Esc cancels", style="dim")
        bar.update(t)
        bar.display = True

    def cancel_composing(self) -> bool:
        """Stop a reply or an edit in progress (an edit's text leaves the composer); False if none."""
        if self.composing is None:
            return False
        kind, _ = self.composing
        self.composing = None
        if kind == "edit":
            self.query_one("#composer", Composer).clear()
        self.show_context()
        return True

    def send_composed(self, text: str) -> bool:
        """Send ``text`` as the reply or edit in progress; False if there is none."""
        if self.composing is None:
            return False
        kind, rec = self.composing
        self.composing = None
        self.show_context()
        m = self.client.messaging
        if kind == "reply":
            self.run_action(m.send(rec.conversation, text, reply=rec.mid), "reply not sent")
        elif text != rec.text:
            self.run_action(m.edit(rec.mid, text), "not edited")
        return True

    def on_composer_edit_last(self, _message: Composer.EditLast) -> None:
        """Up in an empty composer: edit my last message."""
        mine = [r for r in self.log_view.records if r.is_message and r.mid and self._mine(r)]
        if mine:
            self.start_composing("edit", mine[-1])

    def action_escape(self) -> None:
        if not self.cancel_composing():
            super().action_escape()  # type: ignore[misc]  # ChatPanes: close the inspector

    # -- delete and react ------------------------------------------------------------------------------
    def ask_delete(self, rec: Record) -> None:
        if not self._mine(rec):
            toast(self.app, "only your own sent messages can be deleted", severity="warning")
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self.run_action(self.client.messaging.delete(rec.mid), "not deleted")

        self.app.push_screen(ConfirmDelete(rec), answered)

    def ask_reaction(self, rec: Record) -> None:
        me = self.client.username
        given = {emoji for emoji, users in rec.content.reactions.items() if me in users}

        def picked(emoji: str | None) -> None:
            if emoji:
                self.run_action(
                    self.client.messaging.react(rec.mid, emoji, conversation=rec.conversation, sender=rec.sender),
                    "reaction not sent",
                )

        self.app.push_screen(ReactionPicker(given), picked)

    @work(group="message-action")
    async def run_action(self, job: Awaitable, what: str) -> None:
        """Run one of ``client.messaging``'s calls; a refusal becomes a toast (``what``: its title)."""
        try:
            await job
        except E2EEError as exc:
            toast(self.app, f"{what}: {exc.message}", title=exc.code, severity="error")
