"""The Textual app: one conversation's message log, a composer, the conversation name and the
connection status. Network and crypto run in workers and threads, never on the UI loop."""

from __future__ import annotations

import time
import unicodedata

from rich.text import Text
from textual.app import App, ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Input, Static

from shared.errors import E2EEError

from .core import (
    ChatClient,
    ConnectionState,
    Delivered,
    MessageReceived,
    MessageUnreadable,
)


def harmless(text: str) -> str:
    """``text`` with control characters (ANSI escapes included) shown as visible symbols.

    Newlines and tabs are kept; C0/C1 controls become U+2400-style pictures or ``\\xNN``.
    """
    out = []
    for ch in text:
        if ch in "\n\t":
            out.append(ch)
        elif unicodedata.category(ch) == "Cc":
            code = ord(ch)
            out.append(chr(0x2400 + code) if code < 0x20 else "\u2421" if code == 0x7F else f"\\x{code:02x}")
        else:
            out.append(ch)
    return "".join(out)


class MessageItem(Static):
    """One line of the log: time, sender and text (or a "could not verify" placeholder)."""

    def __init__(self, sender: str, text: str, *, when_ms: int | None = None, mine: bool = False,
                 unreadable: bool = False, seq: int | None = None, mid: str | None = None) -> None:
        self.sender = sender
        self.text = text
        self.seq = seq
        self.mid = mid
        self.state = "sending" if mine and seq is None else "stored"
        stamp = time.strftime("%H:%M", time.localtime((when_ms or time.time() * 1000) / 1000))
        line = Text()
        line.append(f"{stamp} ", style="dim")
        line.append(f"{sender}: ", style="bold")
        line.append(harmless(text), style="italic" if unreadable else "")
        classes = "message" + (" mine" if mine else "") + (" unreadable" if unreadable else "")
        super().__init__(line, classes=classes)


class ChatApp(App):
    """A terminal chat window for one conversation.

    Args:
        client: a :class:`ChatClient`, logged in unless ``startup`` logs it in.
        conversation: the conversation id to show (or the result of ``startup``).
        startup: optional ``async (client) -> conversation id`` run first in the session worker
            (log in or register, pick or create the conversation).
    """

    CSS_PATH = "chat.tcss"
    TITLE = "e2ee-chat"
    BINDINGS = [("ctrl+q", "quit", "Quit")]

    def __init__(self, client: ChatClient, conversation: str = "", startup=None) -> None:
        super().__init__()
        self.client = client
        self.conversation = conversation
        self.startup = startup
        self.connection = "offline"

    def compose(self) -> ComposeResult:
        yield Static(self._title_text(), id="title")
        yield VerticalScroll(id="log")
        yield Input(placeholder="Type a message, Enter sends", id="composer")
        yield Static("connecting…", id="status")

    def _title_text(self) -> str:
        members = self.client.members.get(self.conversation, [])
        name = self.client.titles.get(self.conversation, self.conversation)
        return f"{name}  ·  {', '.join(members)}  ·  end-to-end encrypted as {self.client.username}"

    def on_mount(self) -> None:
        self.query_one("#composer", Input).focus()
        self.run_worker(self._session(), name="session", exclusive=True)

    async def _session(self) -> None:
        try:
            if self.startup is not None:
                self._set_status("logging in…")
                self.conversation = await self.startup(self.client)
            await self.client.refresh_conversations()
            self.query_one("#title", Static).update(self._title_text())
            await self.client.connect()
        except E2EEError as exc:
            self._set_status(f"offline: {exc.message}")
            return
        while True:
            event = await self.client.events.get()
            self._on_event(event)

    def _set_status(self, text: str) -> None:
        self.query_one("#status", Static).update(f"{self.client.server_url}  ·  {text}")

    def _on_event(self, event) -> None:
        log = self.query_one("#log", VerticalScroll)
        if isinstance(event, ConnectionState):
            self.connection = event.state
            level = f"L{self.client.hello.level}" if self.client.hello else "L?"
            self._set_status(f"{level}  ·  {event.state} {event.detail}".rstrip())
        elif isinstance(event, MessageReceived) and event.conversation == self.conversation:
            log.mount(MessageItem(event.sender, event.text, when_ms=event.sent_at_ms, seq=event.seq,
                                  mid=event.mid, mine=event.sender == self.client.username))
            log.scroll_end(animate=False)
        elif isinstance(event, MessageUnreadable) and event.conversation == self.conversation:
            log.mount(MessageItem(event.sender, f"could not verify this message ({event.reason})",
                                  unreadable=True, seq=event.seq))
            log.scroll_end(animate=False)
        elif isinstance(event, Delivered):
            for item in self.query(MessageItem):
                if item.seq == event.seq:
                    item.state = "delivered"

    async def on_input_submitted(self, message: Input.Submitted) -> None:
        text = message.value
        if not text.strip():
            return
        message.input.clear()
        self.run_worker(self._send(text), group="send")

    async def _send(self, text: str) -> None:
        log = self.query_one("#log", VerticalScroll)
        item = MessageItem(self.client.username, text, mine=True)
        await log.mount(item)
        log.scroll_end(animate=False)
        try:
            sent = await self.client.send_text(self.conversation, text)
        except E2EEError as exc:
            item.add_class("unreadable")
            self.notify(f"not sent: {exc.message}", severity="error")
            return
        item.mid, item.seq, item.state = sent.mid, sent.seq, "stored"

    async def on_unmount(self) -> None:
        await self.client.close()
