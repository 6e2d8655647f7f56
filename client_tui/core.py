"""Headless client core (asyncio): account, keys, contacts, websocket session, seal/open.

Used by the Textual app, ``e2ee-demo``, ``e2ee-chat send/tail`` and the bench. Every RSA
private-key operation and key generation runs in a worker thread, so an event loop that drives
a UI is never blocked by crypto. The client reaches the relay only over the wire (REST + ws).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx2
import msgspec
import platformdirs
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from shared import envelope, frames
from shared.errors import (
    AuthFailed,
    E2EEError,
    UnknownSenderKey,
    VerificationFailed,
)
from shared.keys import DEFAULT_RSA_BITS, Identity, PublicIdentity

from . import keystore

log = logging.getLogger("e2ee.client")
REQUIRED_LEVEL = 4


class ClientError(E2EEError):
    """A request to the relay failed; ``code`` is the relay's error code when it sent one."""

    code = "client_error"

    def __init__(self, message: str, *, code: str | None = None, field: str | None = None,
                 detail: dict | None = None, status: int | None = None) -> None:
        super().__init__(message, field=field)
        if code:
            self.code = code
        self.detail = detail
        self.status = status


class DowngradeRefused(E2EEError):
    """The relay announced a security level below the one this client requires (4)."""

    code = "downgrade_refused"


class KeyChangeBlocked(E2EEError):
    """A member's key changed since it was pinned; sending waits until the user accepts it."""

    code = "key_change_blocked"


# -- events the core emits ---------------------------------------------------------------------------
@dataclass(frozen=True)
class MessageReceived:
    seq: int
    conversation: str
    sender: str
    text: str
    mid: str
    sent_at_ms: int
    counter: int
    envelope: bytes
    timings_ms: dict[str, float]


@dataclass(frozen=True)
class MessageUnreadable:
    """Shown as "could not verify"; ``reason`` (a project error code) goes to the log/inspector."""

    seq: int
    conversation: str
    sender: str
    reason: str
    detail: str


@dataclass(frozen=True)
class MessageStored:
    mid: str
    seq: int
    conversation: str


@dataclass(frozen=True)
class Sent:
    """Result of :meth:`ChatClient.send_text`: the message id and the relay's sequence."""

    mid: str
    seq: int


@dataclass(frozen=True)
class Delivered:
    seq: int
    user: str


@dataclass(frozen=True)
class ConnectionState:
    state: str  # "connecting" | "online" | "offline" | "refused"
    detail: str = ""


@dataclass(frozen=True)
class KeyChanged:
    user: str
    old_kids: tuple[str, str]
    new_kids: tuple[str, str]


Event = MessageReceived | MessageUnreadable | MessageStored | Delivered | ConnectionState | KeyChanged


@dataclass
class Contact:
    """A pinned contact (trust on first use)."""

    identity: PublicIdentity
    verified: bool = False
    pending: PublicIdentity | None = None  # a changed key waiting for the user's decision


def default_profile_root() -> Path:
    return Path(platformdirs.user_data_dir("e2ee-chat", appauthor=False))


def _url_slug(url: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in url.split("://", 1)[-1]).strip("_")


@dataclass
class _State:
    cursor: int = 0
    counters: dict[str, int] = field(default_factory=dict)


class ChatClient:
    """One account on one relay.

    Args:
        server_url: relay base URL, e.g. ``http://127.0.0.1:8765`` (``https://`` for TLS).
        username: the account name.
        profile_root: folder for per-account files (keystore 0600, contacts, cursor);
            default: the platform's user data folder (platformdirs).
        kdf: Argon2id cost override for the keystore (tests use a small one).
    """

    def __init__(self, server_url: str, username: str, profile_root: Path | None = None,
                 kdf: dict | None = None) -> None:
        self.server_url = server_url.rstrip("/")
        self.username = username
        self.profile = (profile_root or default_profile_root()) / _url_slug(self.server_url) / username
        self.kdf = kdf
        self.identity: Identity | None = None
        self.token: str | None = None
        self.token_exp = 0
        self.hello: frames.Hello | None = None
        self.events: asyncio.Queue[Event] = asyncio.Queue()
        self.contacts: dict[str, Contact] = {}
        self.members: dict[str, list[str]] = {}
        self.titles: dict[str, str] = {}
        self._state = _State()
        self._seen: set[tuple[str, str]] = set()
        self._pending: dict[str, asyncio.Future] = {}
        self._http = httpx2.AsyncClient(base_url=self.server_url, timeout=30)
        self._ws: ClientConnection | None = None
        self._reader: asyncio.Task | None = None
        self._synced = asyncio.Event()

    # -- files --------------------------------------------------------------------------------------
    @property
    def keystore_path(self) -> Path:
        return self.profile / "keystore.json"

    def _load_state(self) -> None:
        path = self.profile / "state.json"
        if path.exists():
            doc = json.loads(path.read_text())
            self._state = _State(doc.get("cursor", 0), doc.get("counters", {}))
        cpath = self.profile / "contacts.json"
        if cpath.exists():
            for name, c in json.loads(cpath.read_text()).items():
                self.contacts[name] = Contact(PublicIdentity.from_json(c["identity"]), c.get("verified", False))

    def _save_state(self) -> None:
        self.profile.mkdir(parents=True, exist_ok=True, mode=0o700)
        _atomic_write(self.profile / "state.json",
                      json.dumps({"cursor": self._state.cursor, "counters": self._state.counters}))
        _atomic_write(self.profile / "contacts.json", json.dumps(
            {n: {"identity": c.identity.to_json(), "verified": c.verified} for n, c in self.contacts.items()}))

    # -- REST -----------------------------------------------------------------------------------------
    async def _request(self, method: str, path: str, body: dict | None = None, auth: bool = True) -> dict:
        headers = {"Authorization": f"Bearer {self.token}"} if auth and self.token else {}
        try:
            resp = await self._http.request(method, path, json=body, headers=headers)
        except httpx2.HTTPError as exc:
            raise ClientError(f"relay unreachable: {type(exc).__name__}", code="unreachable") from None
        try:
            data = resp.json()
        except ValueError:
            raise ClientError(f"relay answered {resp.status_code} without JSON", status=resp.status_code) from None
        if resp.status_code >= 400:
            err = data.get("error", {})
            raise ClientError(err.get("message", "request failed"), code=err.get("code"), field=err.get("field"),
                              detail=err.get("detail"), status=resp.status_code)
        return data

    async def register(self, password: str, passphrase: str, bits: int = DEFAULT_RSA_BITS) -> Identity:
        """Generate keys (in a thread), save them encrypted, publish the public parts, log in.

        Raises:
            ClientError: the relay refused (e.g. ``conflict`` if the name is taken).
        """
        identity = await asyncio.to_thread(Identity.generate, self.username, bits)
        pub = identity.public.to_json()
        data = await self._request("POST", "/v1/accounts", {
            "username": self.username, "password": password, "wrap_key": pub["wrap_key"],
            "sign_key": pub["sign_key"]}, auth=False)
        self.username = data["username"]
        self.profile = self.profile.parent / self.username
        await asyncio.to_thread(keystore.save, self.keystore_path, identity, passphrase, self.kdf)
        self.identity = identity
        self._load_state()
        self.contacts[self.username] = Contact(identity.public, verified=True)
        await self._login(password)
        return identity

    async def login(self, password: str, passphrase: str) -> Identity:
        """Open the keystore with ``passphrase`` (in a thread) and get a token.

        Raises:
            keystore.WrongPassphrase, keystore.KeystoreError, ClientError.
        """
        self.identity = await asyncio.to_thread(keystore.load, self.keystore_path, passphrase)
        self._load_state()
        self.contacts[self.username] = Contact(self.identity.public, verified=True)
        await self._login(password)
        return self.identity

    async def _login(self, password: str) -> None:
        data = await self._request("POST", "/v1/token", {"username": self.username, "password": password},
                                   auth=False)
        self.token, self.token_exp = data["token"], data["expires_at"]

    async def renew_token(self) -> None:
        """Swap the current token for a fresh one (no password needed while it is valid)."""
        data = await self._request("POST", "/v1/token/renew")
        self.token, self.token_exp = data["token"], data["expires_at"]

    async def fetch_keys(self, user: str) -> PublicIdentity:
        """Fetch ``user``'s published keys and pin them on first use.

        A key that differs from the pinned one is kept as ``pending`` and emits
        :class:`KeyChanged`; sending to that user is then blocked until :meth:`accept_key`.
        """
        ident = PublicIdentity.from_json(await self._request("GET", f"/v1/users/{user}/keys"))
        contact = self.contacts.get(ident.username)
        if contact is None:
            self.contacts[ident.username] = Contact(ident)
            self._save_state()
        elif (contact.identity.wrap_kid, contact.identity.sign_kid) != (ident.wrap_kid, ident.sign_kid):
            if contact.pending is None or contact.pending.wrap_kid != ident.wrap_kid:
                contact.pending = ident
                await self.events.put(KeyChanged(
                    ident.username, (contact.identity.wrap_kid, contact.identity.sign_kid),
                    (ident.wrap_kid, ident.sign_kid)))
        return self.contacts[ident.username].identity

    def accept_key(self, user: str) -> None:
        """Accept ``user``'s changed key: it becomes the pinned key (unverified)."""
        contact = self.contacts[user]
        if contact.pending is not None:
            self.contacts[user] = Contact(contact.pending)
            self._save_state()

    async def create_conversation(self, title: str, members: list[str]) -> str:
        """Create a conversation with ``members`` (the creator is added); returns its id."""
        data = await self._request("POST", "/v1/conversations", {"title": title, "members": members})
        self.members[data["id"]] = data["members"]
        self.titles[data["id"]] = data["title"]
        return data["id"]

    async def refresh_conversations(self) -> dict[str, list[str]]:
        """Reload the conversations I belong to: ``{id: [member usernames]}``."""
        data = await self._request("GET", "/v1/conversations")
        for c in data["conversations"]:
            self.members[c["id"]] = c["members"]
            self.titles[c["id"]] = c["title"]
        return dict(self.members)

    # -- websocket ------------------------------------------------------------------------------------
    @property
    def ws_url(self) -> str:
        return self.server_url.replace("http", "ws", 1) + "/v1/ws"

    async def connect(self) -> None:
        """Open the websocket (token in the Authorization header), check the relay's level,
        start reading, and sync everything after my cursor.

        Raises:
            DowngradeRefused: the relay announced a level below 4.
            AuthFailed: the relay refused the token.
        """
        await self.events.put(ConnectionState("connecting", self.server_url))
        self._ws = await connect(
            self.ws_url, additional_headers={"Authorization": f"Bearer {self.token}"},
            compression=None, max_size=2 * 1024 * 1024, open_timeout=10,
        )
        hello = frames.decode_relay_frame(await self._ws.recv())
        if not isinstance(hello, frames.Hello):
            raise ClientError("relay did not start with hello")
        if hello.level < REQUIRED_LEVEL:
            await self._ws.close()
            raise DowngradeRefused(f"relay runs level {hello.level}; this client requires {REQUIRED_LEVEL}")
        self.hello = hello
        ready = frames.decode_relay_frame(await self._ws.recv())
        if isinstance(ready, frames.Error):
            await self._ws.close()
            raise AuthFailed(ready.message, field=ready.field)
        self._synced.clear()
        self._reader = asyncio.create_task(self._read_loop(), name=f"ws-reader-{self.username}")
        await self.events.put(ConnectionState("online", self.server_url))
        await self._send_frame(frames.Sync(after=self._state.cursor))

    async def wait_synced(self, timeout: float = 30) -> None:
        """Wait until the sync started by :meth:`connect` delivered its last page."""
        await asyncio.wait_for(self._synced.wait(), timeout)

    async def _send_frame(self, frame) -> None:
        if self._ws is None:
            raise ClientError("not connected", code="offline")
        await self._ws.send(frames.encode(frame).decode())

    async def close(self) -> None:
        """Close the websocket and the HTTP client; save cursor and contacts."""
        if self._ws is not None:
            await self._ws.close()
        if self._reader is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader
        await self._http.aclose()
        if self.identity is not None:
            self._save_state()

    async def _read_loop(self) -> None:
        ws = self._ws
        assert ws is not None
        try:
            async for raw in ws:
                try:
                    frame = frames.decode_relay_frame(raw)
                except E2EEError as exc:
                    log.warning("relay sent an invalid frame: %s", exc.message)
                    continue
                await self._on_frame(frame)
        except ConnectionClosed:
            pass
        finally:
            for fut in self._pending.values():
                if not fut.done():
                    fut.set_exception(ClientError("connection closed before the relay stored it", code="offline"))
            self._pending.clear()
            detail = f"{ws.close_code} {ws.close_reason}".strip() if ws.close_code else ""
            await self.events.put(ConnectionState("offline", detail))

    async def _on_frame(self, frame) -> None:
        if isinstance(frame, frames.Message):
            await self._on_message(frame)
        elif isinstance(frame, frames.Stored):
            fut = self._pending.pop(frame.mid, None)
            if fut is not None and not fut.done():
                fut.set_result(frame.seq)
            await self.events.put(MessageStored(frame.mid, frame.seq, frame.conversation))
        elif isinstance(frame, frames.Synced):
            self._save_state()
            if frame.more:
                await self._send_frame(frames.Sync(after=frame.cursor))
            else:
                self._synced.set()
        elif isinstance(frame, frames.Delivered):
            await self.events.put(Delivered(frame.seq, frame.user))
        elif isinstance(frame, frames.Error):
            fut = self._pending.pop(frame.ref, None) if frame.ref else None
            err = ClientError(frame.message, code=frame.code, field=frame.field, detail=frame.detail)
            if fut is not None and not fut.done():
                fut.set_exception(err)
            else:
                log.warning("relay error %s: %s", frame.code, frame.message)

    async def _sender_key(self, user: str, skid: str):
        contact = self.contacts.get(user)
        if contact is None or contact.identity.sign_kid != skid:
            await self.fetch_keys(user)
            contact = self.contacts.get(user)
        if contact is None or contact.identity.sign_kid != skid:
            raise UnknownSenderKey(f"{user}'s signing key {skid[:8]}… is not the pinned one", field="skid")
        return contact.identity.sign_key

    async def _on_message(self, frame: frames.Message) -> None:
        raw = bytes(frame.envelope)
        assert self.identity is not None
        try:
            parsed = envelope.parse(raw, max_bytes=self.hello.max_envelope if self.hello else
                                    envelope.DEFAULT_MAX_ENVELOPE_BYTES)
            key = (parsed.header.snd, parsed.header.mid)
            if key in self._seen:
                return self._advance(frame.seq)
            sign_key = await self._sender_key(parsed.header.snd, parsed.header.skid)
            t0 = time.perf_counter()
            opened = await asyncio.to_thread(
                envelope.open, parsed, self.identity, sign_key, conversation=frame.conversation, sender=frame.sender
            )
            t1 = time.perf_counter()
        except (VerificationFailed, E2EEError) as exc:
            log.warning("message seq=%d from %s could not be verified: %s (%s)", frame.seq, frame.sender,
                        exc.code, exc.message)
            await self.events.put(MessageUnreadable(frame.seq, frame.conversation, frame.sender, exc.code, exc.message))
            return self._advance(frame.seq)
        self._seen.add(key)
        h = opened.header
        await self.events.put(MessageReceived(
            frame.seq, h.cid, h.snd, opened.text, h.mid, h.ts, h.ctr, raw, {"open": (t1 - t0) * 1000}))
        self._advance(frame.seq)
        if h.snd != self.username:
            await self._send_frame(frames.Ack(frame.seq))

    def _advance(self, seq: int) -> None:
        if seq > self._state.cursor:
            self._state.cursor = seq

    # -- sending --------------------------------------------------------------------------------------
    async def recipients_for(self, conversation: str) -> list[PublicIdentity]:
        """Current pinned keys of every member (me included), fetched on first use.

        Raises:
            KeyChangeBlocked: a member's key changed and was not accepted yet.
        """
        if conversation not in self.members:
            await self.refresh_conversations()
        out = []
        for user in self.members[conversation]:
            contact = self.contacts.get(user)
            ident = contact.identity if contact else await self.fetch_keys(user)
            if self.contacts[user].pending is not None:
                raise KeyChangeBlocked(f"{user}'s key changed: accept or verify it before sending", field=user)
            out.append(ident)
        return out

    async def send_text(self, conversation: str, text: str, timeout: float = 30) -> Sent:
        """Seal ``text`` for every member and send it; return its ``mid`` and ``seq`` once stored.

        A relay answer ``recipients_mismatch`` (members or keys changed) makes the client reload
        the members and their keys and seal again, once.

        Raises:
            EnvelopeTooLarge, KeyChangeBlocked, ClientError (relay error codes), TimeoutError.
        """
        assert self.identity is not None
        for attempt in (1, 2):
            recipients = await self.recipients_for(conversation)
            counter = self._state.counters.get(conversation, 0) + 1
            max_bytes = self.hello.max_envelope if self.hello else envelope.DEFAULT_MAX_ENVELOPE_BYTES
            data = await asyncio.to_thread(
                envelope.seal, text, self.identity, conversation, recipients, counter=counter, max_bytes=max_bytes)
            mid = envelope.parse(data, max_bytes=max_bytes).header.mid
            self._state.counters[conversation] = counter
            self._seen.add((self.username, mid))
            fut: asyncio.Future = asyncio.get_running_loop().create_future()
            self._pending[mid] = fut
            await self._send_frame(frames.Send(conversation, msgspec.Raw(data)))
            try:
                return Sent(mid, await asyncio.wait_for(fut, timeout))
            except ClientError as exc:
                if exc.code != "recipients_mismatch" or attempt == 2:
                    raise
                self.members.pop(conversation, None)
                for user in (exc.detail or {}).get("missing", []):
                    await self.fetch_keys(user)
        raise AssertionError("unreachable")

    async def ping(self) -> float:
        """Round trip over the websocket in ms (websocket ping/pong)."""
        assert self._ws is not None
        t0 = time.perf_counter()
        await (await self._ws.ping())
        return (time.perf_counter() - t0) * 1000


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)
