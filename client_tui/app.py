"""The Textual app: conversations, the message log, the composer, the inspector, the status bar,
and the dialogs (login, new conversation, members, contact/safety number, help).

Layout lives in ``compose()``, style in ``chat.tcss``. The client core runs on the app's event
loop (an async worker reads its events in batches); every RSA, Argon2id and SQLite call it makes
runs in a thread, so typing stays responsive while messages arrive.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path

from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.screen import Screen

from shared.errors import E2EEError, ErrorCode

from .chatscreen import ChatScreen
from .core import ChatClient
from .login import LoginScreen
from .messagelog import MessageLog
from .notify import Notifier
from .prefs import Prefs
from .safe import harmless, toast
from .screens import HelpScreen
from .userwords import describe
from .widgets import Composer

__all__ = ["ChatApp", "ChatScreen", "harmless"]

EVENT_BATCH = 32
"""Most client events applied to the screen in one go before the loop runs other work."""

Startup = Callable[[ChatClient], Awaitable[str]]

HELP_TEXT = {
    "contact": "Keys: fingerprints, safety number, mark verified, accept a changed key",
    "toggle_inspector": "Inspector: what the relay stored for the selected message, and its costs",
    "new_conversation": "New conversation",
    "members": "Add or remove members of this conversation",
    "escape": "Cancel a reply or an edit; close the inspector",
    "settings": "Settings: theme, notifications, read receipts; mute and disappearing messages here",
    "message_menu": (
        "The selected message (else the last): r reply, + react, e edit and d delete (your own), "
        "s save and o open a file"
    ),
    "search": "Search your messages on this machine (/ in an empty composer, or Ctrl+F)",
    "reconnect": "Reconnect now (after a refused password: type it again)",
    "attach": "Attach a file: starts /attach PATH [caption] in the composer (Enter sends it)",
    "save_file": "Save the selected message's file (verified, 0600, never over an existing file)",
    "open_file": "Open the selected message's file with the desktop opener (temporary copy, removed after)",
}


class ChatApp(App):
    """A terminal messenger for one account.

    Args:
        client: a :class:`ChatClient`, logged in unless ``startup`` logs it in; ``None`` shows the
            login screen.
        conversation: the conversation id to open first (or the result of ``startup``).
        startup: optional ``async (client) -> conversation id`` run first in the session worker
            (log in or register, pick or create the conversation).
        server, username, profile_root, kdf, cafile, key_lifetime_days: defaults for the login screen.
    """

    CSS_PATH = Path(__file__).with_name("chat.tcss")
    TITLE = "e2ee-chat"
    BINDINGS = [
        Binding("ctrl+q", "quit", "Quit", priority=True),
        Binding("f1", "help", "Help"),
        # priority: focus moves when Tab arrives, before the keys behind it are routed. Textual's
        # own Tab binding runs only after the key has gone through the old field's queue, so type-ahead
        # (tmux, auto-type) landed in the previous field (newcomer F15). No widget here takes Tab.
        Binding("tab", "app.focus_next", "", show=False, priority=True),
        Binding("shift+tab", "app.focus_previous", "", show=False, priority=True),
    ]

    def __init__(
        self,
        client: ChatClient | None = None,
        conversation: str = "",
        startup: Startup | None = None,
        *,
        server: str = "http://127.0.0.1:8765",
        username: str = "",
        profile_root: Path | None = None,
        kdf: dict | None = None,
        cafile: str | None = None,
        key_lifetime_days: float = 7.0,
    ) -> None:
        super().__init__()
        self.client = client
        self.conversation = conversation
        self.startup = startup
        self.connection = "offline"
        self._login_defaults = {
            "server": server,
            "username": username,
            "profile_root": profile_root,
            "kdf": kdf,
            "cafile": cafile,
            "key_lifetime_days": key_lifetime_days,
        }
        self.chat: ChatScreen | None = None
        self.prefs = Prefs()
        self.notifier = Notifier(self.prefs, self.write_terminal)
        self.freeze_gc = True
        self._frozen = False

    def on_mount(self) -> None:
        if self.client is None:
            d = self._login_defaults
            self.push_screen(
                LoginScreen(
                    d["server"],
                    d["username"],
                    profile_root=d["profile_root"],
                    kdf=d["kdf"],
                    cafile=d["cafile"],
                    key_lifetime_days=d["key_lifetime_days"],
                ),
                self._logged_in,
            )
        elif self.startup is not None:
            self.run_worker(self._startup(), name="startup", exclusive=True)
        else:
            self._open_chat()

    def _logged_in(self, client: ChatClient | None) -> None:
        if client is None:
            self.exit()
            return
        self.client = client
        self._open_chat()

    async def _startup(self) -> None:
        assert self.client is not None and self.startup is not None
        try:
            self.conversation = await self.startup(self.client)
        except E2EEError as exc:
            if self.client.identity is None:  # not logged in (wrong passphrase, refused ...): ask again
                self.push_screen(
                    LoginScreen(
                        self.client.server_url,
                        self.client.username,
                        profile_root=self.client.profile.parent.parent,
                        kdf=self.client.kdf,
                        error=describe(exc),
                        cafile=self.client.cafile,
                        key_lifetime_days=self.client.epochs.lifetime_days,
                    ),
                    self._logged_in,
                )
                await self.client.close()
                self.client = None
                return
            # logged in on this machine, not at the relay (down, or the password refused): the
            # session logs in when the relay answers, or asks for the password again
            toast(self, describe(exc), severity="error", timeout=8 if exc.code == ErrorCode.UNREACHABLE else 30)
        self._open_chat()

    def _open_chat(self) -> None:
        assert self.client is not None
        self.prefs = Prefs.load(self.prefs_path)
        self.theme = self.prefs.theme
        self.client.receipts.enabled = self.prefs.read_receipts
        self.notifier = Notifier(self.prefs, self.write_terminal)
        self.chat = ChatScreen(self.client, self.conversation)
        self.push_screen(self.chat)
        self.run_worker(self._session(), name="session", exclusive=True, group="session")
        self.call_after_refresh(self._freeze_heap)

    @property
    def prefs_path(self) -> Path:
        assert self.client is not None
        return self.client.profile / "settings.json"

    def save_prefs(self) -> None:
        try:
            self.prefs.save(self.prefs_path)
        except OSError as exc:
            toast(self, f"settings not saved: {describe(exc)}", severity="error")

    def write_terminal(self, text: str) -> None:
        """Write control text (bell, OSC 9) to the terminal, between Textual's frames."""
        if not self.is_headless and self._driver is not None:
            self._driver.write(text)

    def _freeze_heap(self) -> None:
        """Move everything alive after start-up out of the garbage collector's reach.

        A full (generation 2) collection walks every object; with Textual's widget tree that took
        50-65 ms here, long enough to be felt as a stutter while a burst of messages arrives. Frozen
        objects are not walked (``gc.freeze``); :meth:`on_unmount` gives them back.
        """
        if self.freeze_gc and not self._frozen:
            gc.collect()
            gc.freeze()
            self._frozen = True

    async def _session(self) -> None:
        """Keep the client online and feed its events to the screen, in batches."""
        client, chat = self.client, self.chat
        assert client is not None and chat is not None
        try:
            await client.refresh_conversations()
        except E2EEError as exc:
            if exc.code != ErrorCode.UNREACHABLE:  # offline is on the status bar
                toast(self, f"could not load conversations: {exc.message}", severity="warning")
        if not self.is_running:  # closed while the conversations loaded (see below)
            return
        if not chat.conversation and client.titles:
            chat.open_conversation(next(reversed(client.titles)))
        client.start()
        while True:
            batch = [await client.events.get()]
            while len(batch) < EVENT_BATCH and not client.events.empty():
                batch.append(client.events.get_nowait())
            if not self.is_running:
                # The app is closing: Textual removes the screens before it cancels this worker,
                # so the chat screen's widgets may be gone already. Nothing is left to show.
                return
            chat.apply(batch)
            await asyncio.sleep(0)

    # -- actions and commands ----------------------------------------------------------------------
    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def help_rows(self) -> list[tuple[str, str]]:
        """(keys, description) of every binding of the chat window, for the help screen."""
        rows: list[tuple[str, str]] = []
        seen = set()
        for owner, where in (
            (ChatApp, ""),
            (ChatScreen, ""),
            (Composer, " (composer)"),
            (MessageLog, " (message list)"),
        ):
            for b in owner.BINDINGS:
                b = b if isinstance(b, Binding) else Binding(*b)
                if b.key in seen or not b.description:
                    continue
                seen.add(b.key)
                rows.append((self._keys(b.key) + where, HELP_TEXT.get(b.action, b.description)))
        rows += [
            ("ctrl+j (alt+enter, shift+enter where the terminal sends them)", "New line in the composer"),
            ("up (empty composer)", "Edit your last message"),
            ("tab / shift+tab", "Move between conversations, messages and the composer"),
            ("ctrl+p", "Command palette"),
            ("in Keys: v / a", "Mark verified / accept a changed key"),
        ]
        return rows

    @staticmethod
    def _keys(key: str) -> str:
        return " / ".join(k.strip() for k in key.split(","))

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        chat = self.chat
        if chat is None or screen is not chat:
            return
        yield SystemCommand(
            "New conversation", "Start a conversation with one or more users", chat.action_new_conversation
        )
        yield SystemCommand("Members", "Add or remove members of this conversation", chat.action_members)
        yield SystemCommand(
            "Keys and safety number", "Fingerprints, safety number, verify or accept a key change", chat.action_contact
        )
        yield SystemCommand(
            "Inspector",
            "Show what the relay stored for the selected message and what it cost",
            chat.action_toggle_inspector,
        )
        yield SystemCommand("Reconnect now", "Skip the reconnect wait", chat.action_reconnect)
        yield SystemCommand("Attach a file", "Type /attach PATH [caption] in the composer", chat.action_attach)
        yield SystemCommand("Save file", "Save the selected message's file", chat.action_save_file)
        yield SystemCommand("Open file", "Open the selected file with the desktop opener", chat.action_open_file)
        yield SystemCommand("Search messages", "Search your decrypted history on this machine", chat.action_search)
        yield SystemCommand("Settings", "Theme, notifications, mute this conversation", chat.action_settings)
        yield SystemCommand("Help", "Every key binding", self.action_help)
        for user in chat.client.blocked_by(chat.conversation):
            yield SystemCommand(
                f"Review {user}'s new key",
                "Compare fingerprints, then accept or verify",
                lambda u=user: chat.action_contact(u),
            )

    async def on_unmount(self) -> None:
        if self._frozen:
            gc.unfreeze()
            self._frozen = False
        if self.client is not None:
            history = self.client.history
            if history is not None:  # what was read is read after a restart, however fast the quit
                for cid, n in list(self.client.unread.items()):
                    await history.set_unread(cid, n)
            await self.client.close()
