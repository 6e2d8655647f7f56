"""Screens of the chat app: login/register, new conversation, members, contact (fingerprints,
safety number, key changes) and help. Network and crypto run in workers; nothing here blocks."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Select, Static

from shared.errors import E2EEError, InvalidRequest
from shared.keys import fingerprint, safety_number
from shared.names import canonical_username

from .core import ChatClient, KeyNotShown
from .dialogwork import is_open, outlive
from .safe import one_line, plain, toast

if TYPE_CHECKING:
    from .app import ChatApp


def _entries(text: str) -> list[str]:
    """The entries of a names field, as typed: separated by commas, semicolons or spaces."""
    return [n for n in (n.strip() for n in text.replace(";", ",").replace(" ", ",").split(",")) if n]


def _names(text: str) -> list[str]:
    """Usernames typed in a field, canonical (``Bob`` is ``bob``); a name that is not valid stays
    as typed, for the client's typed error to name it."""
    out = []
    for n in _entries(text):
        try:
            out.append(canonical_username(n))
        except InvalidRequest:
            out.append(n)
    return out


def _bad_name(text: str) -> str:
    """The error about the first entry of a names field that is not a username, naming it (drawn
    as text, cut to 24 characters); "" when every entry is one."""
    for n in _entries(text):
        try:
            canonical_username(n)
        except InvalidRequest as exc:
            shown = one_line(n)
            shown = shown if len(shown) <= 24 else shown[:23] + "…"
            return f"'{shown}' is not a valid username: {exc.message.removeprefix('username: ')}"
    return ""


class NewConversationScreen(ModalScreen[str | None]):
    """Start a conversation: a title and one or more members (their keys are fetched first)."""

    BINDINGS = [Binding("escape", "dismiss(None)", "Cancel", show=True)]

    def __init__(self, client: ChatClient) -> None:
        super().__init__()
        self.client = client

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static("New conversation", classes="dialog-title")
            yield Input(placeholder="members: bob, carol", id="members")
            yield Input(placeholder="title (optional)", id="conv-title")
            with Horizontal(classes="buttons"):
                yield Button("Create", variant="primary", id="create")
                yield Button("Cancel", id="cancel")
            yield Label("", id="error", classes="error")

    def on_mount(self) -> None:
        self.query_one("#members", Input).focus()

    @on(Button.Pressed, "#cancel")
    def _cancel(self) -> None:
        self.dismiss(None)

    @on(Input.Submitted)
    @on(Button.Pressed, "#create")
    def _create(self) -> None:
        typed = self.query_one("#members", Input).value
        members = [m for m in _names(typed) if m != self.client.username]
        problem = _bad_name(typed) or ("" if members else "name at least one other user")
        if problem:  # named here, whole (it was cut at 64 columns and did not say which entry)
            self.query_one("#error", Label).update(plain(problem, newlines=False))
            return
        title = self.query_one("#conv-title", Input).value.strip() or ", ".join([self.client.username, *members])
        self._run(title, members)

    @work(exclusive=True)
    async def _run(self, title: str, members: list[str]) -> None:
        try:
            conv = await outlive(self, self.client.create_conversation(title, members), "new conversation")
        except E2EEError as exc:
            if is_open(self):
                self.query_one("#error", Label).update(plain(f"{exc.message} ({exc.code})", "red"))
            return
        if is_open(self):  # closed meanwhile: dismissing now would close the screen below it
            self.dismiss(conv)


class MembersScreen(ModalScreen[None]):
    """Add or remove members of the current conversation."""

    BINDINGS = [Binding("escape", "dismiss(None)", "Close", show=True)]

    def __init__(self, client: ChatClient, conversation: str) -> None:
        super().__init__()
        self.client, self.conversation = client, conversation

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(
                plain(f"Members of {one_line(self.client.titles.get(self.conversation, '?'))}"), classes="dialog-title"
            )
            yield Static(self._members(), id="member-list")
            yield Input(placeholder="add: dave, erin", id="add")
            yield Input(placeholder="remove: bob", id="remove")
            with Horizontal(classes="buttons"):
                yield Button("Apply", variant="primary", id="apply")
                yield Button("Close", id="close")
            yield Label("", id="error", classes="error")

    def _members(self) -> Text:
        return plain(", ".join(self.client.members.get(self.conversation, [])))

    def on_mount(self) -> None:
        self.query_one("#add", Input).focus()

    @on(Button.Pressed, "#close")
    def _close(self) -> None:
        self.dismiss(None)

    @on(Input.Submitted)
    @on(Button.Pressed, "#apply")
    def _apply(self) -> None:
        add, remove = (_names(self.query_one(f"#{i}", Input).value) for i in ("add", "remove"))
        if add or remove:
            self._run(add, remove)

    @work(exclusive=True)
    async def _run(self, add: list[str], remove: list[str]) -> None:
        try:
            await outlive(self, self.client.change_members(self.conversation, add=add, remove=remove), "members change")
        except E2EEError as exc:
            if is_open(self):
                self.query_one("#error", Label).update(plain(f"{exc.message} ({exc.code})", "red"))
            return
        if not is_open(self):  # closed meanwhile (its widgets may be gone): the chat screen shows the change
            return
        for i in ("add", "remove"):
            self.query_one(f"#{i}", Input).value = ""
        self.query_one("#member-list", Static).update(self._members())
        self.query_one("#error", Label).update(Text("done", style="green"))


def _fp(kid: str) -> str:
    groups = fingerprint(kid).split()
    return " ".join(groups[:8]) + "\n" + " ".join(groups[8:])


def _safety(digits: str) -> str:
    groups = digits.split()
    return "\n".join(" ".join(groups[i : i + 4]) for i in range(0, len(groups), 4))


class ContactScreen(ModalScreen[None]):
    """A contact's pinned key fingerprints, the pair's safety number, a pending key change (old and
    new fingerprints, with the relay's rotation evidence) and the decisions: accept, mark verified."""

    BINDINGS = [
        Binding("escape", "dismiss(None)", "Close", show=True),
        Binding("v", "verify", "Mark verified", show=True),
        Binding("a", "accept", "Accept new key", show=True),
        Binding("pageup", "scroll_body(-1)", "Scroll up", show=False),
        Binding("pagedown", "scroll_body(1)", "Scroll down", show=False),
    ]

    def __init__(self, client: ChatClient, user: str, users: list[str]) -> None:
        super().__init__()
        self.client, self.user, self.users = client, user, users

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog wide tall"):
            yield Select(
                [(plain(u, newlines=False), u) for u in self.users], value=self.user, allow_blank=False, id="who"
            )
            # not a focus stop of its own (Tab goes from the picker to the buttons); PageUp/PageDown scroll it
            with VerticalScroll(id="contact-scroll", can_focus=False):
                yield Static(id="contact-body")
            with Horizontal(classes="buttons"):
                yield Button("Accept new key", variant="warning", id="accept")
                yield Button("Mark verified", variant="success", id="verify")
                yield Button("Close", id="close")

    def on_mount(self) -> None:
        self.refresh_body()

    @on(Select.Changed, "#who")
    def _who(self, event: Select.Changed) -> None:
        self.user = str(event.value)
        self.refresh_body()

    def refresh_body(self) -> None:
        c = self.client.contacts.get(self.user)
        me = self.client.contacts.get(self.client.username)
        self.shown = self.client.shown_key(self.user)  # the keys whose number is on screen: what a decision names
        parts = []
        if c is None:
            parts.append(plain(f"{self.user}: no keys fetched yet", "dim"))
        else:
            head = plain(self.user, "bold", newlines=False)
            if self.user == self.client.username:
                head.append("  (you)", style="dim")
            elif c.verified:
                head.append("  ✔ verified", style="bold green")
            else:
                head.append("  · not verified: compare the safety number", style="yellow")
            parts.append(head)
            keys = Table.grid(padding=(0, 2))
            keys.add_column(style="dim")
            keys.add_column()
            keys.add_row(f"wrap key RSA-{c.identity.wrap_key.key_size}", _fp(c.identity.wrap_kid))
            keys.add_row("sign key Ed25519", _fp(c.identity.sign_kid))
            parts.append(keys)
            if self.user == self.client.username:  # the key schedule (client_tui.core.epochs), in words
                parts.append(Text("\n".join(self.client.epochs.words()), style="dim"))
            if c.note:
                parts.append(plain(f"⚠ {c.note}", "bold yellow"))
            if me is not None and self.user != self.client.username and c.pending is None:
                parts.append(plain(f"\nsafety number of {self.client.username} and {one_line(self.user)}", "bold"))
                parts.append(Text(_safety(safety_number(me.identity, c.identity)), style="bold cyan"))
                parts.append(
                    Text(
                        "Compare it with them in person or on a call: both screens show the same "
                        "digits. If they match, mark verified.",
                        style="dim",
                    )
                )
            if c.pending is not None:
                p = c.pending
                parts.append(
                    Text(
                        f"\n⚠ {one_line(self.user)}'s key changed — sending to them is blocked until you "
                        "accept or verify the new key",
                        style="bold yellow",
                    )
                )
                evidence = {
                    True: ("the relay's key history shows the new key signed by the old one", "green"),
                    False: ("NOT signed by the key you pinned: the relay may have substituted it", "bold red"),
                    None: ("the relay gave no rotation evidence", "yellow"),
                }[c.pending_signed_by_old]
                parts.append(Text(evidence[0], style=evidence[1]))
                change = Table.grid(padding=(0, 2))
                change.add_column(style="dim")
                change.add_column()
                change.add_row("old wrap key", _fp(c.identity.wrap_kid))
                change.add_row("new wrap key", _fp(p.wrap_kid))
                change.add_row("old sign key", _fp(c.identity.sign_kid))
                change.add_row("new sign key", _fp(p.sign_kid))
                parts.append(change)
                if me is not None:
                    parts.append(
                        plain(
                            f"\nnew safety number of {self.client.username} and {one_line(self.user)}: "
                            "compare THIS one",
                            "bold",
                        )
                    )
                    parts.append(Text(_safety(safety_number(me.identity, p)), style="bold cyan"))
                    parts.append(
                        Text(
                            "Mark verified pins exactly these new keys as verified, if they are still "
                            "the ones pending when you press it. Previous (pinned) number, for "
                            "reference only:",
                            style="dim",
                        )
                    )
                    parts.append(Text(_safety(safety_number(me.identity, c.identity)), style="dim"))
            if c.changes:
                hist = Text("\nkey changes seen\n", style="bold")
                for ch in c.changes:
                    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(ch["at"] / 1000))
                    hist.append(
                        f"{when}  {ch['old'][0][:8]}… → {ch['new'][0][:8]}…  "
                        f"{ch.get('decision') or 'waiting for your decision'}\n",
                        style="dim",
                    )
                parts.append(hist)
        self.body = Group(*parts)
        self.query_one("#contact-body", Static).update(self.body)
        pending = c is not None and c.pending is not None
        self.query_one("#accept", Button).display = pending
        self.query_one("#verify", Button).display = (
            c is not None and self.user != self.client.username and (pending or not c.verified)
        )

    def action_scroll_body(self, direction: int) -> None:
        scroll = self.query_one("#contact-scroll", VerticalScroll)
        (scroll.scroll_page_down if direction > 0 else scroll.scroll_page_up)(animate=False)

    @on(Button.Pressed, "#close")
    def _close(self) -> None:
        self.dismiss(None)

    @on(Button.Pressed, "#accept")
    def action_accept(self) -> None:
        c = self.client.contacts.get(self.user)
        if c is not None and c.pending is not None and self.shown is not None:
            self._decide(self.client.accept_key, f"{self.user}'s new key accepted (not verified)", "warning")

    @on(Button.Pressed, "#verify")
    def action_verify(self) -> None:
        if self.user in self.client.contacts and self.user != self.client.username and self.shown is not None:
            self._decide(self.client.verify_contact, f"{self.user} marked verified", "information")

    def _decide(self, decide, done: str, severity: str) -> None:
        """Apply a decision to exactly the keys that were on screen; if they changed meanwhile,
        nothing is decided and the dialog shows the keys now pending."""
        try:
            decide(self.user, shown=self.shown.kids)
        except KeyNotShown as exc:
            toast(self.app, exc.message, title="nothing decided", severity="error", timeout=15)
        else:
            toast(self.app, done, severity=severity)
        self.refresh_body()


class HelpScreen(ModalScreen[None]):
    """Every key binding of the chat window."""

    BINDINGS = [Binding("escape,f1,q", "dismiss(None)", "Close", show=True)]

    def compose(self) -> ComposeResult:
        app: ChatApp = self.app  # type: ignore[assignment]
        table = Table(title="Keys", title_justify="left", box=None, padding=(0, 2))
        table.add_column("key", style="bold cyan")
        table.add_column("does")
        for keys, text in app.help_rows():
            table.add_row(Text(keys), Text(text))
        notes = Text(
            "\nMarks: ✔ verified sender · · not verified yet · ⚠ key changed / not accepted · ✖ could not verify\n"
            "States of your messages: … sending · ✓ stored by the relay · ✓✓ delivered to every member · "
            "✓✓ read (their read receipts)\n"
            "↪ a reply's quote · (edited) earlier versions in the inspector · 👍 2 reactions · ⏱ disappears\n"
            "The inspector shows the envelope the relay stored (ciphertext only) and what sealing or "
            "opening it cost on this machine.",
            style="dim",
        )
        with Vertical(classes="dialog wide"):
            yield Static("Help", classes="dialog-title")
            with VerticalScroll():
                yield Static(Group(table, notes))
            yield Button("Close", id="close")

    @on(Button.Pressed, "#close")
    def _close(self) -> None:
        self.dismiss(None)
