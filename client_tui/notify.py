"""Notifications for messages that arrive while you look elsewhere (another tmux window, an SSH
session in the background, another conversation).

Modes (setting ``notify``): ``off``; ``bell`` (the terminal bell: tmux marks the window, most
terminals flash or sound); ``osc9`` (an OSC 9 desktop notification, which iTerm2, kitty,
WezTerm, Windows Terminal and others show; passed through tmux when ``allow-passthrough`` is on);
``desktop`` (``notify-send`` on Linux, ``osascript`` on macOS). By default a notification names
the sender and the conversation only: the message text is shown only with ``show_text`` on,
because notifications end up on lock screens, in notification centres and in terminal
scrollback. Muted conversations never notify. Everything in a notification goes through
:func:`.safe.one_line` (an escape sequence in a name cannot end the OSC string early).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable

from .core.record import Record
from .prefs import Prefs
from .safe import one_line

MODES = ("off", "bell", "osc9", "desktop")
IDLE_S = 60.0
"""With no key pressed for this long, the open conversation notifies too (the user is away)."""
MAX_CHARS = 120


def osc9(text: str, *, tmux: bool) -> str:
    """The OSC 9 sequence for ``text`` (made one harmless line), wrapped for tmux passthrough."""
    seq = f"\x1b]9;{one_line(text)[:MAX_CHARS]}\x07"
    if tmux:  # DCS tmux; <seq with every ESC doubled> ST
        seq = "\x1bPtmux;" + seq.replace("\x1b", "\x1b\x1b") + "\x1b\\"
    return seq


def desktop_command(title: str, body: str) -> list[str] | None:
    """The argv that shows a desktop notification here, or None (no notifier installed)."""
    title, body = one_line(title)[:MAX_CHARS], one_line(body)[:MAX_CHARS]
    if sys.platform == "darwin" and shutil.which("osascript"):
        quoted = [s.replace("\\", "\\\\").replace('"', '\\"') for s in (body, title)]
        return ["osascript", "-e", f'display notification "{quoted[0]}" with title "{quoted[1]}"']
    tool = shutil.which("notify-send")
    return [tool, "--app-name=e2ee-chat", title, body] if tool else None


class Notifier:
    """Decides whether a new message notifies, and how (see the module docstring).

    Args:
        prefs: the user's settings (mode, show_text, muted conversations).
        write: writes a string to the terminal (the app's driver).
        run: starts a desktop notifier from its argv (by default a child process, never through a
            shell, reaped by a task of the running loop: :attr:`tasks`).
    """

    def __init__(self, prefs: Prefs, write: Callable[[str], None], run: Callable | None = None) -> None:
        self.prefs = prefs
        self.write = write
        self.run = run or self._spawn
        self.last_input = time.monotonic()
        self.sent = 0
        self.tasks: set[asyncio.Task] = set()

    def _spawn(self, argv: list[str]) -> None:
        task = asyncio.get_running_loop().create_task(_run_notifier(argv))
        task.add_done_callback(_retrieve)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def touched(self) -> None:
        """The user pressed a key or clicked: they are here."""
        self.last_input = time.monotonic()

    def wanted(self, record: Record, *, open_conversation: str, focused: bool) -> bool:
        if self.prefs.notify == "off" or record.mine or record.conversation in self.prefs.muted:
            return False
        away = not focused or time.monotonic() - self.last_input > IDLE_S
        return away or record.conversation != open_conversation

    def words(self, record: Record, title: str) -> tuple[str, str]:
        """(headline, body) of the notification; the text only with ``show_text``."""
        head = f"{record.sender} in {title}"
        if self.prefs.show_text and record.text is not None:
            return head, record.text
        return head, "new message (open e2ee-chat to read it)"

    def message(self, record: Record, title: str, *, open_conversation: str, focused: bool) -> bool:
        """Notify about ``record`` if wanted; True if something was sent."""
        if not self.wanted(record, open_conversation=open_conversation, focused=focused):
            return False
        mode = self.prefs.notify
        head, body = self.words(record, title)
        if mode == "bell":
            self.write("\x07")
        elif mode == "osc9":
            self.write(osc9(f"{head}: {body}", tmux=bool(os.environ.get("TMUX"))))
        elif mode == "desktop":
            argv = desktop_command(f"e2ee-chat: {head}", body)
            if argv is None:
                self.write("\x07")  # no desktop notifier here: the bell at least
            else:
                try:
                    self.run(argv)
                except OSError:
                    self.write("\x07")
        self.sent += 1
        return True


async def _run_notifier(argv: list[str]) -> None:
    proc = await asyncio.create_subprocess_exec(
        *argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        await asyncio.wait_for(proc.wait(), 10)
    finally:  # a notifier that hangs, or the app closing: it is not left behind
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()


def _retrieve(task: asyncio.Task) -> None:
    if not task.cancelled():
        task.exception()  # a notifier that failed or hung changes nothing for the chat
