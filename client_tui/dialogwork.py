"""A dialog's request to the client core that outlives the dialog.

A dialog (new conversation, members, the audience question) runs its client call in a Textual
worker owned by the dialog's screen. The user may close the dialog (Escape, Close) while that
call runs, and Textual then removes the screen: first its widgets, last the screen itself, whose
unmount cancels the screen's workers. Two things went wrong before this module:

* the call was cancelled halfway (a membership statement posted, the members saved, but the
  cache and the :class:`~client_tui.core.ConversationsChanged` event never written), and
* a call that ended while the widgets were being removed updated a widget that was gone
  (``NoMatches``), which failed the worker and so closed the whole app.

:func:`outlive` runs the call as its own task that closing the dialog does not cancel, and
:func:`is_open` tells the worker whether the dialog is still there to show the result.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any, TypeVar

from textual.screen import Screen

from shared.errors import E2EEError

from .safe import toast

__all__ = ["is_open", "outlive"]

log = logging.getLogger("e2ee.tui")

T = TypeVar("T")


def is_open(screen: Screen) -> bool:
    """``screen`` is still on the app's screen stack: a dialog the user has not closed.

    A closed dialog leaves the stack at once (``App.pop_screen``), before its widgets are removed,
    so this is ``False`` for the whole time a worker of the dialog could still run.
    """
    try:
        return screen in screen.app.screen_stack
    except Exception:  # no app any more (the app itself closed)
        return False


async def outlive(screen: Screen, call: Coroutine[Any, Any, T], what: str) -> T:
    """Await the client ``call`` from a worker of the dialog ``screen``; closing the dialog does
    not cancel the call.

    The call runs as its own task; the worker waits for it shielded. If the dialog is closed
    before the call ends, a failure is shown as a toast ("``what`` failed: ...", the typed
    error's message and code) instead of in the dialog; other exceptions are logged.

    Args:
        screen: the dialog whose worker awaits the call.
        call: a coroutine of the client core (``change_members(...)``, ``create_conversation(...)``).
        what: the request in a few words, for the toast.

    Returns:
        the call's result.

    Raises:
        whatever ``call`` raises; ``asyncio.CancelledError`` when the worker is cancelled (the
        dialog was removed): the call goes on.
    """
    task = asyncio.ensure_future(call)

    def ended(t: asyncio.Future) -> None:
        if t.cancelled() or (exc := t.exception()) is None or is_open(screen):
            return  # nothing to report, or the dialog's worker shows it
        if isinstance(exc, E2EEError):
            toast(screen.app, f"{what} failed: {exc.message}", severity="error", title=exc.code)
        else:
            log.error("%s failed after its dialog closed", what, exc_info=exc)

    task.add_done_callback(ended)
    return await asyncio.shield(task)
