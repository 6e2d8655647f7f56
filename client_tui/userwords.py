"""Errors in words a user can act on: one line, no exception class names, no tracebacks.

Used by the app (login screen, dialogs, toasts) and by every ``e2ee-chat`` sub-command.
"""

from __future__ import annotations

from shared.errors import E2EEError, ErrorCode

from .safe import one_line

_OS_WORDS = {
    "ConnectionRefusedError": "nothing answers at that address (is the relay running?)",
    "TimeoutError": "the relay did not answer in time",
    "PermissionError": "permission denied",
    "FileNotFoundError": "no such file",
    "IsADirectoryError": "that is a folder, not a file",
}


def describe(exc: BaseException) -> str:
    """``exc`` as one harmless line: the project's message (and its code when it adds something),
    or plain words for the OS and library errors a user can meet (files, sockets, certificates)."""
    if isinstance(exc, E2EEError):
        code = getattr(exc, "code", "")
        text = exc.message
        if (
            code
            and code not in (ErrorCode.CLIENT_ERROR, ErrorCode.KEYSTORE_ERROR, ErrorCode.UNREACHABLE)
            and code.replace("_", " ") not in text
        ):
            text = f"{text} ({code})"
        return one_line(text)
    name = type(exc).__name__
    words = _OS_WORDS.get(name)
    if isinstance(exc, OSError):
        where = f": {exc.filename}" if getattr(exc, "filename", None) else ""
        return one_line((words or (exc.strerror or "system error").lower()) + where)
    if isinstance(exc, UnicodeError):
        return "the text is not valid UTF-8"
    return one_line(words or (str(exc) or "unexpected error").splitlines()[0])
