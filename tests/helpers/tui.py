"""Helpers for Pilot tests of the app: an offline client with keys and history, the text on screen,
buttons and screens that take input, and what a hostile relay or member can put in every string."""

from __future__ import annotations

from pathlib import Path

from client_tui.core import ChatClient, Contact, keystore
from tests.helpers.clients import wait_until
from tests.helpers.config import FAST_KDF
from tests.helpers.hostile import Hostile

# One of each kind of string a member or the relay controls that a terminal app can mistake for
# something else: Textual/Rich markup (closing tags, links, action links, styles, variables),
# ANSI/OSC escape sequences, controls, bidi overrides, emoji sequences of disputed width.
HOSTILE = [
    "[/]",
    "[b]bold[/b]",
    "[link=https://evil.example]link[/link]",
    "[@click=app.quit]quit[/]",
    "[red on red]hidden",
    "$accent {x} %s [",
    "\x1b[31mred\x1b[0m",
    "\x1b]8;;https://evil.example\x07osc8\x1b]8;;\x07",
    "bell\x07back\x08cr\r",
    "\u202egnp.exe",
    "👨\u200d👩\u200d👧 👋🏽 ❤️",
    "\x9b31mcsi",
    "line\u2028sep",
]
SHOWN = [
    "[/]",
    "[b]bold[/b]",
    "[link=https://evil.example]link[/link]",
    "[@click=app.quit]quit[/]",
    "[red on red]hidden",
    "$accent {x} %s [",
    "␛[31mred␛[0m",
    "<U+202E>gnp.exe",
]
"""How some of them must appear on screen: literally, with escapes as visible symbols."""


def hostile_title(n: int = 0) -> str:
    return " ".join(HOSTILE[n : n + 4]) if n < len(HOSTILE) else "title"


async def offline_client(
    root: Path,
    identities,
    *,
    me: str = "bob",
    url: str = "http://127.0.0.1:9",
    backoff: tuple[float, float] = (30.0, 60.0),
) -> tuple[ChatClient, Hostile]:
    """``me``'s client with keys and cache, alice and carol pinned, never reaching a relay (port 9).

    A long backoff keeps its reconnect attempts out of the way."""
    client = ChatClient(url, me, root, kdf=FAST_KDF, backoff=backoff)
    local_key = keystore.save(client.keystore_path, identities[me], f"{me} passphrase", FAST_KDF)
    await client.open_local(keystore.KeyBundle(identities[me], local_key), f"{me} passphrase")
    for name in ("alice", "carol"):
        client.contacts[name] = Contact(identities[name].public)
    client.members["conv-1"] = ["alice", me, "carol"]
    client.titles["conv-1"] = "plain title"
    client._key_fetched_at = {n: float("inf") for n in ("alice", "carol", "mallory")}  # never fetch
    return client, Hostile(client, identities)


def screen_lines(app) -> list[str]:
    """The text of every line of the screen as drawn (all layers composed), without styles."""
    return ["".join(seg.text for seg in strip) for strip in app.screen._compositor.render_strips()]


def screen_text(app) -> str:
    return "\n".join(screen_lines(app))


def alive(app) -> bool:
    """The app runs and has not failed."""
    return app.is_running and app.return_code is None and app._exception is None


def chat_shown(app) -> bool:
    """The chat window is mounted (queries find its widgets, keys reach it)."""
    return app.chat is not None and app.chat.is_mounted


async def click_button(pilot, selector: str, timeout: float = 15) -> None:
    """Click the button ``selector`` once it takes a click: Textual's Button ignores clicks while
    disabled and during its 0.2 s ``-active`` flash after the previous press (a second click that
    soon is dropped, as a double click would be)."""
    button = pilot.app.screen.query_one(selector)
    await wait_until(lambda: not button.disabled and not button.has_class("-active"), timeout)
    await pilot.click(selector)


def screen_ready(app, kind, focus: str | None = None) -> bool:
    """The app's screen is a ``kind`` that has composed and mounted its widgets (and ``focus``, a
    selector, has the focus): queries find its widgets and keys reach it. A pushed screen is
    ``app.screen`` at once, but composes, mounts and takes the focus in later turns of the loop;
    under load, a key sent before that goes to no widget and is lost."""
    screen = app.screen
    if not isinstance(screen, kind) or not screen.is_mounted:
        return False
    return focus is None or (screen.focused is not None and screen.focused is screen.query_one(focus))


def tui_client(relay, root: Path, name: str) -> ChatClient:
    """A client for app tests: cheap keystore KDF, quick reconnects."""
    return ChatClient(relay.url, name, root, kdf=FAST_KDF, backoff=(0.1, 1.0))


def rendered_text(renderable, width: int = 160) -> str:
    """Plain text of a rich renderable, as the screen would show it."""
    import io

    from rich.console import Console

    console = Console(width=width, record=True, file=io.StringIO(), color_system=None)
    console.print(renderable)
    return console.export_text()
