"""The user's settings for the app (``settings.json`` in the profile folder, mode 0600) and the
Settings dialog (F3): theme, notifications, message text in notifications, mute this
conversation. Nothing here is secret; no message text is stored."""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, field
from pathlib import Path

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Checkbox, Label, Select, Static

from .core.private import write_private
from .safe import one_line, plain

log = logging.getLogger("e2ee.tui")
THEMES = (
    "textual-dark",
    "textual-light",
    "ansi-dark",
    "ansi-light",
    "nord",
    "gruvbox",
    "catppuccin-latte",
    "solarized-light",
    "tokyo-night",
)
"""Built-in Textual themes offered (the ``ansi-*`` ones use the terminal's own palette)."""
NOTIFY_MODES = (
    ("off", "off"),
    ("terminal bell", "bell"),
    ("OSC 9 (terminal notification)", "osc9"),
    ("desktop (notify-send / macOS)", "desktop"),
)


@dataclass
class Prefs:
    """``theme``: a Textual theme name; ``notify``: off | bell | osc9 | desktop; ``show_text``:
    message text in notifications (off by default); ``muted``: conversation ids that never notify;
    ``read_receipts``: tell the other members what I read (end-to-end encrypted receipts; on by
    default, theirs are shown either way)."""

    theme: str = "textual-dark"
    notify: str = "bell"
    show_text: bool = False
    muted: list[str] = field(default_factory=list)
    read_receipts: bool = True

    @classmethod
    def load(cls, path: Path) -> Prefs:
        """The settings in ``path``; defaults for what is missing, unknown or damaged."""
        try:
            doc = json.loads(Path(path).read_text())
        except FileNotFoundError:
            return cls()
        except (OSError, ValueError):
            log.warning("settings file %s is unreadable: defaults used", path)
            return cls()
        p = cls()
        if isinstance(doc, dict):
            if doc.get("theme") in THEMES:
                p.theme = doc["theme"]
            if doc.get("notify") in {m for _, m in NOTIFY_MODES}:
                p.notify = doc["notify"]
            p.show_text = doc.get("show_text") is True
            p.read_receipts = doc.get("read_receipts") is not False
            p.muted = (
                [c for c in doc.get("muted", []) if isinstance(c, str)] if isinstance(doc.get("muted"), list) else []
            )
        return p

    def save(self, path: Path) -> None:
        write_private(Path(path), json.dumps(asdict(self), indent=1).encode())


TIMERS = (("off", 0), ("5 minutes", 300), ("1 hour", 3600), ("1 day", 86400), ("1 week", 604800))
"""Disappearing-message timers offered for a conversation (seconds; 0: off)."""


class SettingsScreen(ModalScreen[bool]):
    """Theme, notifications, read receipts; mute and the disappearing-message timer of the open
    conversation. Applied at once, saved on close; ``timer`` is the timer chosen (the chat
    screen sends it to the members when the dialog closes, if it changed)."""

    BINDINGS = [Binding("escape", "dismiss(True)", "Close", show=True)]

    def __init__(self, prefs: Prefs, conversation: str = "", title: str = "", timer: int = 0) -> None:
        super().__init__()
        self.prefs, self.conversation, self.conv_title = prefs, conversation, title
        self.timer = timer

    def compose(self) -> ComposeResult:
        p = self.prefs
        # scrolls when taller than the terminal (80x24 hid mute and Close below the edge)
        with VerticalScroll(classes="dialog", id="settings"):
            yield Static("Settings", classes="dialog-title")
            yield Label("theme")
            yield Select([(t, t) for t in THEMES], value=p.theme, allow_blank=False, id="theme")
            yield Label("notify about new messages")
            yield Select(NOTIFY_MODES, value=p.notify, allow_blank=False, id="notify")
            yield Checkbox("show the message text in notifications", p.show_text, id="show-text")
            yield Checkbox("send read receipts (end-to-end encrypted)", p.read_receipts, id="read-receipts")
            if self.conversation:
                yield Label("disappearing messages here (for every member)")
                offered = TIMERS if self.timer in {s for _, s in TIMERS} else (*TIMERS, (f"{self.timer} s", self.timer))
                yield Select(offered, value=self.timer, allow_blank=False, id="timer")
                yield Checkbox(
                    plain(f"mute {one_line(self.conv_title)[:40]}", newlines=False),
                    self.conversation in p.muted,
                    id="mute",
                )
            with Horizontal(classes="buttons"):
                yield Button("Close", variant="primary", id="close")

    @on(Select.Changed, "#theme")
    def _theme(self, event: Select.Changed) -> None:
        self.prefs.theme = str(event.value)
        self.app.theme = self.prefs.theme

    @on(Select.Changed, "#notify")
    def _notify(self, event: Select.Changed) -> None:
        self.prefs.notify = str(event.value)

    @on(Checkbox.Changed, "#show-text")
    def _show_text(self, event: Checkbox.Changed) -> None:
        self.prefs.show_text = event.value

    @on(Checkbox.Changed, "#read-receipts")
    def _read_receipts(self, event: Checkbox.Changed) -> None:
        self.prefs.read_receipts = event.value

    @on(Select.Changed, "#timer")
    def _timer(self, event: Select.Changed) -> None:
        self.timer = int(event.value)  # type: ignore[arg-type]

    @on(Checkbox.Changed, "#mute")
    def _mute(self, event: Checkbox.Changed) -> None:
        muted = [c for c in self.prefs.muted if c != self.conversation]
        self.prefs.muted = [*muted, self.conversation] if event.value else muted

    @on(Button.Pressed, "#close")
    def _close(self) -> None:
        self.dismiss(True)
