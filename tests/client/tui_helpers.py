"""Helpers for Pilot tests of the app without a relay: an offline client with keys and history,
the text on screen, and what a hostile relay or member can put in every string."""

from __future__ import annotations

from pathlib import Path

from client_tui.core import ChatClient, Contact, keystore
from tests.client.conftest import Hostile
from tests.conftest import FAST_KDF

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
SHOWN = ["[/]", "[b]bold[/b]", "[link=https://evil.example]link[/link]", "[@click=app.quit]quit[/]",
         "[red on red]hidden", "$accent {x} %s [", "␛[31mred␛[0m", "<U+202E>gnp.exe"]
"""How some of them must appear on screen: literally, with escapes as visible symbols."""


def hostile_title(n: int = 0) -> str:
    return " ".join(HOSTILE[n:n + 4]) if n < len(HOSTILE) else "title"


async def offline_client(root: Path, identities, *, me: str = "bob", url: str = "http://127.0.0.1:9",
                         backoff: tuple[float, float] = (30.0, 60.0)) -> tuple[ChatClient, Hostile]:
    """``me``'s client with keys and cache, alice and carol pinned, never reaching a relay (port 9).

    A long backoff keeps its reconnect attempts out of the way."""
    client = ChatClient(url, me, root, kdf=FAST_KDF, backoff=backoff)
    local_key = keystore.save(client.keystore_path, identities[me], f"{me} passphrase", FAST_KDF)
    await client._open_local(keystore.KeyBundle(identities[me], local_key), f"{me} passphrase")
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
