"""Showing strings that other people control: titles, usernames, message text, relay reasons.

Every such string reaches the screen through :func:`plain` (a Rich ``Text``: never parsed as
Textual or Rich markup, so ``[b]``, ``[/]`` or ``[@click=app.quit]`` are shown as typed) or
:func:`harmless` (for plain ``str`` outputs such as the terminal, notifications and logs), and
toasts through :func:`toast` (markup off). What they neutralise:

* C0/C1 control characters (ANSI escape sequences, OSC 8 links, BEL, backspace, carriage return)
  become visible symbols, so nothing another user wrote can move the cursor, retitle the window,
  ring the bell or hide text;
* bidirectional embeddings, overrides and isolates (UAX #9, "Trojan Source") become ``<U+XXXX>``;
* emoji joiners (ZWJ U+200D), presentation selectors (U+FE0E/U+FE0F) and skin-tone modifiers
  (U+1F3FB..U+1F3FF) are left out of what is drawn, because terminals disagree on the width of
  the sequences they build (tmux 3.3 draws "👋🏽" 4 cells wide where Textual counts 2), and a
  width disagreement puts the cursor in the wrong cell and shifts the rest of the line. The
  message itself is kept exactly (history, search and the inspector's byte counts use it);
  ``E2EE_EMOJI=exact`` draws it unchanged for terminals that cluster graphemes (kitty, WezTerm).
"""

from __future__ import annotations

import os
import unicodedata

from rich.text import Text

__all__ = ["harmless", "plain", "toast", "one_line"]

# Explicit embeddings, overrides and isolates (UAX #9). Marks (LRM/RLM) are harmless and kept so
# that right-to-left text is shown exactly as sent.
_BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
# Characters whose drawn width terminals disagree on (see the module docstring).
_WIDTH_AMBIGUOUS = frozenset("\u200d\ufe0e\ufe0f\U0001f3fb\U0001f3fc\U0001f3fd\U0001f3fe\U0001f3ff")


def _exact_emoji() -> bool:
    return os.environ.get("E2EE_EMOJI", "").strip().lower() == "exact"


def harmless(text: object, *, newlines: bool = True) -> str:
    """``text`` (any object: ``str()`` of it) safe to draw on a terminal, as a ``str``.

    Newlines and tabs are kept (``newlines=False`` shows them as ``⏎`` and a space: for one-line
    places such as titles and the status bar); C0/C1 controls become U+2400-style pictures or
    ``\\xNN``; bidi overrides and isolates become ``<U+XXXX>``; emoji joiners, presentation
    selectors and skin-tone modifiers are dropped unless ``E2EE_EMOJI=exact``.
    """
    text = text if isinstance(text, str) else str(text)
    drop = frozenset() if _exact_emoji() else _WIDTH_AMBIGUOUS
    out = []
    for ch in text:
        if ch in "\n\t":
            out.append(ch if newlines else ("⏎" if ch == "\n" else " "))
            continue
        if ch in drop:
            continue
        if ch in _BIDI_CONTROLS:
            out.append(f"<U+{ord(ch):04X}>")
        elif unicodedata.category(ch) == "Cc":
            code = ord(ch)
            out.append(chr(0x2400 + code) if code < 0x20 else "\u2421" if code == 0x7F else f"\\x{code:02x}")
        elif unicodedata.category(ch) in ("Zl", "Zp"):  # U+2028/2029 break lines like a newline
            out.append("\n" if newlines else "⏎")
        else:
            out.append(ch)
    return "".join(out)


def one_line(text: object) -> str:
    """:func:`harmless` for one-line places (titles, names, the status bar, notifications)."""
    return harmless(text, newlines=False)


def plain(text: object, style: str = "", *, newlines: bool = True) -> Text:
    """A Rich ``Text`` of :func:`harmless` ``text``: drawn as typed, never parsed as markup.

    Hand this (never an f-string) to ``Static``, ``Label``, ``Select`` options, ``Button`` labels
    and every other widget that would parse a ``str`` as markup.
    """
    return Text(harmless(text, newlines=newlines), style=style)


def toast(
    app, message: object, *, title: object = "", severity: str = "information", timeout: float | None = None
) -> None:
    """``app.notify`` with markup off and both strings made :func:`harmless`."""
    app.notify(harmless(message), title=one_line(title), severity=severity, timeout=timeout, markup=False)
