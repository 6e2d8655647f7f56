"""The app's side of the connection: what a refusal means for the user, logging in again with a
password typed in the app, and the client log's record of state changes (never text or keys).

The client core keeps the session alive (backoff, one fresh login after a refused token, never a
loop on a refused password). When it stops on a refused password, :class:`PasswordScreen` asks
for it again; Ctrl+R starts the session again in every state.
"""

from __future__ import annotations

import logging

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Static

from shared.errors import E2EEError

from .core import ChatClient, ClientError, ConnectionState
from .dialogwork import is_open
from .safe import one_line, plain
from .userwords import describe

log = logging.getLogger("e2ee.tui")


def downgraded(client: ChatClient) -> bool:
    """The relay runs below level 4: no password helps, this client will not talk to it."""
    return client.hello is not None and client.hello.level < 4


def needs_password(client: ChatClient) -> bool:
    """The session stopped because the relay refused the password or the session (not a downgrade)."""
    return client.state == "refused" and not downgraded(client)


class StateLog:
    """Writes one client-log line per connection state change and per refusal (the reason as the
    relay or the network gave it, made harmless; never message text, keys or secrets)."""

    def __init__(self) -> None:
        self.last = ""

    def record(self, event: ConnectionState) -> None:
        if event.state == self.last and event.state != "refused":
            return
        self.last = event.state
        level = logging.WARNING if event.state == "refused" else logging.INFO
        log.log(level, "connection %s%s", event.state, f": {one_line(event.detail)}" if event.detail else "")


async def log_in_again(client: ChatClient, password: str) -> None:
    """Log in with ``password`` and start the session again.

    Raises:
        ClientError: refused (``status`` 401/403: the password is wrong) or unreachable (the
            session was started again anyway and logs in when the relay answers).
    """
    try:
        await client.rest.login(password)
    except ClientError as exc:
        if exc.status not in (401, 403):
            client.reconnect_now()
        log.warning("login in the app: %s", exc.code)
        raise
    log.info("logged in again from the app")
    client.reconnect_now()


class PasswordScreen(ModalScreen[bool]):
    """ "The relay refused your password": type it again (or cancel and stay offline)."""

    BINDINGS = [Binding("escape", "dismiss(False)", "Cancel", show=True)]

    def __init__(self, client: ChatClient, reason: str = "") -> None:
        super().__init__()
        self.client, self.reason = client, reason

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(plain(f"The relay refused {self.client.username}'s login"), classes="dialog-title")
            yield Static(plain(self.reason or "the password was not accepted", "dim"))
            yield Input(placeholder="relay password", password=True, id="relogin-password")
            with Horizontal(classes="buttons"):
                yield Button("Log in", variant="primary", id="relogin")
                yield Button("Stay offline", id="cancel")
            yield Label("", id="error", classes="error")

    def on_mount(self) -> None:
        self.query_one("#relogin-password", Input).focus()

    @on(Button.Pressed, "#cancel")
    def _cancel(self) -> None:
        self.dismiss(False)

    @on(Input.Submitted)
    @on(Button.Pressed, "#relogin")
    def _submit(self) -> None:
        password = self.query_one("#relogin-password", Input).value
        if password:
            self._run(password)

    @work(exclusive=True)
    async def _run(self, password: str) -> None:
        self.query_one("#error", Label).update("logging in…")
        try:
            await log_in_again(self.client, password)
        except ClientError as exc:
            if not is_open(self):  # cancelled meanwhile ("Stay offline"): its widgets may be gone
                return
            if exc.status in (401, 403):
                self.query_one("#error", Label).update(plain(f"refused again: {describe(exc)}", "bold red"))
                self.query_one("#relogin-password", Input).value = ""
                return
            self.dismiss(True)  # unreachable: the session logs in with it when the relay answers
            return
        except E2EEError as exc:
            if is_open(self):
                self.query_one("#error", Label).update(plain(describe(exc), "bold red"))
            return
        if is_open(self):  # dismissing a closed dialog would close the screen below it
            self.dismiss(True)
