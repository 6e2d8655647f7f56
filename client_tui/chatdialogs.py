"""The chat screen's dialogs: new conversation, members, keys, settings, search, and the relay
password asked again (Ctrl+R after a refusal).

A mixin of :class:`~client_tui.chatscreen.ChatScreen` (which owns the layout, the message log and the
events): each ``action_*`` here is bound to a key in ``ChatScreen.BINDINGS`` and pushes one modal
screen, then refreshes what the dialog may have changed. It uses the screen's ``client``,
``conversation``, ``apply()``, ``open_conversation()`` and ``rebuild_conversations()``.
"""

from __future__ import annotations

from typing import Any

from .connection import PasswordScreen, downgraded, needs_password
from .core import ContactChanged
from .core.record import Record
from .prefs import SettingsScreen
from .safe import toast
from .screens import ContactScreen, MembersScreen, NewConversationScreen
from .search import SearchScreen

__all__ = ["ChatDialogs"]


class ChatDialogs:
    """Key-bound dialogs of the chat screen (mixed into ``ChatScreen``, which provides ``app``,
    ``client``, ``conversation`` and the refresh methods named in each action)."""

    app: Any
    client: Any
    conversation: str
    run_action: Any

    def action_new_conversation(self) -> None:
        def done(cid: str | None) -> None:
            if cid:
                self.rebuild_conversations()
                self.open_conversation(cid)

        self.app.push_screen(NewConversationScreen(self.client), done)

    def action_members(self) -> None:
        if not self.conversation:
            toast(self.app, "no conversation open", severity="warning")
            return
        self.app.push_screen(
            MembersScreen(self.client, self.conversation), lambda _: self._update("#title", self.title_text())
        )

    def action_contact(self, user: str | None = None) -> None:
        members = [u for u in self.client.members.get(self.conversation, []) if u in self.client.contacts]
        others = [u for u in members if u != self.client.username]
        users = others + [u for u in self.client.contacts if u not in others]
        if not users:
            toast(self.app, "no contacts yet", severity="warning")
            return
        blocked = self.client.blocked_by(self.conversation)
        who = user or (blocked[0] if blocked else others[0] if others else users[0])

        def done(_: None) -> None:
            self.apply([ContactChanged(who)])

        self.app.push_screen(ContactScreen(self.client, who, users), done)

    def action_settings(self) -> None:
        """F3: theme, notifications, read receipts; mute and the disappearing-message timer of this
        conversation (saved when the dialog closes; a new timer is sent to the members then)."""
        cid = self.conversation
        timer = self.client.expiry.timers.get(cid, 0)
        title = self.client.titles.get(cid, cid)
        screen = SettingsScreen(self.app.prefs, cid, title, timer)

        def done(_: bool | None) -> None:
            self.app.save_prefs()
            self.client.receipts.enabled = self.app.prefs.read_receipts
            self.refresh_conversation_labels()
            if cid and screen.timer != timer:
                self.run_action(self.client.messaging.set_timer(cid, screen.timer), "timer not set")

        self.app.push_screen(screen, done)

    def action_search(self) -> None:
        """Search the decrypted history on this machine; the picked message is shown selected."""

        def done(found: Record | None) -> None:
            if found is not None:
                self.open_conversation(found.conversation, show=found)

        self.app.push_screen(SearchScreen(self.client), done)

    def action_reconnect(self) -> None:
        """Ctrl+R: try now, whatever the state (after a refused password: ask for it again)."""
        if needs_password(self.client):
            self.ask_password(getattr(getattr(self, "_last_state_event", None), "detail", ""))
        elif downgraded(self.client):
            toast(
                self.app,
                f"the relay runs level {self.client.hello.level}: this client only talks to "
                "level-4 (end-to-end encrypted) relays",
                severity="error",
            )
        else:
            self.client.reconnect_now()

    def ask_password(self, reason: str) -> None:
        """Offer to type the relay password again (once at a time)."""
        if not any(isinstance(s, PasswordScreen) for s in self.app.screen_stack):
            self.app.push_screen(PasswordScreen(self.client, reason))
