"""The main window: conversation list | message log + composer | inspector, and the status bar.

Layout in ``compose()``, style in ``chat.tcss``; the size classes (``-narrow``, ``-inspecting``)
set on resize keep every part usable from 60×20 up. Everything another user or the relay controls
is drawn through :mod:`.safe`.
"""

from __future__ import annotations

import math

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Label, ListItem, ListView, Static

from shared.errors import E2EEError, EnvelopeTooLarge, ErrorCode

from . import audience
from .chatactions import ChatActions
from .chatdialogs import ChatDialogs
from .chatfiles import ChatFiles
from .chatpanes import ChatPanes
from .connection import StateLog, needs_password
from .core import (
    ChatClient,
    ConnectionState,
    ContactChanged,
    ConversationsChanged,
    GapDetected,
    KeyChangeBlocked,
    KeyChanged,
    LocalDataWarning,
    ReadUpTo,
    RecordChanged,
    RttMeasured,
    TransparencyAlert,
)
from .core.expiry import timer_words
from .core.record import Record
from .core.transport import tls_label
from .messagelog import MAX_ROWS, MessageLog
from .safe import one_line, plain, toast
from .widgets import Composer, title_and_badges

NARROW_COLS = 100
"""Below this width the sidebar gets narrower, and hides while the inspector is open."""
TINY_COLS = 70
GAP_GRACE_S = 2.0
"""A counter gap is shown if still open this long after it appeared (late arrivals fill most)."""


class ChatScreen(ChatActions, ChatDialogs, ChatFiles, ChatPanes, Screen):
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
        Binding("ctrl+f", "search", "Search", show=False, priority=True),
        Binding("f3", "settings", "Settings", priority=True),
        Binding("f4", "message_menu", "Message", priority=True),
        Binding("ctrl+t", "attach", "Attach", show=False, priority=True),
        Binding("ctrl+s", "save_file", "Save file", show=False, priority=True),
        Binding("ctrl+o", "open_file", "Open file", show=False, priority=True),
        Binding("slash", "search", "Search"),  # from the lists; the composer decides for itself
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
        self.inspected_lid: str | None = None  # the record it shows
        self._shown: dict[str, Text] = {}
        self._label_shown: dict[str, Text] = {}
        self.state_log = StateLog()
        self.drafts: dict[str, str] = {}
        """Unsent text per conversation id: kept when another conversation is opened, put back in
        the composer on return (text typed for one audience never goes to another)."""

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
                yield Static("", id="context")
                yield Composer(id="composer", placeholder="Type a message · Enter sends · Ctrl+J new line")
            with VerticalScroll(id="inspector"):
                yield Static(id="inspector-body")
        yield Static("", id="status")
        yield Footer()

    def on_resize(self, event) -> None:
        """Size classes (see chat.tcss): narrow windows give the inspector the sidebar's room."""
        width = event.size.width
        self.set_class(width < NARROW_COLS, "-narrow")
        self.set_class(width < TINY_COLS, "-tiny")

    def on_mount(self) -> None:
        self.query_one("#banner").display = False
        self.query_one("#context").display = False
        self.log_view.readers = self.client.receipts.readers
        self.log_view.audience = lambda r: len(set(self.client.members.get(r.conversation, [])) - {r.sender})
        self.query_one("#inspector").display = False
        self.query_one("#composer", Composer).focus()
        self.update_status()
        self.log_view.hint = "No conversation yet: Ctrl+N starts one (F1: help)"
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
        t.append(one_line(name), style="bold")
        # what matters most first: a narrow terminal cuts the end of the line, not the timer
        seconds = c.expiry.timers.get(self.conversation, 0)
        if seconds:
            t.append(f"  ·  ⏱ {timer_words(seconds)}", style="bold")
        if self.conversation in c.inactive:
            t.append("  ·  you are no longer a member", style="bold")
        named = {n.strip() for n in name.split(",")}
        if members and set(members) != named:  # a title made of the member names says it already
            t.append("  ·  " + one_line(", ".join(members)))
        t.append(f"  ·  end-to-end encrypted as {one_line(c.username)}", style="italic")
        return t

    # -- status bar --------------------------------------------------------------------------------
    def update_status(self, event: ConnectionState | None = None) -> None:
        c = self.client
        level = f"L{c.hello.level}" if c.hello else "L?"
        state = c.state
        dot = {"online": ("●", "green"), "connecting": ("◌", "yellow"), "refused": ("■", "red")}.get(
            state, ("○", "red")
        )
        t = Text()
        t.append(f"relay {one_line(c.server_url.split('://', 1)[-1])}", style="bold")
        t.append(f"  {tls_label(c.server_url)}", style="green" if c.server_url.startswith("https") else "yellow")
        t.append(f"  ·  {level}  ·  ")
        t.append(f"{dot[0]} {state}", style=dot[1])
        if event is not None and event.state != "online" and event.detail:
            t.append(f" ({one_line(event.detail)})", style="dim")
        if event is not None and event.retry_in is not None:
            t.append(f" retry in {event.retry_in:.1f} s", style="dim")
        t.append("  ·  RTT " + (f"{c.rtt_ms:.1f} ms" if c.rtt_ms is not None else "–"))
        n = len(c.outbox)
        t.append(f"  ·  outbox {n}", style="yellow" if n else "")
        self._update("#status", t)
        if event is not None:
            self._last_state_event = event

    # -- conversations -----------------------------------------------------------------------------
    def _conv_label(self, cid: str) -> tuple[Text, Text]:
        """(the title, the badges: unread count, ⚠, muted) of ``cid``'s line in the list."""
        c = self.client
        t = plain(c.titles.get(cid, cid), "strike dim" if cid in c.inactive else "", newlines=False)
        badges = Text()
        n = c.unread.get(cid, 0)
        if n and cid != self.conversation:
            badges.append(f"  {n}", style="bold reverse")
        if c.blocked_by(cid):
            badges.append(" ⚠", style="bold yellow")
        if cid in self.app.prefs.muted:
            badges.append(" (muted)", style="dim")
        return t, badges

    def rebuild_conversations(self) -> None:
        lv = self.query_one("#conversations", ListView)
        order = list(self.client.titles)
        if order != self._conv_order:
            self._conv_order = order
            parts = {cid: self._conv_label(cid) for cid in order}
            self._label_shown = {cid: Text.assemble(*parts[cid]) for cid in order}
            self._labels = {cid: Label(title_and_badges(*parts[cid])) for cid in order}
            lv.clear()
            lv.extend([ListItem(self._labels[cid], name=cid) for cid in order])
            if self.conversation in order:
                lv.index = order.index(self.conversation)
        else:
            self.refresh_conversation_labels()

    def refresh_conversation_labels(self) -> None:
        for cid, label in self._labels.items():
            parts = self._conv_label(cid)
            text = Text.assemble(*parts)
            if self._label_shown.get(cid) != text:
                self._label_shown[cid] = text
                label.update(title_and_badges(*parts))

    @on(ListView.Selected, "#conversations")
    def _picked(self, event: ListView.Selected) -> None:
        if event.item.name and event.item.name != self.conversation:
            self.open_conversation(event.item.name)
        self.query_one("#composer", Composer).focus()

    def open_conversation(self, cid: str, show: Record | None = None) -> None:
        """Show conversation ``cid`` (and select the message ``show``, e.g. a search result).

        The composer's unsent text stays with the conversation it was typed in (``drafts``)."""
        if cid != self.conversation:
            self.cancel_composing()  # a reply or an edit belongs to the conversation it was started in
            composer = self.query_one("#composer", Composer)
            if composer.text:
                self.drafts[self.conversation] = composer.text
            else:
                self.drafts.pop(self.conversation, None)
            composer.text = self.drafts.pop(cid, "")
            composer.move_cursor(composer.document.end)
        self.conversation = cid
        self.client.mark_read(cid)
        self._update("#title", self.title_text())
        self.log_view.hint = "No messages yet: type below, Enter sends (F1: help)"
        self.log_view.clear()
        self.update_banner()
        self.refresh_conversation_labels()
        if cid in self._conv_order:
            self.query_one("#conversations", ListView).index = self._conv_order.index(cid)
        self._load(cid, show)

    @work(exclusive=True, group="load-history")
    async def _load(self, cid: str, show: Record | None = None) -> None:
        records = await self.client.load_history(cid, limit=MAX_ROWS if show else 200)
        if show is not None and not any(r.lid == show.lid for r in records):  # older: the page that ends with it
            records = await self.client.load_history(cid, before=math.nextafter(show.pos, math.inf))
        shown = {r.mid for r in records}
        for ref in {r.content.ref for r in records if r.content.t == "reply"} - shown - {None}:
            if self.client.history is None:
                break
            quoted = [q for q in await self.client.history.by_mid(ref, cid) if q.is_message or q.state == "deleted"]
            if quoted:
                self.log_view.quotes[ref] = quoted[0]
        if cid != self.conversation:
            return
        self.log_view.set_records(records, {r.lid: self.client.mark(r) for r in records})
        theirs = [r for r in records if r.is_message and not r.mine]
        if theirs:
            self.client.receipts.seen(theirs[-1])
        self.gaps.pop(cid, None)
        self.refresh_gaps()
        if show is not None:
            self.log_view.select_lid(show.lid)
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
                if rec.mine and rec.state == "blocked" and rec.reason == ErrorCode.AUDIENCE_GREW:
                    audience.ask(self, rec)  # members joined since it was written: its author decides
                if ev.new and not rec.mine and rec.is_message:
                    self.app.notifier.message(
                        rec,
                        self.client.titles.get(rec.conversation, rec.conversation),
                        open_conversation=self.conversation,
                        focused=self.app.app_focus,
                    )
                if rec.conversation == self.conversation:
                    self.log_view.upsert(rec, self.client.mark(rec))
                    gaps_shown = gaps_shown or rec.sender in self.gaps.get(self.conversation, {})
                    if ev.new and not rec.mine and rec.is_message:
                        self.client.mark_read(self.conversation)
                        self.client.receipts.seen(rec)
                    sel = self.log_view.selected_record
                    # the record shown changed, or left the list (deleted, expired) and took the
                    # selection with it: the inspector follows (it kept an expired envelope, F14)
                    if rec.lid == self.inspected_lid or (sel.lid if sel else None) != self.inspected_lid:
                        self.refresh_inspector()
                else:
                    labels = True
                status = status or rec.mine
            elif isinstance(ev, ConnectionState):
                self.update_status(ev)
                self.app.connection = ev.state  # type: ignore[attr-defined]
                self.state_log.record(ev)
                if ev.state == "online":
                    self._reload_conversations()  # they may have changed while this client was away
                elif needs_password(self.client):
                    self.ask_password(ev.detail)
            elif isinstance(ev, RttMeasured):
                status = True
            elif isinstance(ev, ReadUpTo) and ev.conversation == self.conversation:
                self.log_view.redraw_mine()
                self.refresh_inspector()
            elif isinstance(ev, KeyChanged) and ev.rollback:
                toast(
                    self.app,
                    f"the relay served an older key of {ev.user}'s than one already seen: ignored, nothing changed",
                    title="key rollback refused",
                    severity="error",
                    timeout=15,
                )
            elif isinstance(ev, KeyChanged) and ev.followed:  # a signed rotation: its log line says so
                remark = labels = True
            elif isinstance(ev, KeyChanged):
                toast(
                    self.app,
                    f"{ev.user}'s key changed: review it with Ctrl+K before sending to them",
                    title="key change",
                    severity="warning",
                    timeout=10,
                )
                remark = labels = True
            elif isinstance(ev, LocalDataWarning):
                toast(self.app, ev.text, title="local data", severity="error", timeout=60)
            elif isinstance(ev, TransparencyAlert):
                toast(self.app, ev.text, title="key directory alert", severity="error", timeout=120)
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

    # -- sending -----------------------------------------------------------------------------------
    @on(Composer.Submitted)
    def _submitted(self, event: Composer.Submitted) -> None:
        text = event.text
        if not text.strip():
            return
        if not self.conversation:
            self._give_back("", text)
            toast(self.app, "no conversation yet: start one with Ctrl+N", severity="warning")
            return
        if self.attach_command(text):
            return
        blocked = self.client.blocked_by(self.conversation)
        if blocked:
            self.cancel_composing()
            self._give_back(self.conversation, text)
            self.update_banner()
            toast(
                self.app,
                f"not sent: {', '.join(blocked)}'s key changed. Review it with Ctrl+K.",
                severity="error",
                title="blocked",
            )
            return
        if not self.send_composed(text):
            self._send(self.conversation, text)

    def _give_back(self, cid: str, text: str) -> None:
        """Put text that was not sent back where it was written: the composer if conversation
        ``cid`` is still open, else that conversation's draft. Text typed since is kept after it."""
        if cid != self.conversation:
            self.drafts[cid] = f"{text}\n{self.drafts[cid]}" if self.drafts.get(cid) else text
            return
        composer = self.query_one("#composer", Composer)
        composer.text = f"{text}\n{composer.text}" if composer.text else text
        composer.move_cursor(composer.document.end)

    @work(group="send")
    async def _send(self, cid: str, text: str) -> None:
        try:
            await self.client.queue_text(cid, text)
        except (KeyChangeBlocked, EnvelopeTooLarge, E2EEError) as exc:
            self._give_back(cid, text)  # nothing was sent
            self.update_banner()
            toast(self.app, f"not sent: {exc.message}", severity="error", title=exc.code)
            return
        self.update_status(getattr(self, "_last_state_event", None))

    @on(MessageLog.Selected)
    def _selected(self, event: MessageLog.Selected) -> None:
        self.refresh_inspector()

    def on_key(self, event) -> None:
        self.app.notifier.touched()  # the user is here: the open conversation does not notify

    @on(Composer.SearchRequested)
    def _search_requested(self) -> None:
        self.action_search()

    @work(group="conversations", exclusive=True)
    async def _reload_conversations(self) -> None:
        try:
            await self.client.refresh_conversations()
        except E2EEError as exc:
            toast(self.app, f"could not load conversations: {exc.message}", severity="warning")

    @property
    def records(self) -> list[Record]:
        return self.log_view.records
