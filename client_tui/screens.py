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
from textual.screen import ModalScreen, Screen
from textual.widgets import Button, Checkbox, Input, Label, LoadingIndicator, Select, Static

from shared.errors import E2EEError, InvalidRequest
from shared.keys import fingerprint, safety_number
from shared.names import canonical_username

from .core import ChatClient
from .widgets import harmless

if TYPE_CHECKING:
    from .app import ChatApp


def _names(text: str) -> list[str]:
    """Usernames typed in a field, canonical (``Bob`` is ``bob``); a name that is not valid stays
    as typed, for the client's typed error to name it."""
    out = []
    for n in (n.strip() for n in text.replace(";", ",").replace(" ", ",").split(",")):
        if n:
            try:
                out.append(canonical_username(n))
            except InvalidRequest:
                out.append(n)
    return out


class LoginScreen(Screen[ChatClient]):
    """Log in (open the keystore, get a token) or create an account (keys made on this machine)."""

    BINDINGS = [Binding("escape", "app.quit", "Quit", show=True)]

    def __init__(self, server: str, username: str = "", *, profile_root=None, kdf: dict | None = None,
                 bits: int = 3072, error: str = "") -> None:
        super().__init__()
        self.server, self.username, self.profile_root, self.kdf, self.bits = server, username, profile_root, kdf, bits
        self.first_error = error

    def compose(self) -> ComposeResult:
        with Vertical(id="login-box"):
            yield Static("e2ee-chat", id="login-title")
            yield Static("Keys are made and kept on this machine; the relay only ever sees ciphertext.",
                         classes="hint")
            yield Input(self.server, placeholder="relay URL", id="server")
            yield Input(self.username, placeholder="username", id="username")
            yield Input(placeholder="relay password", password=True, id="password")
            yield Input(placeholder="keystore passphrase (unlocks your private keys)", password=True,
                        id="passphrase")
            with Horizontal(id="login-options"):
                yield Checkbox("new account", id="register")
                yield Select([("RSA-2048", 2048), ("RSA-3072", 3072), ("RSA-4096", 4096)], value=self.bits,
                             allow_blank=False, id="bits")
            with Horizontal(id="login-buttons"):
                yield Button("Log in", variant="primary", id="go")
            yield LoadingIndicator(id="login-busy")
            yield Label("", id="login-error")

    def on_mount(self) -> None:
        self.query_one("#login-busy").display = False
        self.query_one("#username" if not self.username else "#password", Input).focus()
        if self.first_error:
            self._error(self.first_error)

    @on(Checkbox.Changed, "#register")
    def _mode(self, event: Checkbox.Changed) -> None:
        self.query_one("#go", Button).label = "Create account" if event.value else "Log in"

    @on(Input.Submitted)
    @on(Button.Pressed, "#go")
    def _submit(self) -> None:
        values = {i.id: i.value for i in self.query(Input)}
        if not values["username"] or not values["password"] or not values["passphrase"]:
            self._error("username, password and passphrase are all needed")
            return
        self._run(values["server"].strip(), values["username"].strip(), values["password"], values["passphrase"],
                  self.query_one("#register", Checkbox).value, int(self.query_one("#bits", Select).value))

    def _error(self, text: str) -> None:
        self.query_one("#login-error", Label).update(Text(harmless(text), style="bold red"))

    @work(exclusive=True, group="login")
    async def _run(self, server: str, username: str, password: str, passphrase: str, register: bool,
                   bits: int) -> None:
        busy = self.query_one("#login-busy")
        busy.display = True
        self.query_one("#go", Button).disabled = True
        self._error("")
        client = None
        try:
            client = ChatClient(server, username, self.profile_root, kdf=self.kdf)  # canonical name, or refused
            if register:
                self.query_one("#login-error", Label).update(f"generating an RSA-{bits} key in a thread…")
                await client.register(password, passphrase, bits=bits)
            else:
                await client.login(password, passphrase)
        except E2EEError as exc:
            if client is not None:
                await client.close()
            self._error(f"{exc.message} ({exc.code})")
            return
        finally:
            busy.display = False
            self.query_one("#go", Button).disabled = False
        self.dismiss(client)


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
            yield Input(placeholder="title (optional)", id="title")
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
        members = [m for m in _names(self.query_one("#members", Input).value) if m != self.client.username]
        if not members:
            self.query_one("#error", Label).update("name at least one other user")
            return
        title = self.query_one("#title", Input).value.strip() or ", ".join([self.client.username, *members])
        self._run(title, members)

    @work(exclusive=True)
    async def _run(self, title: str, members: list[str]) -> None:
        try:
            conv = await self.client.create_conversation(title, members)
        except E2EEError as exc:
            self.query_one("#error", Label).update(Text(harmless(f"{exc.message} ({exc.code})"), style="red"))
            return
        self.dismiss(conv)


class MembersScreen(ModalScreen[None]):
    """Add or remove members of the current conversation."""

    BINDINGS = [Binding("escape", "dismiss(None)", "Close", show=True)]

    def __init__(self, client: ChatClient, conversation: str) -> None:
        super().__init__()
        self.client, self.conversation = client, conversation

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(f"Members of {harmless(self.client.titles.get(self.conversation, '?'))}",
                         classes="dialog-title")
            yield Static(self._members(), id="member-list")
            yield Input(placeholder="add: dave, erin", id="add")
            yield Input(placeholder="remove: bob", id="remove")
            with Horizontal(classes="buttons"):
                yield Button("Apply", variant="primary", id="apply")
                yield Button("Close", id="close")
            yield Label("", id="error", classes="error")

    def _members(self) -> Text:
        return Text(harmless(", ".join(self.client.members.get(self.conversation, []))))

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
            await self.client.change_members(self.conversation, add=add, remove=remove)
        except E2EEError as exc:
            self.query_one("#error", Label).update(Text(harmless(f"{exc.message} ({exc.code})"), style="red"))
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
    return "\n".join(" ".join(groups[i:i + 4]) for i in range(0, len(groups), 4))


class ContactScreen(ModalScreen[None]):
    """A contact's pinned key fingerprints, the pair's safety number, a pending key change (old and
    new fingerprints, with the relay's rotation evidence) and the decisions: accept, mark verified."""

    BINDINGS = [
        Binding("escape", "dismiss(None)", "Close", show=True),
        Binding("v", "verify", "Mark verified", show=True),
        Binding("a", "accept", "Accept new key", show=True),
    ]

    def __init__(self, client: ChatClient, user: str, users: list[str]) -> None:
        super().__init__()
        self.client, self.user, self.users = client, user, users

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog wide"):
            yield Select([(harmless(u), u) for u in self.users], value=self.user, allow_blank=False, id="who")
            with VerticalScroll(id="contact-scroll"):
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
        parts = []
        if c is None:
            parts.append(Text(f"{self.user}: no keys fetched yet", style="dim"))
        else:
            head = Text(harmless(self.user), style="bold")
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
            if me is not None and self.user != self.client.username:
                parts.append(Text(f"\nsafety number of {self.client.username} and {self.user}", style="bold"))
                parts.append(Text(_safety(safety_number(me.identity, c.identity)), style="bold cyan"))
                parts.append(Text("Compare it with them in person or on a call: both screens show the same "
                                  "digits. If they match, mark verified.", style="dim"))
            if c.pending is not None:
                p = c.pending
                parts.append(Text(f"\n⚠ {self.user}'s key changed — sending to them is blocked until you "
                                  "accept or verify the new key", style="bold yellow"))
                evidence = {True: ("the relay's key history shows the new key signed by the old one", "green"),
                            False: ("NOT signed by the key you pinned: the relay may have substituted it", "bold red"),
                            None: ("the relay gave no rotation evidence", "yellow")}[c.pending_signed_by_old]
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
                    parts.append(Text("new safety number", style="bold"))
                    parts.append(Text(_safety(safety_number(me.identity, p)), style="cyan"))
            if c.changes:
                hist = Text("\nkey changes seen\n", style="bold")
                for ch in c.changes:
                    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(ch["at"] / 1000))
                    hist.append(f"{when}  {ch['old'][0][:8]}… → {ch['new'][0][:8]}…  "
                                f"{ch.get('decision') or 'waiting for your decision'}\n", style="dim")
                parts.append(hist)
        self.body = Group(*parts)
        self.query_one("#contact-body", Static).update(self.body)
        pending = c is not None and c.pending is not None
        self.query_one("#accept", Button).display = pending
        self.query_one("#verify", Button).display = c is not None and self.user != self.client.username and (
            pending or not c.verified)

    @on(Button.Pressed, "#close")
    def _close(self) -> None:
        self.dismiss(None)

    @on(Button.Pressed, "#accept")
    def action_accept(self) -> None:
        c = self.client.contacts.get(self.user)
        if c is not None and c.pending is not None:
            self.client.accept_key(self.user)
            self.app.notify(f"{self.user}'s new key accepted (not verified)", severity="warning")
            self.refresh_body()

    @on(Button.Pressed, "#verify")
    def action_verify(self) -> None:
        if self.user in self.client.contacts and self.user != self.client.username:
            self.client.verify_contact(self.user)
            self.app.notify(f"{self.user} marked verified")
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
            table.add_row(keys, text)
        notes = Text(
            "\nMarks: ✔ verified sender · · not verified yet · ⚠ key changed / not accepted · ✖ could not verify\n"
            "States of your messages: … sending · ✓ stored by the relay · ✓✓ delivered to every member\n"
            "The inspector shows the envelope the relay stored (ciphertext only) and what sealing or "
            "opening it cost on this machine.", style="dim")
        with Vertical(classes="dialog wide"):
            yield Static("Help", classes="dialog-title")
            with VerticalScroll():
                yield Static(Group(table, notes))
            yield Button("Close", id="close")

    @on(Button.Pressed, "#close")
    def _close(self) -> None:
        self.dismiss(None)
