"""Headless client core (asyncio): account, keys, contacts, websocket session, seal/open.

Used by the Textual app, ``e2ee-demo``, ``e2ee-chat send/tail`` and the bench. Every RSA
private-key operation, key generation, Argon2id and SQLite call runs in a worker thread, so an
event loop that drives a UI is never blocked by crypto or disk. The client reaches the relay only
over the wire (REST + websocket).

Two ways to be online:

* :meth:`ChatClient.connect` opens one websocket and syncs (raises on failure; no reconnect).
* :meth:`ChatClient.start` keeps a session alive: reconnect with exponential backoff and jitter,
  never retrying a refused login in a loop (close 1008 / HTTP 401-403: one fresh login, then stop),
  sync from the persisted cursor, re-send the outbox.

What the user sees is a list of :class:`~client_tui.core.history.Record` per conversation, kept in the
local history cache and announced by :class:`RecordChanged` events on :attr:`ChatClient.events`
(next to the simpler :class:`MessageReceived` / :class:`MessageStored` / :class:`Delivered`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import random
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx2
import msgspec
import platformdirs
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus

from shared import envelope, frames
from shared.errors import (
    AuthFailed,
    DowngradeRefused,
    E2EEError,
    EnvelopeTooLarge,
    ErrorCode,
    KeyAnswerMismatch,
    UnknownSenderKey,
)
from shared.keys import DEFAULT_RSA_BITS, Identity, PublicIdentity
from shared.names import canonical_username

from . import keystore, measure, membership_ops, profiles, transport
from .contacts import Contacts
from .errors import NOT_ANSWERED, ClientError, KeyChangeBlocked, MemberWithoutKey, SenderKeyUnavailable
from .events import (
    ConnectionState,
    ConnState,
    Delivered,
    Event,
    GapDetected,
    LocalDataWarning,
    MessageReceived,
    MessageStored,
    MessageUnreadable,
    RecordChanged,
    RttMeasured,
    Sent,
)
from .history import History, Record, RecordState, now_ms
from .membership import Audience, Membership
from .rotate import Rotation
from .tokens import RelaySession
from .trust import Contact

__all__ = ["ChatClient"]

log = logging.getLogger("e2ee.client")
REQUIRED_LEVEL = 4
CLOSE_AUTH = 1008
CLOSE_TOO_BIG = 1009
CLOSE_SLOW = 1013
CLOSE_GOING_AWAY = 1001
CLOSE_SESSION_ENDED = 4403
PING_EVERY_S = 15.0
ACK_DELAY_S = 0.05
SEND_TIMEOUT_S = 30.0
MAX_RESEALS = 3
KEY_REFETCH_S = 5.0


def default_profile_root() -> Path:
    return Path(platformdirs.user_data_dir("e2ee-chat", appauthor=False))


@dataclass
class _State:
    cursor: int = 0
    counters: dict[str, int] = field(default_factory=dict)  # my counter per conversation
    last_ctr: dict[str, int] = field(default_factory=dict)  # "conv\x00sender" -> highest counter seen
    missing: dict[str, list[int]] = field(default_factory=dict)  # "conv\x00sender" -> counters not seen


@dataclass(eq=False)
class _Outgoing:
    record: Record
    sealed: asyncio.Event
    done: asyncio.Future
    hold: bool
    reseals: int = 0


class ChatClient(Contacts, Rotation):
    """One account on one relay.

    Args:
        server_url: relay address, e.g. ``http://127.0.0.1:8765`` (``https://`` for TLS), normalised
            (:func:`client_tui.core.profiles.normalize_url`); ``cafile``: a certificate to trust (``E2EE_CAFILE``).
        username: the account name, canonicalised here (``Alice`` is ``alice``,
            :func:`shared.names.canonical_username`); the profile folder is named after that form.
        profile_root: folder for per-account files (keystore 0600, contacts, history cache);
            default: the platform's user data folder (platformdirs).
        kdf: Argon2id cost override for the keystore (tests use a small one).
        backoff: ``(first, most)`` reconnect delays in seconds (doubling, with jitter).
        clock: the clock token lifetimes are measured on, as intervals (``client_tui.core.tokens``).
    """

    def __init__(self, server_url: str, username: str, profile_root: Path | None = None, kdf: dict | None = None,
                 backoff: tuple[float, float] = (0.5, 30.0), cafile: str | None = None, clock=time.monotonic) -> None:
        self.server_url = profiles.normalize_url(server_url)  # InvalidRequest for what is not an address
        self.username = canonical_username(username)  # InvalidRequest for a name the relay would refuse
        self.profile = profiles.profile_dir(profile_root or default_profile_root(), server_url, self.username)
        self.cafile = transport.cafile_from(cafile)
        self._tls = transport.ssl_context(self.cafile)
        self.kdf = kdf
        self.backoff = backoff
        self.identity: Identity | None = None
        self.retired: tuple[Identity, ...] = ()
        self.session = RelaySession(clock)  # access token, refresh credential, renewals
        self.hello: frames.Hello | None = None
        self.events: asyncio.Queue[Event] = asyncio.Queue()
        self.trust = None  # the sealed trust store (client_tui.core.trust), once the keystore is open
        self._loose: dict[str, Contact] = {}
        self.membership = Membership(self)  # the verified logs: who is in each conversation
        self.local_warnings: list[str] = []  # what was lost or damaged on this machine, in words
        self.members: dict[str, list[str]] = {}
        self.titles: dict[str, str] = {}
        self.unread: dict[str, int] = {}
        self.inactive: set[str] = set()
        self.history: History | None = None
        self.state = ConnState.OFFLINE
        self.rtt_ms: float | None = None
        self.last_close: tuple[int | None, str] = (None, "")
        self._state = _State()
        self._seen: set[tuple[str, str]] = set()
        self._pending: dict[str, asyncio.Future] = {}
        self._outbox: list[_Outgoing] = []
        self._outgoing_by_mid: dict[str, _Outgoing] = {}
        self._mine_by_seq: dict[int, Record] = {}
        self._outbox_wake = asyncio.Event()
        self._password: str | None = None
        self._passphrase: str | None = None
        self._local_key = b""
        self._bundle: keystore.KeyBundle | None = None
        self._keys_lock = asyncio.Lock()  # one rotation step at a time (client_tui.core.rotate)
        self._http = httpx2.AsyncClient(base_url=self.server_url, timeout=30, verify=self._tls)
        self._ws: ClientConnection | None = None
        self._reader: asyncio.Task | None = None
        self._tasks: set[asyncio.Task] = set()
        self._supervisor: asyncio.Task | None = None
        self._wake_reconnect = asyncio.Event()
        self._synced = asyncio.Event()
        self._syncing = False
        self._held: dict[int, frames.Message] = {}
        self._closing = False
        self._ack_due = 0
        self._ack_sent = 0
        self._ack_task: asyncio.Task | None = None
        self._ping_nonce = 0
        self._ping_sent: dict[int, float] = {}
        self._key_fetched_at: dict[str, float] = {}
        self._pos = 0.0

    # -- files --------------------------------------------------------------------------------------
    @property
    def keystore_path(self) -> Path:
        return self.profile / "keystore.json"

    @property
    def history_path(self) -> Path:
        return self.profile / "history.sqlite3"

    async def _open_local(self, bundle: keystore.KeyBundle, passphrase: str, *, fresh: bool = False) -> None:
        """After the keystore opened (``fresh``: just made): trust store, history cache, cursor and
        counters, outbox."""
        had_trust_key = bool(bundle.trust_key) and not fresh
        bundle = bundle.complete()
        if bundle.upgrade:  # an older keystore: it gains its missing keys and the normalised passphrase form
            await asyncio.to_thread(keystore.save_bundle, self.keystore_path, bundle, passphrase, self.kdf)
        self.identity, self.retired = bundle.identity, bundle.retired
        self._passphrase = passphrase
        self._local_key = bundle.local_key
        self._bundle = bundle
        self._open_trust(bundle.trust_key, existed=had_trust_key)
        profiles.remember(self.profile, self.server_url)
        self.membership.load()  # the verified heads, kept in the trust store
        if self.history is None:
            missing = not self.history_path.exists() and self.trust.history_made
            self.history = await History.open(self.history_path, self._local_key)
            lost = ("was damaged and set aside as " + self.history.set_aside.name if self.history.set_aside
                    else "is missing" if missing else "")
            if lost:
                text = (f"Your message history on this machine ({self.history_path.name}) {lost}. Messages are "
                        "fetched again from the relay; those it no longer keeps cannot be shown again.")
                self.local_warnings.append(text)
                await self.events.put(LocalDataWarning(text))
            self.trust.history_made = True
        meta = await self.history.meta()
        legacy = self.profile / "state.json"
        if not meta and legacy.exists():  # cursor and counters of an older client
            doc = json.loads(legacy.read_text())
            meta = {"cursor": doc.get("cursor", 0), "counters": doc.get("counters", {})}
        self._state = _State(int(meta.get("cursor", 0)), dict(meta.get("counters", {})),
                             dict(meta.get("last_ctr", {})), dict(meta.get("missing", {})))
        self._seen = await self.history.seen()
        self._pos = max(float(self._state.cursor), await self.history.max_pos())
        for c in await self.history.conversations():
            self.titles[c["id"]] = c["title"]
            self.members[c["id"]] = c["members"]
            self.unread[c["id"]] = c["unread"]
            if not c["active"]:
                self.inactive.add(c["id"])
        for rec in await self.history.outbox():
            if rec.state == RecordState.SEALING:  # interrupted before the envelope existed: seal again
                rec.state, rec.envelope = RecordState.SENDING, None
            item = _Outgoing(rec, asyncio.Event(), asyncio.get_running_loop().create_future(), True)
            item.sealed.set()
            item.done.add_done_callback(_consume)
            self._outbox.append(item)
            if rec.mid:
                self._outgoing_by_mid[rec.mid] = item
        self._save_state()
        # sealed to keys this session has
        await self._retry_unreadable((ErrorCode.NOT_A_RECIPIENT, ErrorCode.UNWRAP_FAILED))

    def _meta(self) -> dict:
        s = self._state
        return {"cursor": s.cursor, "counters": s.counters, "last_ctr": s.last_ctr, "missing": s.missing}

    # -- REST -----------------------------------------------------------------------------------------
    @property
    def token(self) -> str | None:
        """The current access token (renewed by :attr:`session`)."""
        return self.session.access

    async def _request(self, method: str, path: str, body: dict | None = None, auth: bool = True) -> dict:
        try:
            resp = await self._http.request(method, path, json=body, auth=self.session if auth else None)
        except httpx2.HTTPError as exc:
            raise ClientError(transport.describe_failure(exc, self.server_url), code=ErrorCode.UNREACHABLE) from None
        try:
            data = resp.json()
        except ValueError:
            raise ClientError(f"relay answered {resp.status_code} without JSON", status=resp.status_code) from None
        if resp.status_code >= 400:
            err = data.get("error", {}) if isinstance(data, dict) else {}
            raise ClientError(err.get("message", "request failed"), code=err.get("code"), field=err.get("field"),
                              detail=err.get("detail"), status=resp.status_code)
        return data

    async def register(self, password: str, passphrase: str, bits: int = DEFAULT_RSA_BITS,
                       identity: Identity | None = None) -> Identity:
        """Generate keys (in a thread), save them encrypted, publish the public parts, log in.

        ``identity``: use these keys instead of generating new ones (tests, imports).

        Raises:
            ClientError: the relay refused (e.g. ``conflict`` if the name is taken).
            keystore.KeystoreError: empty passphrase.
        """
        if not passphrase:
            raise keystore.KeystoreError("a passphrase is required", field="passphrase")
        if identity is None:
            identity = await asyncio.to_thread(Identity.generate, self.username, bits)
        pub = identity.public.to_json()
        data = await self._request("POST", "/v1/accounts", {
            "username": self.username, "password": password, "wrap_key": pub["wrap_key"],
            "sign_key": pub["sign_key"]}, auth=False)
        if data.get("username") != self.username:  # the name is ours to decide, never the relay's
            raise KeyAnswerMismatch(f"the relay registered {str(data.get('username'))[:40]!r}, "
                                    f"not {self.username!r}", field="username")
        if self.profile.exists() and any(self.profile.iterdir()):
            aside = self.profile.with_name(f"{self.username}.replaced-{int(time.time())}")
            log.warning("a profile for %s existed; moved to %s", self.username, aside)
            self.profile.rename(aside)
        bundle = keystore.KeyBundle(identity, os.urandom(keystore.LOCAL_KEY_BYTES), (),
                                    os.urandom(keystore.LOCAL_KEY_BYTES))
        await asyncio.to_thread(keystore.save_bundle, self.keystore_path, bundle, passphrase, self.kdf)
        await self._open_local(bundle, passphrase, fresh=True)
        await self._login(password)
        return identity

    async def login(self, password: str, passphrase: str) -> Identity:
        """Open the keystore with ``passphrase`` (in a thread) and get a token.

        Raises:
            keystore.WrongPassphrase, keystore.KeystoreError, ClientError.
        """
        if not self.keystore_path.exists():  # name the profiles this user has instead
            raise profiles.missing_keystore(self.profile.parent.parent, self.server_url, self.username)
        bundle = await asyncio.to_thread(keystore.load_bundle, self.keystore_path, passphrase)
        await self._open_local(bundle, passphrase)
        await self._login(password)
        await self._finish_rotation()  # a rotation published before its keystore save failed
        return self.identity

    async def _login(self, password: str) -> None:
        self._password = password  # kept while the relay is unreachable: the session logs in when it returns
        data = await self._request("POST", "/v1/token", {"username": self.username, "password": password},
                                   auth=False)
        self.session.adopt(data)
        self._password = None  # the session's refresh credential keeps us logged in from here

    async def _reauth(self) -> None:
        """The relay refused our token: refresh the session once or, if it is over, log in with
        a password this client still holds (never one kept after a login succeeded)."""
        try:
            if await self.session.refresh_now(self._http):
                return
        except httpx2.HTTPError as exc:  # not a refusal: the supervisor retries with backoff
            raise ClientError(transport.describe_failure(exc, self.server_url), code=ErrorCode.UNREACHABLE) from None
        if not self._password:
            raise AuthFailed(f"the session ended ({self.session.ended or 'refused'}): log in again")
        await self._login(self._password)

    # -- conversations --------------------------------------------------------------------------------
    async def create_conversation(self, title: str, members: list[str]) -> str:
        """Create a conversation with ``members`` (I am added) from a signed creation statement
        (``client_tui.core.membership_ops.create``); returns its id. Every member's keys are fetched and
        pinned first, so a member without keys is named before anything is created.

        Raises:
            MemberWithoutKey, ClientError (``not_found`` for unknown users), StatementMalformed,
            InvalidRequest (a name that is not a valid username).
        """
        return await membership_ops.create(self.membership, title, members)

    async def refresh_conversations(self) -> dict[str, list[str]]:
        """Reload my conversations and verify each membership log that moved: ``{id: [members]}``."""
        return await membership_ops.refresh(self.membership)

    async def change_members(self, conversation: str, add: list[str] = (), remove: list[str] = ()) -> list[str]:
        """Add or remove members with signed statements; returns the members after.

        Raises:
            MemberWithoutKey, ClientError (``forbidden``, ``not_found``, ``policy_violation``),
            InvalidRequest (a name that is not a valid username).
        """
        return await membership_ops.change_members(self.membership, conversation, add, remove)

    def mark_read(self, conversation: str) -> None:
        """The user looked at ``conversation``: its unread count goes to 0."""
        if self.unread.get(conversation):
            self.unread[conversation] = 0
            if self.history is not None:
                self._spawn(self.history.set_unread(conversation, 0))

    # -- websocket ------------------------------------------------------------------------------------
    @property
    def ws_url(self) -> str:
        return self.server_url.replace("http", "ws", 1) + "/v1/ws"

    @property
    def online(self) -> bool:
        return self._ws is not None and self.state == ConnState.ONLINE

    async def _set_state(self, state: ConnState, detail: str = "", retry_in: float | None = None) -> None:
        self.state = state
        await self.events.put(ConnectionState(state, detail, retry_in))

    async def connect(self) -> None:
        """Open the websocket (token in the Authorization header), check the relay's level,
        start reading, sync everything after my cursor and send the outbox.

        Raises:
            DowngradeRefused: the relay announced a level below 4.
            AuthFailed: the relay refused the token.
            ClientError: anything else went wrong (``unreachable``).
        """
        if (self.token is None or self.session.ended) and self._password:  # started while the relay was down
            await self._login(self._password)
        try:  # no session at all: the relay refuses the upgrade (403), or does not answer (offline)
            token = await self.session.fresh_access(self._http) if self.token is not None else "none"
        except httpx2.HTTPError as exc:
            raise ClientError(transport.describe_failure(exc, self.server_url), code=ErrorCode.UNREACHABLE) from None
        await self._set_state(ConnState.CONNECTING, self.server_url)
        try:
            ws = await connect(
                self.ws_url, additional_headers={"Authorization": f"Bearer {token}"},
                compression=None, max_size=2 * 1024 * 1024, open_timeout=10,
                ssl=self._tls if self.ws_url.startswith("wss:") else None,
            )
        except InvalidStatus as exc:
            status = exc.response.status_code
            if status in (401, 403):
                raise AuthFailed(f"the relay refused the token (HTTP {status})") from None
            raise ClientError(f"websocket refused with HTTP {status}", code=ErrorCode.UNREACHABLE,
                              status=status) from None
        except (OSError, InvalidHandshake, TimeoutError) as exc:
            raise ClientError(transport.describe_failure(exc, self.ws_url), code=ErrorCode.UNREACHABLE) from None
        try:
            hello = frames.decode_relay_frame(await ws.recv())
            if not isinstance(hello, frames.Hello):
                raise ClientError("relay did not start with hello", code=ErrorCode.PROTOCOL)
            if hello.level < REQUIRED_LEVEL:
                raise DowngradeRefused(f"relay runs level {hello.level}; this client requires {REQUIRED_LEVEL}")
            ready = frames.decode_relay_frame(await ws.recv())
            if isinstance(ready, frames.Error):
                raise AuthFailed(ready.message, field=ready.field)
            if not isinstance(ready, frames.Ready):
                raise ClientError("relay did not send ready", code=ErrorCode.PROTOCOL)
        except ConnectionClosed as exc:
            code = exc.rcvd.code if exc.rcvd else None
            if code == CLOSE_AUTH:
                raise AuthFailed("the relay refused the token") from None
            raise ClientError(f"relay closed the connection ({code})", code=ErrorCode.UNREACHABLE) from None
        except BaseException:
            await ws.close()
            raise
        self.hello = hello
        self._ws = ws
        self.session.on_ready(ready.expires_in)
        self._spawn(self.session.keep_connection(self._http, lambda t: self._send_frame(frames.Auth(token=t)),
                                                 lambda: self._ws is ws))
        self._synced.clear()
        self._syncing, self._held = True, {}  # live messages wait until the sync caught up (seq order)
        self._ack_sent = 0
        self._reader = asyncio.create_task(self._read_loop(ws), name=f"ws-reader-{self.username}")
        await self._set_state(ConnState.ONLINE, self.server_url)
        await self._send_frame(frames.Sync(after=self._state.cursor))
        self._spawn(self._ping_loop(ws))
        self._spawn(self._outbox_loop(ws))

    async def wait_synced(self, timeout: float = 30) -> None:
        """Wait until the sync started by :meth:`connect` delivered its last page."""
        await asyncio.wait_for(self._synced.wait(), timeout)

    async def _send_frame(self, frame) -> None:
        ws = self._ws
        if ws is None:
            raise ClientError("not connected", code=ErrorCode.OFFLINE)
        try:
            await ws.send(frames.encode(frame).decode())
        except ConnectionClosed:
            # The socket is gone; the reader cleans up when it next runs. Nobody may use it before
            # that: a loop retrying on it would never yield to the reader.
            if self._ws is ws:
                self._ws = None
            raise ClientError("not connected", code=ErrorCode.OFFLINE) from None

    def start(self) -> asyncio.Task:
        """Stay connected in the background: connect, and reconnect with exponential backoff
        and jitter after any loss, until :meth:`close`. A refused login ends it (state
        ``refused``) after one fresh login attempt; so does a relay below level 4.

        Returns:
            the supervisor task (done when the session gave up or the client closed).
        """
        if self._supervisor is None or self._supervisor.done():
            self._closing = False
            self._supervisor = asyncio.create_task(self._supervise(), name=f"session-{self.username}")
        return self._supervisor

    def reconnect_now(self) -> None:
        """Skip the current backoff wait; start the session again if it had stopped (refused)."""
        self._wake_reconnect.set()
        if self._supervisor is not None and self._supervisor.done() and not self._closing:
            self.start()

    async def _supervise(self) -> None:
        attempt = 0
        relogged = False
        auth_closes = 0
        while not self._closing:
            try:
                if self._ws is None:  # (a connection opened by connect() before start() is adopted)
                    await self.connect()
            except DowngradeRefused as exc:
                await self._set_state(ConnState.REFUSED, exc.message)
                return
            except AuthFailed as exc:
                if relogged:
                    await self._set_state(ConnState.REFUSED, f"login refused: {exc.message}")
                    return
                relogged = True
                try:
                    await self._reauth()
                except (ClientError, AuthFailed) as login_exc:
                    if isinstance(login_exc, AuthFailed) or login_exc.status in (401, 403):
                        await self._set_state(ConnState.REFUSED, f"login refused: {login_exc.message}")
                        return
                continue
            except (ClientError, OSError) as exc:
                if getattr(exc, "status", None) in (401, 403):  # the password itself was refused
                    return await self._set_state(ConnState.REFUSED, f"login refused: {exc.message}")
                delay = self._delay(attempt)
                attempt += 1
                await self._set_state(ConnState.OFFLINE, getattr(exc, "message", str(exc)), retry_in=delay)
                await self._wait(delay)
                continue
            relogged = False
            started = time.monotonic()
            reader = self._reader
            assert reader is not None
            try:
                await asyncio.shield(reader)
            except asyncio.CancelledError:
                # The reader ending cancelled is a lost connection like any other; this task being
                # cancelled (the event loop shutting down, a caller giving up) ends the session. A
                # session that swallowed its own cancellation reconnected forever, and the loop's
                # shutdown waited for it forever.
                if asyncio.current_task().cancelling():
                    raise
            if self._closing:
                return
            code, reason = self.last_close
            if code in (CLOSE_AUTH, CLOSE_SESSION_ENDED):  # token or session refused: one refresh, never a loop
                auth_closes += 1
                if auth_closes > 1:
                    await self._set_state(ConnState.REFUSED, f"the relay refused the session: {reason}".strip(": "))
                    return
                try:
                    await self._reauth()
                except (ClientError, AuthFailed) as exc:
                    if isinstance(exc, AuthFailed) or exc.status in (401, 403):
                        await self._set_state(ConnState.REFUSED, f"login refused: {exc.message}")
                        return
                continue
            auth_closes = 0
            if time.monotonic() - started > 10:
                attempt = 0
            delay = 0.05 if code == CLOSE_SLOW and attempt == 0 else self._delay(attempt)
            attempt += 1
            detail = f"{code or ''} {reason}".strip() or "connection lost"
            await self._set_state(ConnState.OFFLINE, detail, retry_in=delay)
            await self._wait(delay)

    def _delay(self, attempt: int) -> float:
        """Exponential backoff with jitter: half fixed, half random ("equal jitter")."""
        first, most = self.backoff
        d = min(most, first * (2 ** min(attempt, 16)))
        return d / 2 + random.uniform(0, d / 2)

    async def _wait(self, delay: float) -> None:
        self._wake_reconnect.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake_reconnect.wait(), delay)

    async def close(self) -> None:
        """Stop the session, close the websocket and the HTTP client; save contacts; close the cache."""
        self._closing = True
        self._wake_reconnect.set()
        if self._supervisor is not None:
            self._supervisor.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._supervisor
        await self._flush_ack()  # what was shown is acknowledged before the socket goes
        if self._ws is not None:
            with contextlib.suppress(Exception):
                await self._ws.close()
        if self._reader is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader
        for t in list(self._tasks):
            t.cancel()
        for t in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        await self._http.aclose()
        if self.identity is not None:
            self._save_state()
        if self.history is not None:
            await self.history.close()
            self.history = None

    def _spawn(self, coro) -> asyncio.Task:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            exc = task.exception()
            log.warning("background task failed: %s: %s", type(exc).__name__, getattr(exc, "message", exc))

    async def _read_loop(self, ws: ClientConnection) -> None:
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
        except SenderKeyUnavailable as exc:
            log.warning("%s; reconnecting to receive the message again", exc)
            with contextlib.suppress(Exception):
                await ws.close()
        finally:
            if self._ws is ws:
                self._ws = None
            for fut in self._pending.values():
                if not fut.done():
                    fut.set_exception(ClientError("connection closed before the relay stored it",
                                                  code=ErrorCode.OFFLINE))
            self._pending.clear()
            self._outbox_wake.set()
            code = ws.close_code
            self.last_close = (code, ws.close_reason or "")
            detail = f"{code} {ws.close_reason}".strip() if code else ""
            if code == CLOSE_AUTH:
                log.warning("relay refused the session (1008): %s", ws.close_reason)
            await self._set_state(ConnState.OFFLINE, detail)

    async def _on_frame(self, frame) -> None:
        if isinstance(frame, frames.Message):
            if self._syncing:
                # Until the sync caught up, live fan-out and sync pages interleave: a live message
                # can overtake older ones still to come in a page. Held here, everything is opened
                # in seq order, so the cursor never passes a message that was not processed.
                self._held.setdefault(frame.seq, frame)
            else:
                await self._on_message(frame)
        elif isinstance(frame, frames.Stored):
            item = self._outgoing_by_mid.get(frame.mid)
            if item is not None:  # recorded before the next frame (a receipt) is read
                await self._mark_stored(item, frame.seq)
            fut = self._pending.pop(frame.mid, None)
            if fut is not None and not fut.done():
                fut.set_result(frame.seq)
            await self.events.put(MessageStored(frame.mid, frame.seq, frame.conversation))
        elif isinstance(frame, frames.Synced):
            await self._release_held(frame.cursor if frame.more else None)
            if self.history is not None:
                await self.history.set_meta(**self._meta())
            if frame.more:
                await self._send_frame(frames.Sync(after=frame.cursor))
            else:
                self._syncing = False
                await self._release_held(None)  # live ones that came in during the last page's work
                self._synced.set()
                await self._report_gaps()
        elif isinstance(frame, frames.Delivered):
            await self._on_delivered(frame)
        elif isinstance(frame, frames.Ready):  # the answer to an in-band renewal: the new lifetime
            self.session.on_ready(frame.expires_in)
        elif isinstance(frame, frames.Pong):
            sent = self._ping_sent.pop(frame.nonce, None)
            if sent is not None:
                self.rtt_ms = (time.perf_counter() - sent) * 1000
                await self.events.put(RttMeasured(self.rtt_ms))
        elif isinstance(frame, frames.Event):
            if frame.kind == "key_changed" and frame.user == self.username:
                await self._own_keys_changed()  # before the messages that follow: they may be sealed to new keys
            elif frame.kind == "key_changed" and frame.user:
                with contextlib.suppress(E2EEError):  # judged before the messages that follow the event
                    await self.fetch_keys(frame.user)
            elif frame.kind == "members_changed":
                self._spawn(self.refresh_conversations())
        elif isinstance(frame, frames.Error):
            fut = self._pending.pop(frame.ref, None) if frame.ref else None
            err = ClientError(frame.message, code=frame.code, field=frame.field, detail=frame.detail)
            if fut is not None and not fut.done():
                fut.set_exception(err)
            else:
                log.warning("relay error %s: %s", frame.code, frame.message)

    async def _release_held(self, upto: int | None) -> None:
        """Open held messages in seq order: those up to ``upto`` (a sync page is complete up to its
        cursor), or all of them (``None``: the sync caught up)."""
        for seq in sorted(self._held):
            if upto is not None and seq > upto:
                break
            await self._on_message(self._held.pop(seq))

    async def _ping_loop(self, ws: ClientConnection) -> None:
        while self._ws is ws:
            self._ping_nonce += 1
            self._ping_sent = {self._ping_nonce: time.perf_counter()}
            with contextlib.suppress(ClientError):
                await self._send_frame(frames.Ping(self._ping_nonce))
            await asyncio.sleep(PING_EVERY_S)

    async def ping(self) -> float:
        """Round trip over the websocket in ms (websocket ping/pong)."""
        assert self._ws is not None
        t0 = time.perf_counter()
        await (await self._ws.ping())
        return (time.perf_counter() - t0) * 1000

    # -- receiving ------------------------------------------------------------------------------------
    def _my_identity_for(self, rkids: list[str]) -> Identity:
        assert self.identity is not None
        for ident in self._my_identities():
            if ident.wrap_kid in rkids:
                return ident
        return self.identity  # open() names the error: not_a_recipient

    async def _sender_key(self, user: str, skid: str, seq: int | None = None):
        """The key that verifies ``user``'s envelope signed with ``skid`` (stored at ``seq``), and a
        warning (see :meth:`pinned_sign_key`); an unknown key id fetches ``user``'s keys once."""
        for attempt in (1, 2):
            found = self.pinned_sign_key(user, skid, seq)
            if found is not None:
                return found
            fetched = self._key_fetched_at.get(user)
            if attempt == 2 or (fetched is not None and time.monotonic() - fetched < KEY_REFETCH_S):
                break
            try:
                await self.fetch_keys(user)
            except ClientError as exc:
                if exc.code == ErrorCode.UNREACHABLE:  # no answer about the key at all: do not judge the message
                    raise SenderKeyUnavailable(user) from exc
                log.info("could not fetch %s's keys: %s", user, exc.code)
                break
        raise UnknownSenderKey(f"{user}'s signing key {skid[:8]}… is not a key pinned for them", field="skid")

    async def _on_message(self, frame: frames.Message) -> None:
        assert self.identity is not None
        raw = bytes(frame.envelope)
        max_bytes = self.hello.max_envelope if self.hello else envelope.DEFAULT_MAX_ENVELOPE_BYTES
        parsed = None
        try:
            parsed = envelope.parse(raw, max_bytes=max_bytes)
            h = parsed.header
            key = (h.snd, h.mid)
            own = self._outgoing_by_mid.get(h.mid) if h.snd == self.username else None
            if own is not None:  # my own message, back through sync: its ack may have been lost
                await self._mark_stored(own, frame.seq)
                return await self._advance(frame.seq)
            if key in self._seen:
                log.info("duplicate message seq=%d from %s dropped (mid already shown)", frame.seq, h.snd)
                return await self._advance(frame.seq)
            self._seen.add(key)  # claimed now: a copy arriving while this one is opened is a duplicate
            if frame.conversation not in self.members:
                self._spawn(self.refresh_conversations())
            try:
                removed = await self.membership.check_envelope(h, frame.conversation, frame.sender, parsed)
                sign_key, warning = await self._sender_key(h.snd, h.skid, frame.seq)
                warning = removed or warning  # sealed before someone was removed: never plain ✔
                me = self._my_identity_for(h.rkids)
                opened, timings = await asyncio.to_thread(
                    measure.open_, parsed, me, sign_key, conversation=frame.conversation, sender=frame.sender)
            except BaseException:
                self._seen.discard(key)  # not verified: it must not suppress the real message
                raise
        except E2EEError as exc:
            return await self._on_unreadable(frame, raw, parsed, exc)
        mine = h.snd == self.username
        if mine:
            self._state.counters[h.cid] = max(self._state.counters.get(h.cid, 0), h.ctr)
        rec = Record(
            secrets.token_hex(8), h.cid, h.snd, opened.text, h.mid, frame.seq, float(frame.seq), h.ts, h.ctr,
            RecordState.STORED if mine else RecordState.RECEIVED, envelope=raw,
            info={"timings": timings, "skid": h.skid, "rkids": list(h.rkids), "warning": warning, "mine": mine,
                  "wrap_kid": me.wrap_kid},
        )
        gap = None if mine else self._track_counter(h.cid, h.snd, h.ctr)
        self._advance_cursor(frame.seq)
        if not mine:
            self.unread[h.cid] = self.unread.get(h.cid, 0) + 1
        if self.history is not None:
            await self.history.put(rec, self._meta())
            if not mine:
                await self.history.set_unread(h.cid, self.unread[h.cid])
        await self.events.put(MessageReceived(
            frame.seq, h.cid, h.snd, opened.text, h.mid, h.ts, h.ctr, raw, timings, warning))
        await self.events.put(RecordChanged(rec, new=True))
        if gap:
            await self.events.put(GapDetected(h.cid, h.snd, gap))
        if not mine:
            self._schedule_ack(frame.seq)

    async def _on_unreadable(self, frame: frames.Message, raw: bytes, parsed, exc: E2EEError) -> None:
        log.warning("message seq=%d from %s in %s could not be verified: %s (%s)", frame.seq, frame.sender,
                    frame.conversation, exc.code, exc.message)
        claimed = parsed.header.mid if parsed is not None else None
        rec = Record(secrets.token_hex(8), frame.conversation, frame.sender, None, None, frame.seq,
                     float(frame.seq), now_ms(), None, RecordState.UNREADABLE, exc.code, exc.message, raw,
                     {"claimed_mid": claimed, "field": exc.field})
        self._advance_cursor(frame.seq)
        if self.history is not None:
            await self.history.put(rec, self._meta())
        await self.events.put(MessageUnreadable(frame.seq, frame.conversation, frame.sender, exc.code, exc.message))
        await self.events.put(RecordChanged(rec, new=True))
        self._schedule_ack(frame.seq)

    def _track_counter(self, conversation: str, sender: str, ctr: int) -> tuple[int, ...] | None:
        """Update the sender's counter; return the counters it newly skipped (a gap), if any.

        A late message fills its place in the gap. Messages of one sender can arrive out of order
        when its sends were pipelined (the relay may store them in another order), so a gap is a
        fact to show only if it stays open: see :meth:`missing_counters`.
        """
        k = f"{conversation}\x00{sender}"
        last = self._state.last_ctr.get(k)
        missing = self._state.missing.get(k, [])
        if ctr in missing:
            missing.remove(ctr)
        new: tuple[int, ...] | None = None
        if last is None or ctr <= last:
            self._state.last_ctr[k] = max(ctr, last or 0)
        else:
            self._state.last_ctr[k] = ctr
            if ctr > last + 1:
                new = tuple(range(max(last + 1, ctr - 1000), ctr))
                missing = sorted(set(missing) | set(new))[-1000:]
                log.warning("gap: %s skipped counters %d..%d in %s", sender, last + 1, ctr - 1, conversation)
        if missing:
            self._state.missing[k] = missing
        else:
            self._state.missing.pop(k, None)
        return new

    def missing_counters(self, conversation: str) -> dict[str, tuple[int, ...]]:
        """Counters of each sender in ``conversation`` that never arrived (so far)."""
        prefix = f"{conversation}\x00"
        return {k[len(prefix):]: tuple(v) for k, v in self._state.missing.items() if k.startswith(prefix) and v}

    async def _report_gaps(self) -> None:
        """At the end of a sync: every gap still open, as :class:`GapDetected`."""
        for k, missing in list(self._state.missing.items()):
            if missing:
                conv, sender = k.split("\x00", 1)
                await self.events.put(GapDetected(conv, sender, tuple(missing)))

    def _advance_cursor(self, seq: int) -> None:
        if seq > self._state.cursor:
            self._state.cursor = seq

    async def _advance(self, seq: int) -> None:
        self._advance_cursor(seq)
        if self.history is not None:
            await self.history.set_meta(cursor=self._state.cursor)
        self._schedule_ack(seq)

    def _schedule_ack(self, seq: int) -> None:
        """Acknowledge up to ``seq`` soon (one ack frame for a burst of messages)."""
        self._ack_due = max(self._ack_due, seq)
        if self._ack_task is None or self._ack_task.done():
            self._ack_task = self._spawn(self._ack_later())

    async def _ack_later(self) -> None:
        await asyncio.sleep(ACK_DELAY_S)
        await self._flush_ack()

    async def _flush_ack(self) -> None:
        if self._ack_due > self._ack_sent and self._ws is not None:
            seq = self._ack_due
            with contextlib.suppress(ClientError):
                await self._send_frame(frames.Ack(seq))
                self._ack_sent = seq

    async def _on_delivered(self, frame: frames.Delivered) -> None:
        await self.events.put(Delivered(frame.seq, frame.user))
        if frame.user == self.username:
            return
        rec = self._mine_by_seq.get(frame.seq)
        if rec is None and self.history is not None:
            rec = await self.history.by_seq(frame.seq)
            if rec is None or not rec.mine:
                return
            self._mine_by_seq[frame.seq] = rec
        if rec is None:
            return
        to = rec.info.setdefault("delivered_to", [])
        if frame.user in to:
            return
        to.append(frame.user)
        others = [u for u in rec.info.get("recipients", []) if u != self.username]
        if others and set(others) <= set(to):
            rec.state = RecordState.DELIVERED
        if self.history is not None:
            await self.history.put(rec)
        await self.events.put(RecordChanged(rec))

    # -- sending --------------------------------------------------------------------------------------
    async def _fetch_for_send(self, user: str) -> PublicIdentity:
        try:
            return await self.fetch_keys(user)
        except ClientError as exc:
            if exc.code == ErrorCode.NOT_FOUND and exc.field != "username":
                raise MemberWithoutKey(f"{user} has published no key: nobody can write to them yet",
                                       field=user) from None
            raise

    async def recipients_for(self, conversation: str) -> Audience:
        """Whom to seal to: the newest verified epoch of the conversation's membership log and
        its members' keys as the log binds them (``Membership.audience``).

        Raises:
            KeyChangeBlocked: a member's key changed and was not accepted yet.
            MembershipWithheld, LegacyConversation, ClientError (not a member).
        """
        return await self.membership.audience(conversation)

    def _next_pos(self) -> float:
        self._pos = max(self._pos, float(self._state.cursor)) + 0.001
        return self._pos

    async def queue_text(self, conversation: str, text: str, *, hold: bool = True) -> Record:
        """Seal ``text`` for every member and put it in the outbox; returns its record
        (state ``sending``). The outbox sends it as soon as the relay is reachable, in order, and
        re-sends after a reconnect (same envelope: the relay stores it once).

        With ``hold`` the message waits when the relay asks to (``rate_limited``: sent again
        after ``retry_after``) and a key change found only on sending (the relay says the keys
        are not the members' current ones) keeps it ``blocked`` until the user decides; without
        ``hold`` both fail it (and :meth:`send_text` raises).

        Raises:
            EnvelopeTooLarge (before any crypto), KeyChangeBlocked, MemberWithoutKey, ClientError.
        """
        return (await self._queue(conversation, text, hold)).record

    async def _queue(self, conversation: str, text: str, hold: bool) -> _Outgoing:
        assert self.identity is not None
        max_bytes = self.hello.max_envelope if self.hello else envelope.DEFAULT_MAX_ENVELOPE_BYTES
        size = len(text.encode("utf-8", "surrogatepass"))
        if size * 4 // 3 > max_bytes:
            raise EnvelopeTooLarge(f"message is {size} bytes; the relay accepts envelopes up to {max_bytes} bytes "
                                   f"(about {max_bytes * 3 // 4 - 1024} bytes of text)", field="text")
        recipients = await self.recipients_for(conversation)
        counter = self._state.counters.get(conversation, 0) + 1
        self._state.counters[conversation] = counter
        rec = Record(secrets.token_hex(8), conversation, self.username, text, None, None, self._next_pos(),
                     now_ms(), counter, RecordState.SEALING, info={"mine": True})
        item = _Outgoing(rec, asyncio.Event(), asyncio.get_running_loop().create_future(), hold)
        item.done.add_done_callback(_consume)
        self._outbox.append(item)
        try:
            await self._seal(item, recipients)
        except BaseException:
            self._outbox.remove(item)
            if self._state.counters.get(conversation) == counter:
                self._state.counters[conversation] = counter - 1
            raise
        if self.history is not None:
            await self.history.put(rec, {"counters": self._state.counters})
        await self.events.put(RecordChanged(rec, new=True))
        self._outbox_wake.set()
        return item

    async def _seal(self, item: _Outgoing, audience: Audience) -> None:
        assert self.identity is not None
        rec = item.record
        audience.admit(rec)  # AudienceGrew: members joined since it was written
        max_bytes = self.hello.max_envelope if self.hello else envelope.DEFAULT_MAX_ENVELOPE_BYTES
        max_recipients = self.hello.max_recipients if self.hello else envelope.DEFAULT_MAX_RECIPIENTS
        data, timings = await asyncio.to_thread(
            measure.seal, rec.text or "", self.identity, rec.conversation, audience.recipients, counter=rec.ctr or 1,
            epoch=audience.epoch, head=audience.head, max_bytes=max_bytes, max_recipients=max_recipients)
        header = envelope.parse(data, max_bytes=max_bytes, max_recipients=max_recipients).header
        if rec.mid:
            self._outgoing_by_mid.pop(rec.mid, None)
        rec.mid, rec.envelope, rec.ts, rec.state = header.mid, data, header.ts, RecordState.SENDING
        rec.info.update({"timings": timings, "skid": header.skid, "rkids": list(header.rkids),
                         "recipients": list(audience.members), "warning": ""})
        self._seen.add((self.username, header.mid))
        self._outgoing_by_mid[header.mid] = item
        item.sealed.set()

    async def send_text(self, conversation: str, text: str, timeout: float = SEND_TIMEOUT_S) -> Sent:
        """Seal ``text`` for every member and send it; return its ``mid`` and ``seq`` once stored.

        A relay answer ``recipients_mismatch`` (members or keys changed) makes the client reload
        the members and their keys and seal again (same counter).

        Raises:
            EnvelopeTooLarge, KeyChangeBlocked, MemberWithoutKey, ClientError (relay error codes;
            ``offline`` when neither connected nor reconnecting), TimeoutError.
        """
        if self._ws is None and (self._supervisor is None or self._supervisor.done()):
            raise ClientError("not connected", code=ErrorCode.OFFLINE)
        item = await self._queue(conversation, text, hold=False)
        try:
            return await asyncio.wait_for(asyncio.shield(item.done), timeout)
        except TimeoutError:
            await self._fail(item, ClientError("not stored in time", code=ErrorCode.TIMEOUT))
            raise

    async def retry(self, lid: str) -> None:
        """Send a ``failed`` message of mine again (sealed anew, with a new counter)."""
        if self.history is None:
            return
        rec = await self.history.by_lid(lid)
        if rec is None or rec.state != RecordState.FAILED or not rec.mine or rec.text is None:
            return
        new = await self.queue_text(rec.conversation, rec.text)
        rec.state, rec.detail = RecordState.FAILED, f"sent again as a new message ({new.lid})"
        rec.info["retried_as"] = new.lid
        await self.history.put(rec)
        await self.events.put(RecordChanged(rec))

    async def _outbox_loop(self, ws: ClientConnection) -> None:
        """Send the outbox in order while ``ws`` is the live connection; one message in flight."""
        while self._ws is ws:
            item = self._next_outgoing()
            if item is None:
                self._outbox_wake.clear()
                if self._next_outgoing() is None:
                    await self._outbox_wake.wait()
                continue
            if not item.sealed.is_set():
                await item.sealed.wait()
                continue
            if not await self._transmit(item):
                return  # the connection is gone: the next session sends it

    def _next_outgoing(self) -> _Outgoing | None:
        held: set[str] = set()
        for item in self._outbox:
            conv = item.record.conversation
            if conv in held:
                continue
            if item.record.state == RecordState.BLOCKED:
                held.add(conv)
                continue
            if item.record.state in (RecordState.SEALING, RecordState.SENDING):
                return item
        return None

    async def _transmit(self, item: _Outgoing) -> bool:
        """Send one message and wait for the relay's answer; False if the connection is gone."""
        rec = item.record
        if rec.envelope is None:  # re-seal after a restart in the middle of sealing
            try:
                await self._seal(item, await self.recipients_for(rec.conversation))
            except KeyChangeBlocked as exc:
                await self._block(item, exc)
                return True
            except ClientError as exc:
                if exc.code in NOT_ANSWERED:
                    return False
                await self._fail(item, exc)
                return True
            except E2EEError as exc:
                await self._fail(item, exc)
                return True
        assert rec.mid is not None and rec.envelope is not None
        fut: asyncio.Future = asyncio.get_running_loop().create_future()
        self._pending[rec.mid] = fut
        try:
            await self._send_frame(frames.Send(rec.conversation, msgspec.Raw(rec.envelope)))
            seq = await asyncio.wait_for(asyncio.shield(fut), SEND_TIMEOUT_S)
        except TimeoutError:
            log.warning("no answer to send %s in %.0f s: reconnecting", rec.mid, SEND_TIMEOUT_S)
            self._pending.pop(rec.mid, None)
            if self._ws is not None:
                await self._ws.close(CLOSE_GOING_AWAY, "no answer")
            return False
        except ClientError as exc:
            self._pending.pop(rec.mid, None)
            if exc.code == ErrorCode.OFFLINE:
                return False  # sent again after the reconnect
            if exc.code == ErrorCode.RATE_LIMITED and item.hold:
                await asyncio.sleep(float((exc.detail or {}).get("retry_after", 1.0)))
            elif exc.code in (ErrorCode.RECIPIENTS_MISMATCH, ErrorCode.EPOCH_STALE) and item.reseals < MAX_RESEALS:
                await self._reseal(item, exc)
            else:
                await self._fail(item, exc)
            return True
        await self._mark_stored(item, seq)
        return True

    async def _reseal(self, item: _Outgoing, exc: ClientError) -> None:
        item.reseals += 1
        rec = item.record
        try:
            await self.refresh_conversations()
            for user in (exc.detail or {}).get("missing", []):
                with contextlib.suppress(ClientError):
                    await self.fetch_keys(user)
            recipients = await self.recipients_for(rec.conversation)
            await self._seal(item, recipients)
        except KeyChangeBlocked as blocked:
            return await self._block(item, blocked)
        except ClientError as err:
            if err.code in NOT_ANSWERED:
                return  # still "sending": tried again on the next connection
            return await self._fail(item, err)
        except E2EEError as err:
            return await self._fail(item, err)
        if self.history is not None:
            await self.history.put(rec)
        await self.events.put(RecordChanged(rec))

    async def _block(self, item: _Outgoing, exc: KeyChangeBlocked) -> None:
        if not item.hold:
            return await self._fail(item, exc)
        item.record.state, item.record.reason, item.record.detail = RecordState.BLOCKED, exc.code, exc.message
        if self.history is not None:
            await self.history.put(item.record)
        await self.events.put(RecordChanged(item.record))

    async def _unblock(self) -> None:
        for item in list(self._outbox):
            rec = item.record
            if rec.state != RecordState.BLOCKED or self.blocked_by(rec.conversation):
                continue
            try:
                await self._seal(item, await self.recipients_for(rec.conversation))
            except KeyChangeBlocked:
                continue
            except E2EEError as exc:
                await self._fail(item, exc)
                continue
            rec.reason = rec.detail = ""
            if self.history is not None:
                await self.history.put(rec)
            await self.events.put(RecordChanged(rec))
        self._outbox_wake.set()

    async def _fail(self, item: _Outgoing, exc: E2EEError) -> None:
        rec = item.record
        log.warning("message %s to %s not sent: %s (%s)", rec.mid, rec.conversation, exc.code, exc.message)
        rec.state, rec.reason, rec.detail = RecordState.FAILED, exc.code, exc.message
        if item in self._outbox:
            self._outbox.remove(item)
        if rec.mid:
            self._outgoing_by_mid.pop(rec.mid, None)
        if rec.ctr is not None and self._state.counters.get(rec.conversation) == rec.ctr:
            self._state.counters[rec.conversation] = rec.ctr - 1  # no gap for the others
        if self.history is not None:
            await self.history.put(rec, {"counters": self._state.counters})
        await self.events.put(RecordChanged(rec))
        if not item.done.done():
            item.done.set_exception(exc)
        self._outbox_wake.set()

    async def _mark_stored(self, item: _Outgoing, seq: int) -> None:
        rec = item.record
        if rec.state in (RecordState.STORED, RecordState.DELIVERED):
            return
        rec.state, rec.seq, rec.pos, rec.reason, rec.detail = RecordState.STORED, seq, float(seq), "", ""
        if item in self._outbox:
            self._outbox.remove(item)
        self._mine_by_seq[seq] = rec
        if self.history is not None:
            await self.history.put(rec)
        await self.events.put(RecordChanged(rec))
        if not item.done.done():
            item.done.set_result(Sent(rec.mid or "", seq))
        self._outbox_wake.set()

    @property
    def outbox(self) -> list[Record]:
        """My messages waiting to be stored by the relay (sealing, sending or blocked), in order."""
        return [i.record for i in self._outbox]

    async def load_history(self, conversation: str, limit: int = 200, before: float | None = None) -> list[Record]:
        """Records of ``conversation`` from the local cache (no RSA work), oldest first."""
        if self.history is None:
            return []
        return await self.history.recent(conversation, limit, before)


def _consume(fut: asyncio.Future) -> None:
    """Retrieve an outbox future's exception so that nobody waiting on it is not an error."""
    if not fut.cancelled():
        fut.exception()

