"""Files in the chat window (issue 16): ``/attach PATH [caption]`` in the composer (or Ctrl+T,
which starts that line) sends a file as an attachment message; on an attachment message, Ctrl+S
saves it (verified, 0600, into a folder the user chooses, never over an existing file) and Ctrl+O
opens it with the desktop opener on a 0600 temporary file that is removed when the opener exits
(or when the app does). Each transfer shows a progress bar above the composer.

A mixin of :class:`~client_tui.chatscreen.ChatScreen`. The work runs in the client core
(``client.attachments``); a refusal (no such file, a folder, over the relay's size limit or the
quota, a blob that does not verify) is a one-line toast. File names and types come from other
users: they are drawn through :mod:`.safe` and pass :func:`safe_name` before they name a file.

Settings (environment): ``E2EE_DOWNLOADS`` the default folder of Ctrl+S (else ``~/Downloads``);
``E2EE_OPENER`` the command that opens a file (else ``xdg-open`` or ``open``, found on PATH).
"""

from __future__ import annotations

import asyncio
import os
import shlex
import shutil
import tempfile
import unicodedata
from pathlib import Path
from typing import Any

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label, ProgressBar, Static

from shared.errors import E2EEError

from .core.record import Record
from .safe import one_line, plain, toast
from .widgets import Composer

__all__ = [
    "ATTACH",
    "ChatFiles",
    "SaveDialog",
    "Transfer",
    "downloads_folder",
    "opener",
    "parse_attach",
    "reserve",
    "safe_name",
]

ATTACH = "/attach"
MAX_NAME = 120
"""Longest file name written (characters; the suffix is kept)."""
_NAME_OK = frozenset(" ._-+,@()[]{}#%=~")


def safe_name(name: object) -> str:
    """``name`` (another user's) as one harmless file name: no folder separator, no control or
    format character, no leading dot (never ``.``/``..`` nor hidden), at most :data:`MAX_NAME`
    characters with its suffix kept; ``"file"`` if nothing is left."""
    text = unicodedata.normalize("NFC", str(name))
    out = "".join(
        ch if (ch.isalnum() or ch in _NAME_OK) and unicodedata.category(ch)[0] not in "CZ" or ch == " " else "_"
        for ch in text
    )
    out = out.strip(" .")
    if len(out) > MAX_NAME:
        stem, dot, suffix = out.rpartition(".")
        keep = f".{suffix}" if dot and 0 < len(suffix) <= 16 else ""
        out = (stem if keep else out)[: MAX_NAME - len(keep)].rstrip(" .") + keep
    return out or "file"


def downloads_folder() -> Path:
    """Where Ctrl+S proposes to save: ``$E2EE_DOWNLOADS``, else ``~/Downloads``."""
    return Path(os.environ.get("E2EE_DOWNLOADS") or Path.home() / "Downloads").expanduser()


def opener() -> list[str] | None:
    """The command that opens a file (the path is appended): ``$E2EE_OPENER`` (split like a
    shell would), else ``xdg-open`` or ``open`` found on PATH; ``None`` if there is none."""
    configured = os.environ.get("E2EE_OPENER", "").strip()
    if configured:
        return shlex.split(configured)
    for name in ("xdg-open", "open"):
        found = shutil.which(name)
        if found:
            return [found]
    return None


def reserve(folder: Path, name: str) -> Path:
    """A new empty 0600 file for ``name`` in ``folder`` (``name (1).ext`` ... if taken): created
    exclusively, so an existing file is never replaced. Raises OSError."""
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    base = Path(name)
    for n in range(1000):
        candidate = folder / (name if n == 0 else f"{base.stem} ({n}){base.suffix}")
        try:
            os.close(os.open(candidate, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        except FileExistsError:
            continue
        return candidate
    raise FileExistsError(f"{folder / name}: too many files of that name")


def parse_attach(text: str) -> tuple[Path, str]:
    """``/attach PATH [caption ...]`` (quotes for a path with spaces; lines below also caption)
    -> (the path, the caption). Raises ValueError with a sentence for people."""
    first, _, below = text.partition("\n")
    words = shlex.split(first[len(ATTACH) :])
    if not words:
        raise ValueError("usage: /attach PATH [caption]")
    caption = " ".join(words[1:])
    caption = f"{caption}\n{below}".strip() if below.strip() else caption
    return Path(words[0]).expanduser(), caption


class Transfer(Vertical):
    """A progress bar above the composer for one upload or download: ``label  [####--] 42 %``."""

    def __init__(self, label: str) -> None:
        super().__init__(classes="transfer")
        self.label = label

    def compose(self) -> ComposeResult:
        yield Label(plain(self.label, newlines=False))
        yield ProgressBar(total=None, show_eta=False)

    def progress(self, done: int, total: int) -> None:
        """The client core's progress callback (blob bytes; on the event loop)."""
        if self.is_mounted:
            self.query_one(ProgressBar).update(total=max(total, 1), progress=done)


class SaveDialog(ModalScreen[Path | None]):
    """Save the file of a message: into which folder (Enter saves; Escape cancels)."""

    BINDINGS = [Binding("escape", "dismiss(None)", "Cancel")]

    def __init__(self, name: str, folder: Path) -> None:
        super().__init__()
        self.file_name, self.folder = name, folder

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog", id="save-file"):
            yield Static("Save file", classes="dialog-title")
            yield Static(plain(f"{self.file_name}  →  folder:", newlines=False))
            yield Input(str(self.folder), id="save-folder")
            yield Static("Enter saves (never over an existing file) · Esc cancels", classes="dim")

    def on_mount(self) -> None:
        self.query_one("#save-folder", Input).focus()

    @on(Input.Submitted, "#save-folder")
    def _submitted(self, event: Input.Submitted) -> None:
        self.dismiss(Path(event.value.strip() or str(self.folder)).expanduser())


class ChatFiles:
    """Attach, save and open (mixed into ``ChatScreen``, which provides ``app``, ``client``,
    ``conversation``, ``log_view``, ``query_one`` and ``_give_back``)."""

    app: Any
    client: Any
    conversation: str
    log_view: Any
    query_one: Any
    _give_back: Any

    # -- attach ----------------------------------------------------------------------------------
    def attach_command(self, text: str) -> bool:
        """Handle ``/attach ...`` typed in the composer; False if ``text`` is not one."""
        head = text.split(None, 1)[0] if text.strip() else ""
        if head != ATTACH:
            return False
        try:
            path, caption = parse_attach(text)
        except ValueError as exc:
            self._give_back(self.conversation, text)
            toast(self.app, f"not sent: {exc}", severity="error", title="attach")
            return True
        problem = "" if path.exists() else "no such file"
        problem = problem or ("is a folder, not a file" if path.is_dir() else "")
        problem = problem or ("" if path.is_file() else "is not a regular file")
        if problem:
            self._give_back(self.conversation, text)
            toast(self.app, f"not sent: {path}: {problem}", severity="error", title="attach")
            return True
        self._send_file(self.conversation, path, caption, text)
        return True

    def action_attach(self) -> None:
        """Ctrl+T: start an ``/attach`` line in the composer."""
        composer = self.query_one("#composer", Composer)
        if not composer.text.startswith(ATTACH):
            composer.text = f"{ATTACH} {composer.text}"
        composer.move_cursor(composer.document.end)
        composer.focus()

    @work(group="files")
    async def _send_file(self, cid: str, path: Path, caption: str, typed: str) -> None:
        bar = await self._bar(f"⬆ {path.name}: encrypting and uploading")
        try:
            await self.client.attachments.send(cid, path, caption=caption, progress=bar.progress)
        except (E2EEError, OSError, TimeoutError) as exc:
            self._give_back(cid, typed)
            toast(self.app, f"not sent: {_words(exc)}", severity="error", title=_code(exc, "attach"))
        else:
            toast(self.app, f"sent {path.name}", title="file")
        finally:
            bar.remove()

    async def _bar(self, label: str) -> Transfer:
        bar = Transfer(label)
        await self.query_one("#main").mount(bar, before=self.query_one("#composer"))
        return bar

    # -- save and open ---------------------------------------------------------------------------
    def file_target(self) -> Record | None:
        """The selected message, else the last on screen, if it carries a file (else a toast)."""
        target = self.message_target()  # type: ignore[attr-defined]  # ChatActions
        if target is None or target.content.t != "attachment" or not target.content.att:
            toast(self.app, "select a message with a file first (Ctrl+Up/Down)", severity="warning")
            return None
        return target

    def file_action(self, choice: str, rec: Record) -> None:
        """F4's "save" or "open" on ``rec`` (a message with a file)."""
        (self.save_file if choice == "save" else self.open_file)(rec)

    def action_save_file(self) -> None:
        """Ctrl+S: save the selected message's file (asks for the folder)."""
        rec = self.file_target()
        if rec is not None:
            self.save_file(rec)

    def save_file(self, rec: Record) -> None:
        """Ask for the folder, then save ``rec``'s file there."""
        name = safe_name(rec.content.att.get("name", "file"))

        def chosen(folder: Path | None) -> None:
            if folder is not None:
                self._save_file(rec, folder, name)

        self.app.push_screen(SaveDialog(name, downloads_folder()), chosen)

    @work(group="files")
    async def _save_file(self, rec: Record, folder: Path, name: str) -> None:
        bar = await self._bar(f"⬇ {name}: downloading and verifying")
        out: Path | None = None
        try:
            out = await asyncio.to_thread(reserve, folder, name)
            await self.client.attachments.save(
                rec.mid, out, conversation=rec.conversation, sender=rec.sender, progress=bar.progress
            )
        except (E2EEError, OSError, TimeoutError) as exc:
            if out is not None:
                out.unlink(missing_ok=True)
            toast(self.app, f"not saved: {_words(exc)}", severity="error", title=_code(exc, "save"))
        else:
            toast(self.app, f"saved {out} (verified)", title="file")
        finally:
            bar.remove()

    def action_open_file(self) -> None:
        """Ctrl+O: open the selected message's file with the desktop opener."""
        rec = self.file_target()
        if rec is not None:
            self.open_file(rec)

    def open_file(self, rec: Record) -> None:
        """Open ``rec``'s file with the desktop opener (a toast if there is none)."""
        command = opener()
        if command is None:
            toast(self.app, "no desktop opener (xdg-open or open) found: save the file with Ctrl+S", severity="warning")
            return
        self._open_file(rec, command, safe_name(rec.content.att.get("name", "file")))

    @work(group="files")
    async def _open_file(self, rec: Record, command: list[str], name: str) -> None:
        """Download into a 0600 file in a fresh 0700 folder, run ``command`` on it, and remove
        both when it exits (or when this worker is cancelled: the app exits)."""
        folder = Path(await asyncio.to_thread(tempfile.mkdtemp, prefix="e2ee-open-"))
        self.opened_files = getattr(self, "opened_files", set()) | {folder}
        bar = await self._bar(f"⬇ {name}: downloading and verifying")
        try:
            try:
                out = await asyncio.to_thread(reserve, folder, name)
                await self.client.attachments.save(
                    rec.mid, out, conversation=rec.conversation, sender=rec.sender, progress=bar.progress
                )
            finally:
                bar.remove()
            proc = await asyncio.create_subprocess_exec(
                *command, str(out), stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
            )  # fmt: skip
            try:
                await proc.wait()
            finally:
                if proc.returncode is None:  # the app exits first: the opener goes with its file
                    proc.terminate()
        except (E2EEError, OSError, TimeoutError) as exc:
            toast(self.app, f"not opened: {_words(exc)}", severity="error", title=_code(exc, "open"))
        finally:
            shutil.rmtree(folder, ignore_errors=True)
            self.opened_files.discard(folder)


def _words(exc: BaseException) -> str:
    return one_line(getattr(exc, "message", None) or str(exc) or type(exc).__name__)


def _code(exc: BaseException, default: str) -> str:
    return str(getattr(exc, "code", default))
