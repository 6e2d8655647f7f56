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

from rich.text import Text
from textual import on, work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Label, ListItem, ListView, Static

from shared.errors import E2EEError, EnvelopeTooLarge

from .core import (
    ChatClient,
    ConnectionState,
    ContactChanged,
    ConversationsChanged,
    GapDetected,
    KeyChangeBlocked,
    KeyChanged,
    RecordChanged,
    RttMeasured,
)
from .history import Record
from .screens import ContactScreen, HelpScreen, LoginScreen, MembersScreen, NewConversationScreen
from .widgets import Composer, MessageLog, harmless, inspect_record

__all__ = ["ChatApp", "ChatScreen", "harmless"]

EVENT_BATCH = 32
GAP_GRACE_S = 2.0
"""A counter gap is shown if still open this long after it appeared (late arrivals fill most)."""
"""Most client events applied to the screen in one go before the loop runs other work."""

Startup = Callable[[ChatClient], Awaitable[str]]

HELP_TEXT = {
    "contact": "Keys: fingerprints, safety number, mark verified, accept a changed key",
    "toggle_inspector": "Inspector: what the relay stored for the selected message, and its costs",
    "new_conversation": "New conversation",
    "members": "Add or remove members of this conversation",
    "escape": "Close the inspector",
}


class ChatScreen(Screen):
    """The main window: conversation list | message log + composer | inspector; status bar."""

    BINDINGS = [
        Binding("f1", "app.help", "Help", priority=True),
        Binding("f2", "toggle_inspector", "Inspector", priority=True),
        Binding("ctrl+n", "new_conversation", "New chat", priority=True),
        Binding("ctrl+g", "members", "Members", priority=True),
        Binding("ctrl+k", "contact", "Keys", priority=True),
        Binding("ctrl+up", "select_message(-1)", "Previous message", show=False, priority=True),
        Binding("ctrl+down", "select_message(1)", "Next message", show=False, priority=True),
        Binding("alt+up", "switch_conversation(-1)", "Previous chat", show=False, priority=True),
        Binding("alt+down", "switch_conversation(1)", "Next chat", show=False, priority=True),
        Binding("ctrl+r", "reconnect", "Reconnect now", show=False, priority=True),
        Binding("escape", "escape", "Close inspector", show=False),
    ]

    def __init__(self, client: ChatClient, conversation: str = "") -> None:
        super().__init__()
        self.client = client
        self.conversation = conversation
        self.gaps: dict[str, dict[str, tuple[int, ...]]] = {}
        self._conv_order: list[str] = []
        self._labels: dict[str, Label] = {}
        self.inspected = None  # the inspector's current renderable (tests read it)
        self._shown: dict[str, Text] = {}
        self._label_shown: dict[str, Text] = {}

    # -- layout ------------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Static(self.title_text(), id="title")
        with Horizontal(id="body"):
            with Vertical(id="sidebar"):
                yield Label("Conversations", id="sidebar-title")
                yield ListView(id="conversations")
            with Vertical(id="main"):
                yield Static("", id="banner")
                yield MessageLog(self.client.username, id="log")
                yield Composer(id="composer", placeholder="Type a message · Enter sends · Ctrl+J new line")
            with VerticalScroll(id="inspector"):
                yield Static(id="inspector-body")
        yield Static("", id="status")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#banner").display = False
        self.query_one("#inspector").display = False
        self.query_one("#composer", Composer).focus()
        self.update_status()
        self.rebuild_conversations()
        if self.conversation:
            self.open_conversation(self.conversation)

    def _update(self, selector: str, content: Text) -> None:
        """Update a Static only when its content changed (each update is a layout pass)."""
        if self._shown.get(selector) != content:
            self._shown[selector] = content
            self.query_one(selector, Static).update(content)

    @property
    def log_view(self) -> MessageLog:
        return self.query_one("#log", MessageLog)

    def title_text(self) -> Text:
        c = self.client
        members = c.members.get(self.conversation, [])
        name = c.titles.get(self.conversation, self.conversation) or "no conversation"
        t = Text()
        t.append(harmless(name), style="bold")
        if members and ", ".join(members) != name:  # a title made of the member names says it already
            t.append("  ·  " + harmless(", ".join(members)))
        t.append(f"  ·  end-to-end encrypted as {harmless(c.username)}", style="italic")
        if self.conversation in c.inactive:
            t.append("  ·  you are no longer a member", style="bold")
        return t

    # -- status bar --------------------------------------------------------------------------------
    def update_status(self, event: ConnectionState | None = None) -> None:
        c = self.client
        level = f"L{c.hello.level}" if c.hello else "L?"
        state = c.state
        dot = {"online": ("●", "green"), "connecting": ("◌", "yellow"), "refused": ("■", "red")}.get(
            state, ("○", "red"))
        t = Text()
        t.append(f"relay {c.server_url.split('://', 1)[-1]}", style="bold")
        t.append(f"  ·  {level}  ·  ")
        t.append(f"{dot[0]} {state}", style=dot[1])
        if event is not None and event.state != "online" and event.detail:
            t.append(f" ({harmless(event.detail)})", style="dim")
        if event is not None and event.retry_in is not None:
            t.append(f" retry in {event.retry_in:.1f} s", style="dim")
        t.append("  ·  RTT " + (f"{c.rtt_ms:.1f} ms" if c.rtt_ms is not None else "–"))
        n = len(c.outbox)
        t.append(f"  ·  outbox {n}", style="yellow" if n else "")
        self._update("#status", t)
        if event is not None:
            self._last_state_event = event

    # -- conversations -----------------------------------------------------------------------------
    def _conv_label(self, cid: str) -> Text:
        c = self.client
        t = Text(harmless(c.titles.get(cid, cid)), style="strike dim" if cid in c.inactive else "")
        n = c.unread.get(cid, 0)
        if n and cid != self.conversation:
            t.append(f"  {n}", style="bold reverse")
        if c.blocked_by(cid):
            t.append(" ⚠", style="bold yellow")
        return t

    def rebuild_conversations(self) -> None:
        lv = self.query_one("#conversations", ListView)
        order = list(self.client.titles)
        if order != self._conv_order:
            self._conv_order = order
            self._label_shown = {cid: self._conv_label(cid) for cid in order}
            self._labels = {cid: Label(self._label_shown[cid]) for cid in order}
            lv.clear()
            lv.extend([ListItem(self._labels[cid], name=cid) for cid in order])
            if self.conversation in order:
                lv.index = order.index(self.conversation)
        else:
            self.refresh_conversation_labels()

    def refresh_conversation_labels(self) -> None:
        for cid, label in self._labels.items():
            text = self._conv_label(cid)
            if self._label_shown.get(cid) != text:
                self._label_shown[cid] = text
                label.update(text)

    @on(ListView.Selected, "#conversations")
    def _picked(self, event: ListView.Selected) -> None:
        if event.item.name and event.item.name != self.conversation:
            self.open_conversation(event.item.name)
        self.query_one("#composer", Composer).focus()

    def open_conversation(self, cid: str) -> None:
        self.conversation = cid
        self.client.mark_read(cid)
        self._update("#title", self.title_text())
        self.log_view.clear()
        self.update_banner()
        self.refresh_conversation_labels()
        if cid in self._conv_order:
            self.query_one("#conversations", ListView).index = self._conv_order.index(cid)
        self._load(cid)

    @work(exclusive=True, group="load-history")
    async def _load(self, cid: str) -> None:
        records = await self.client.load_history(cid)
        if cid != self.conversation:
            return
        self.log_view.set_records(records, {r.lid: self.client.mark(r) for r in records})
        self.gaps.pop(cid, None)
        self.refresh_gaps()
        self.refresh_inspector()

    def action_switch_conversation(self, step: int) -> None:
        if not self._conv_order:
            return
        i = self._conv_order.index(self.conversation) if self.conversation in self._conv_order else 0
        self.open_conversation(self._conv_order[(i + step) % len(self._conv_order)])

    # -- events from the client core -----------------------------------------------------------------
    def apply(self, events: list) -> None:
        """Apply a batch of client events to the screen (called on the UI loop; no awaits)."""
        status = labels = remark = gaps_shown = False
        for ev in events:
            if isinstance(ev, RecordChanged):
                rec = ev.record
                if rec.conversation == self.conversation:
                    self.log_view.upsert(rec, self.client.mark(rec))
                    gaps_shown = gaps_shown or rec.sender in self.gaps.get(self.conversation, {})
                    if ev.new and not rec.mine:
                        self.client.mark_read(self.conversation)
                    sel = self.log_view.selected_record
                    if sel is not None and sel.lid == rec.lid:
                        self.refresh_inspector()
                else:
                    labels = True
                status = status or rec.mine
            elif isinstance(ev, ConnectionState):
                self.update_status(ev)
                self.app.connection = ev.state  # type: ignore[attr-defined]
            elif isinstance(ev, RttMeasured):
                status = True
            elif isinstance(ev, KeyChanged):
                self.app.notify(f"{ev.user}'s key changed: review it with Ctrl+K before sending to them",
                                title="key change", severity="warning", timeout=10)
                remark = labels = True
            elif isinstance(ev, ContactChanged):
                remark = labels = True
            elif isinstance(ev, ConversationsChanged):
                self.rebuild_conversations()
                self._update("#title", self.title_text())
                if not self.conversation and self.client.titles:
                    self.open_conversation(next(reversed(self.client.titles)))
                remark = True
            elif isinstance(ev, GapDetected) and ev.conversation == self.conversation:
                # out-of-order arrivals fill most gaps within moments: show what is still open then
                self.set_timer(GAP_GRACE_S, self.refresh_gaps, name="gap-check")
        if gaps_shown:  # a late message may have filled a gap on screen
            self.refresh_gaps()
        if remark:
            self.log_view.remark({r.lid: self.client.mark(r) for r in self.log_view.records})
            self.update_banner()
        if labels:
            self.refresh_conversation_labels()
        if status:
            self.update_status(getattr(self, "_last_state_event", None))

    def refresh_gaps(self) -> None:
        """Show one notice per sender whose messages never arrived; remove filled ones."""
        cid = self.conversation
        now = self.client.missing_counters(cid) if cid else {}
        shown = self.gaps.setdefault(cid, {})
        for sender in set(shown) | set(now):
            missing = now.get(sender, ())
            if shown.get(sender) == missing:
                continue
            key = f"gap-{cid}-{sender}"
            if not missing:
                shown.pop(sender, None)
                self.log_view.add_notice(key, "")
                continue
            shown[sender] = missing
            span = f"{missing[0]}" if len(missing) == 1 else f"{missing[0]}–{missing[-1]}"
            self.log_view.add_notice(
                key, f"⚠ {len(missing)} message(s) from {harmless(sender)} never arrived (counter {span}): "
                "withheld by the relay, or still on their way")

    def update_banner(self) -> None:
        banner = self.query_one("#banner", Static)
        blocked = self.client.blocked_by(self.conversation) if self.conversation else []
        if not blocked:
            banner.display = False
            return
        t = Text()
        for user in blocked:
            c = self.client.contacts[user]
            evidence = {True: "signed by their previous key", False: "NOT signed by the key you pinned",
                        None: "no rotation evidence"}[c.pending_signed_by_old]
            t.append(f"⚠ {harmless(user)}'s key changed ({evidence}). ", style="bold")
        t.append("Sending here is blocked until you accept or verify it: press Ctrl+K.")
        banner.update(t)
        banner.display = True

    # -- sending -----------------------------------------------------------------------------------
    @on(Composer.Submitted)
    def _submitted(self, event: Composer.Submitted) -> None:
        text = event.text
        if not text.strip():
            return
        if not self.conversation:
            self._give_back(text)
            self.app.notify("no conversation yet: start one with Ctrl+N", severity="warning")
            return
        blocked = self.client.blocked_by(self.conversation)
        if blocked:
            self._give_back(text)
            self.update_banner()
            self.app.notify(f"not sent: {', '.join(blocked)}'s key changed. Review it with Ctrl+K.",
                            severity="error", title="blocked")
            return
        self._send(self.conversation, text)

    def _give_back(self, text: str) -> None:
        """Put unsent text back in the composer (unless the user already typed something new)."""
        composer = self.query_one("#composer", Composer)
        if not composer.text:
            composer.text = text
            composer.move_cursor(composer.document.end)

    @work(group="send")
    async def _send(self, cid: str, text: str) -> None:
        try:
            await self.client.queue_text(cid, text)
        except (KeyChangeBlocked, EnvelopeTooLarge, E2EEError) as exc:
            self._give_back(text)  # nothing was sent
            self.update_banner()
            self.app.notify(f"not sent: {exc.message}", severity="error", title=exc.code)
            return
        self.update_status(getattr(self, "_last_state_event", None))

    # -- inspector and selection -------------------------------------------------------------------
    def action_toggle_inspector(self) -> None:
        insp = self.query_one("#inspector")
        insp.display = not insp.display
        if insp.display and self.log_view.selected_record is None:
            self.log_view.action_select_edge(-1)
        self.refresh_inspector()

    def action_escape(self) -> None:
        if self.query_one("#inspector").display:
            self.action_toggle_inspector()

    def action_select_message(self, step: int) -> None:
        self.log_view.action_select(step)

    @on(MessageLog.Selected)
    def _selected(self, event: MessageLog.Selected) -> None:
        self.refresh_inspector()

    def kid_names(self) -> dict[str, str]:
        names = {}
        for user, c in self.client.contacts.items():
            for ident in (*c.previous, c.identity, *([c.pending] if c.pending else [])):
                names[ident.wrap_kid] = user
        return names

    def refresh_inspector(self) -> None:
        if not self.query_one("#inspector").display:
            return
        body = inspect_record(self.log_view.selected_record, kid_names=self.kid_names(), me=self.client.username)
        self.inspected = body
        self.query_one("#inspector-body", Static).update(body)

    # -- dialogs -----------------------------------------------------------------------------------
    def action_new_conversation(self) -> None:
        def done(cid: str | None) -> None:
            if cid:
                self.rebuild_conversations()
                self.open_conversation(cid)

        self.app.push_screen(NewConversationScreen(self.client), done)

    def action_members(self) -> None:
        if not self.conversation:
            self.app.notify("no conversation open", severity="warning")
            return
        self.app.push_screen(MembersScreen(self.client, self.conversation),
                             lambda _: self._update("#title", self.title_text()))

    def action_contact(self, user: str | None = None) -> None:
        members = [u for u in self.client.members.get(self.conversation, []) if u in self.client.contacts]
        others = [u for u in members if u != self.client.username]
        users = others + [u for u in self.client.contacts if u not in others]
        if not users:
            self.app.notify("no contacts yet", severity="warning")
            return
        blocked = self.client.blocked_by(self.conversation)
        who = user or (blocked[0] if blocked else others[0] if others else users[0])

        def done(_: None) -> None:
            self.apply([ContactChanged(who)])

        self.app.push_screen(ContactScreen(self.client, who, users), done)

    def action_reconnect(self) -> None:
        self.client.reconnect_now()

    @property
    def records(self) -> list[Record]:
        return self.log_view.records


class ChatApp(App):
    """A terminal messenger for one account.

    Args:
        client: a :class:`ChatClient`, logged in unless ``startup`` logs it in; ``None`` shows the
            login screen.
        conversation: the conversation id to open first (or the result of ``startup``).
        startup: optional ``async (client) -> conversation id`` run first in the session worker
            (log in or register, pick or create the conversation).
        server, username, profile_root, kdf: defaults for the login screen.
    """

    CSS_PATH = "chat.tcss"
    TITLE = "e2ee-chat"
    BINDINGS = [
        Binding("ctrl+q", "quit", "Quit", priority=True),
        Binding("f1", "help", "Help"),
    ]

    def __init__(self, client: ChatClient | None = None, conversation: str = "", startup: Startup | None = None,
                 *, server: str = "http://127.0.0.1:8765", username: str = "", profile_root: Path | None = None,
                 kdf: dict | None = None) -> None:
        super().__init__()
        self.client = client
        self.conversation = conversation
        self.startup = startup
        self.connection = "offline"
        self._login_defaults = {"server": server, "username": username, "profile_root": profile_root, "kdf": kdf}
        self.chat: ChatScreen | None = None
        self.freeze_gc = True
        self._frozen = False

    def on_mount(self) -> None:
        if self.client is None:
            d = self._login_defaults
            self.push_screen(LoginScreen(d["server"], d["username"], profile_root=d["profile_root"], kdf=d["kdf"]),
                             self._logged_in)
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
                self.push_screen(LoginScreen(self.client.server_url, self.client.username,
                                             profile_root=self.client.profile.parent.parent, kdf=self.client.kdf,
                                             error=f"{exc.message} ({exc.code})"), self._logged_in)
                await self.client.close()
                self.client = None
                return
            self.notify(f"{exc.message} ({exc.code})", severity="error", timeout=30)
        self._open_chat()

    def _open_chat(self) -> None:
        assert self.client is not None
        self.chat = ChatScreen(self.client, self.conversation)
        self.push_screen(self.chat)
        self.run_worker(self._session(), name="session", exclusive=True, group="session")
        self.call_after_refresh(self._freeze_heap)

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
            self.notify(f"could not load conversations: {exc.message}", severity="warning")
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
        for owner, where in ((ChatApp, ""), (ChatScreen, ""), (Composer, " (composer)"),
                             (MessageLog, " (message list)")):
            for b in owner.BINDINGS:
                b = b if isinstance(b, Binding) else Binding(*b)
                if b.key in seen or not b.description:
                    continue
                seen.add(b.key)
                rows.append((self._keys(b.key) + where, HELP_TEXT.get(b.action, b.description)))
        rows += [
            ("ctrl+j (alt+enter, shift+enter where the terminal sends them)", "New line in the composer"),
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
        yield SystemCommand("New conversation", "Start a conversation with one or more users",
                            chat.action_new_conversation)
        yield SystemCommand("Members", "Add or remove members of this conversation", chat.action_members)
        yield SystemCommand("Keys and safety number", "Fingerprints, safety number, verify or accept a key change",
                            chat.action_contact)
        yield SystemCommand("Inspector", "Show what the relay stored for the selected message and what it cost",
                            chat.action_toggle_inspector)
        yield SystemCommand("Reconnect now", "Skip the reconnect wait", chat.action_reconnect)
        yield SystemCommand("Help", "Every key binding", self.action_help)
        for user in chat.client.blocked_by(chat.conversation):
            yield SystemCommand(f"Review {user}'s new key", "Compare fingerprints, then accept or verify",
                                lambda u=user: chat.action_contact(u))

    async def on_unmount(self) -> None:
        if self._frozen:
            gc.unfreeze()
            self._frozen = False
        if self.client is not None:
            await self.client.close()
