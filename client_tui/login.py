"""The first screen: log in (open the keystore, get a session) or create an account (keys made
on this machine, both secrets typed twice). Laid out to fit 80×24 with every field visible."""

from __future__ import annotations

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import Button, Checkbox, Input, Label, LoadingIndicator, Select, Static

from shared.errors import E2EEError

from . import credentials
from .core import ChatClient
from .safe import plain
from .userwords import describe

REGISTER_ONLY = ("#row-password2", "#row-passphrase2", "#strength", "#bits")


class LoginScreen(Screen[ChatClient]):
    """Log in, or create an account (check "new account"): relay URL, username, relay password,
    keystore passphrase; for a new account both secrets twice, with a strength hint."""

    BINDINGS = [Binding("escape", "app.quit", "Quit", show=True)]

    def __init__(
        self,
        server: str,
        username: str = "",
        *,
        profile_root=None,
        kdf: dict | None = None,
        bits: int = 3072,
        error: str = "",
        cafile: str | None = None,
        key_lifetime_days: float = 7.0,
    ) -> None:
        super().__init__()
        self.server, self.username, self.profile_root, self.kdf, self.bits = server, username, profile_root, kdf, bits
        self.first_error, self.cafile, self.key_lifetime_days = error, cafile, key_lifetime_days

    @staticmethod
    def _row(label: str, field: Input, row_id: str) -> Horizontal:
        return Horizontal(Label(label, classes="field-label"), field, id=row_id, classes="field-row")

    def compose(self) -> ComposeResult:
        with Vertical(id="login-box"):
            yield Static("e2ee-chat", id="login-title")
            yield Static("Keys are made and kept on this machine; the relay only ever sees ciphertext.", classes="hint")
            yield self._row("relay", Input(self.server, placeholder="http://127.0.0.1:8765", id="server"), "row-server")
            yield self._row("username", Input(self.username, placeholder="username", id="username"), "row-username")
            yield self._row(
                "password", Input(placeholder="relay password", password=True, id="password"), "row-password"
            )
            yield self._row(
                "again", Input(placeholder="relay password again", password=True, id="password2"), "row-password2"
            )
            yield self._row(
                "passphrase",
                Input(placeholder="unlocks your keys on this machine", password=True, id="passphrase"),
                "row-passphrase",
            )
            yield self._row(
                "again", Input(placeholder="passphrase again", password=True, id="passphrase2"), "row-passphrase2"
            )
            yield Label("", id="strength")
            with Horizontal(id="login-options"):
                yield Checkbox("new account", id="register")
                yield Select(
                    [("RSA-2048", 2048), ("RSA-3072", 3072), ("RSA-4096", 4096)],
                    value=self.bits,
                    allow_blank=False,
                    id="bits",
                    compact=True,
                )
                yield Button("Log in", variant="primary", id="go", compact=True)
            yield LoadingIndicator(id="login-busy")
            yield Label("", id="login-error")

    def on_mount(self) -> None:
        self.query_one("#login-busy").display = False
        self._show_register(False)
        self.query_one("#username" if not self.username else "#password", Input).focus()
        if self.first_error:
            self._error(self.first_error)

    def _show_register(self, on: bool) -> None:
        for sel in REGISTER_ONLY:
            self.query_one(sel).display = on
        self.query_one("#go", Button).label = "Create account" if on else "Log in"

    @on(Checkbox.Changed, "#register")
    def _mode(self, event: Checkbox.Changed) -> None:
        self._show_register(event.value)
        self._strength()

    @on(Input.Changed, "#passphrase")
    def _strength(self) -> None:
        value = self.query_one("#passphrase", Input).value
        if not self.query_one("#register", Checkbox).value or not value:
            self.query_one("#strength", Label).update("")
            return
        s = credentials.strength(value, context=(self.query_one("#username", Input).value,))
        style = "red" if s.score < 2 else "yellow" if s.score < 3 else "green"
        self.query_one("#strength", Label).update(plain(f"passphrase {s}", style))

    @on(Input.Submitted)
    @on(Button.Pressed, "#go")
    def _submit(self) -> None:
        values = {i.id: i.value for i in self.query(Input)}
        register = self.query_one("#register", Checkbox).value
        if not values["username"].strip() or not values["password"] or not values["passphrase"]:
            self._error("username, password and passphrase are all needed")
            return
        if register:
            for kind, again in (("password", "password2"), ("passphrase", "passphrase2")):
                problem = credentials.check_new(kind, values[kind], values[again])
                if problem:
                    self._error(problem)
                    self.query_one(f"#{again if 'differ' in problem else kind}", Input).focus()
                    return
        self._run(
            values["server"].strip(),
            values["username"].strip(),
            values["password"],
            values["passphrase"],
            register,
            int(self.query_one("#bits", Select).value),
        )

    def _error(self, text: str) -> None:
        self.query_one("#login-error", Label).update(plain(text, "bold red"))

    @work(exclusive=True, group="login")
    async def _run(self, server: str, username: str, password: str, passphrase: str, register: bool, bits: int) -> None:
        busy = self.query_one("#login-busy")
        busy.display = True
        self.query_one("#go", Button).disabled = True
        self._error("")
        client = None
        try:
            # canonical name and a relay address, or refused
            client = ChatClient(
                server,
                username,
                self.profile_root,
                kdf=self.kdf,
                cafile=self.cafile,
                key_lifetime_days=self.key_lifetime_days,
            )
            if register:
                self.query_one("#login-error", Label).update(f"generating an RSA-{bits} key in a thread…")
                await client.register(password, passphrase, bits=bits)
            else:
                await client.login(password, passphrase)
        except E2EEError as exc:
            if client is not None:
                await client.close()
            self._error(describe(exc))
            return
        finally:
            busy.display = False
            self.query_one("#go", Button).disabled = False
        self.dismiss(client)
