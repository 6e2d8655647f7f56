"""Relay addresses and the profile folders named after them.

A profile folder (keystore, contacts, history cache) is ``ROOT/<relay key>/<username>``. The key
comes from the *normalised* address, so the ways of writing one relay find the same keys:
scheme and host case, a default port (``:80`` for http, ``:443`` for https), a trailing ``/``
or ``/v1`` (what the client appends itself), ``ws://`` for ``http://``, and the loopback names
(``localhost``, ``127.0.0.1``, ``[::1]``) of this machine. A folder made by an older client under
the address exactly as typed is moved to the normalised name the first time it is used. When no
keystore matches, :func:`missing_keystore` lists the profiles this user has and how to use them.
"""

from __future__ import annotations

import ipaddress
import logging
import os
from pathlib import Path
from urllib.parse import urlsplit

from shared.errors import InvalidRequest

from .keystore import KeystoreError
from .private import private_folder, write_private

log = logging.getLogger("e2ee.client")
DEFAULT_PORTS = {"http": 80, "https": 443}
ADDRESS_FILE = "relay.url"
"""In each profile folder: the normalised address of its relay (for listings)."""
_SCHEMES = {"http": "http", "https": "https", "ws": "http", "wss": "https"}


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def normalize_url(url: str) -> str:
    """The canonical form of a relay address: ``scheme://host[:port][/path]``.

    A missing scheme means ``http`` on this machine (loopback) and ``https`` elsewhere; the
    host is lower-cased; a default port, a trailing ``/``, ``/v1`` or ``/v1/ws``, a query and a
    fragment are dropped. ``"LocalHost:8765/v1/"`` gives ``"http://localhost:8765"``.

    Raises:
        InvalidRequest: not an address (no host, a scheme other than http(s)/ws(s), a bad port).
    """
    text = url.strip()
    if "://" not in text:
        host = urlsplit("//" + text).hostname or ""
        text = ("http://" if _loopback(host) else "https://") + text
    parts = urlsplit(text)
    scheme = _SCHEMES.get(parts.scheme.lower())
    try:
        host, port = parts.hostname, parts.port
    except ValueError:
        raise InvalidRequest(
            f"{url!r} is not a relay address: the port must be a number 1-65535", field="server"
        ) from None
    if scheme is None or not host:
        raise InvalidRequest(f"{url!r} is not a relay address: use http://HOST:PORT or https://HOST", field="server")
    netloc = f"[{host}]" if ":" in host else host
    if port is not None and port != DEFAULT_PORTS[scheme]:
        netloc += f":{port}"
    path = parts.path.rstrip("/")
    for suffix in ("/v1/ws", "/v1"):
        if path.endswith(suffix):
            path = path[: -len(suffix)]
            break
    return f"{scheme}://{netloc}{path.rstrip('/')}"


def _slug(address: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in address.split("://", 1)[-1]).strip("_")


def relay_key(url: str) -> str:
    """The folder name of a relay: its normalised address without the scheme, every loopback
    name written ``127.0.0.1`` (``http://localhost:8765`` -> ``127_0_0_1_8765``)."""
    parts = urlsplit(normalize_url(url))
    host = (
        "127.0.0.1"
        if _loopback(parts.hostname or "")
        else parts.netloc.rsplit(":", 1)[0]
        if parts.port
        else parts.netloc
    )
    return _slug(host + (f":{parts.port}" if parts.port else "") + parts.path)


def profile_dir(root: Path, url: str, username: str) -> Path:
    """``root/<relay key>/<username>``; a profile an older client made under the address as typed
    is moved there first (the keys, contacts and history come along)."""
    folder = Path(root) / relay_key(url) / username
    if (folder / "keystore.json").exists():
        return folder
    for legacy in {_slug(url.rstrip("/")), _slug(normalize_url(url))} - {folder.parent.name}:
        old = Path(root) / legacy / username
        if (old / "keystore.json").exists() and not folder.exists():
            private_folder(folder.parent)
            os.replace(old, folder)
            log.info("profile of %s moved from %s to %s (relay address normalised)", username, old, folder)
            return folder
    return folder


def remember(profile: Path, url: str) -> None:
    """Write the relay's normalised address into its profile folder (for :func:`profiles_of`)."""
    note = profile / ADDRESS_FILE
    if not note.exists():
        write_private(note, (normalize_url(url) + "\n").encode())


def profiles_of(root: Path, username: str) -> list[str]:
    """The relay addresses (or folder names, for profiles older than the address file) where
    ``username`` has a keystore under ``root``."""
    found = []
    for ks in sorted(Path(root).glob(f"*/{username}/keystore.json")):
        note = ks.parent / ADDRESS_FILE
        found.append(note.read_text().strip() if note.exists() else f"(folder {ks.parent.parent.name})")
    return found


def missing_keystore(root: Path, url: str, username: str) -> KeystoreError:
    """The error for "no keystore for this user at this relay", naming what exists instead."""
    others = profiles_of(root, username)
    head = f"no keys for {username} at {normalize_url(url)} on this machine"
    if not others:
        return KeystoreError(
            f"{head}: create the account (--register) or bring your keys "
            f"(e2ee-chat keys import --user {username} --file FILE)",
            field="path",
        )
    listed = ", ".join(others)
    return KeystoreError(
        f"{head}. {username} has keys for: {listed}. Use one with --server ADDRESS "
        f"(or E2EE_SERVER), or copy them with keys export / keys import",
        field="path",
    )
