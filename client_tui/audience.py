"""The dialog that asks before a message goes to people it was not written for.

A message remembers the members it was written for (``client_tui.core.member_keys.Audience``). When
members joined before it could be sent, it waits (state ``blocked``, reason ``audience_grew``) and
this dialog asks its author: send it to the new members too, don't send it, or decide later.
Every name and text in it is drawn as plain text (``client_tui.safe.plain``), never as markup.
"""

from __future__ import annotations

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from .core.record import Record
from .dialogwork import is_open, outlive
from .safe import one_line, plain

PREVIEW_CHARS = 60


def newcomers(client, record: Record) -> list[str]:
    """Members of the record's conversation now who were not in the audience it was written for."""
    written = set(record.info.audience.members if record.info.audience else [])
    return [u for u in client.members.get(record.conversation, []) if u not in written]


class AudienceScreen(ModalScreen[str | None]):
    """Ask whether messages written before members joined may go to them. Dismisses with
    ``"send"``, ``"drop"`` or None (decide later)."""

    BINDINGS = [Binding("escape", "dismiss(None)", "Later", show=True)]

    def __init__(self, client, record: Record) -> None:
        super().__init__()
        self.client, self.record = client, record
        self.shown = newcomers(client, record)  # what "Send" agrees to: these names, no one who joins later

    def compose(self) -> ComposeResult:
        rec = self.record
        written = rec.info.audience.members if rec.info.audience else []
        waiting = len(self.client.outgoing.waiting(rec.conversation)) or 1
        text = one_line(rec.text or "")
        preview = text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 1] + "…"
        with Vertical(classes="dialog"):
            yield Static(plain("New members since you wrote this"), classes="dialog-title")
            yield Static(
                plain(
                    f"“{preview}”{f' and {waiting - 1} more' if waiting > 1 else ''} was written for "
                    f"{', '.join(written) or '?'}. Since then "
                    f"{', '.join(self.shown) or 'new members'} joined (the change is in the "
                    "conversation, with who made it). Send to them too?"
                ),
                id="audience-question",
            )
            with Horizontal(classes="buttons"):
                yield Button("Send to everyone now", variant="primary", id="send")
                yield Button("Don't send", variant="error", id="drop")
                yield Button("Later", id="later")

    def on_mount(self) -> None:
        self.query_one("#later", Button).focus()

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        choice = {"send": "send", "drop": "drop"}.get(event.button.id or "")
        if choice:
            self._decide(choice)
        else:
            self.dismiss(None)

    @work(exclusive=True)
    async def _decide(self, choice: str) -> None:
        outbox, cid = self.client.outgoing, self.record.conversation
        if choice == "send":
            await outlive(self, outbox.approve(cid, self.shown), "sending to the larger audience")
        else:
            await outlive(self, outbox.decline(cid), "declining the larger audience")
        if is_open(self):  # closed meanwhile ("Later"): dismissing now would close the screen below it
            self.dismiss(choice)


def ask(screen, record: Record) -> None:
    """Push the dialog for ``record`` (at most one per conversation at a time)."""
    asked: set[str] = screen.__dict__.setdefault("_audience_asked", set())
    if record.conversation in asked:
        return
    asked.add(record.conversation)

    def done(_choice) -> None:
        asked.discard(record.conversation)
        still = screen.client.outgoing.waiting(record.conversation)  # someone joined while it was open
        if _choice == "send" and still:
            ask(screen, still[0].record)

    screen.app.push_screen(AudienceScreen(screen.client, record), done)
