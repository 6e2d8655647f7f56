"""Headless client core (asyncio): one account on one relay, as a small facade over its parts.

Used by the Textual app, ``e2ee-chat send/tail``, the demo and the bench. Every RSA private-key
operation, key generation, Argon2id and SQLite call runs in a worker thread, so an event loop that
drives a UI is never blocked by crypto or disk. The client reaches the relay only over the wire.

The parts (docs/ARCHITECTURE.md draws them): :mod:`~client_tui.core.rest` (REST, tokens renewed
by :mod:`~client_tui.core.tokens`), :mod:`~client_tui.core.account` (register, log in, open what
is kept here), :mod:`~client_tui.core.connection` (connect, reconnect with backoff) over
:mod:`~client_tui.core.link` (one websocket around :class:`shared.session.ClientProtocol`),
:mod:`~client_tui.core.inbox` (open, dedup, counters, acks), :mod:`~client_tui.core.outbox`
(seal, send, the relay's answers), :mod:`~client_tui.core.contacts` and
:mod:`~client_tui.core.rotate` (key decisions, own key rotation), :mod:`~client_tui.core.membership`
(who is in each conversation), :mod:`~client_tui.core.history` (the local cache) and
:mod:`~client_tui.core.events` (what :attr:`ChatClient.events` carries).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import platformdirs

from shared import envelope, frames
from shared.errors import ErrorCode
from shared.keys import DEFAULT_RSA_BITS, Identity
from shared.names import canonical_username
from shared.session import (
    ClientEvent,
    Closed,
    Opened,
    RelayError,
    RenewalDue,
    Renewed,
    RoundTrip,
    SendRefused,
    SyncProgress,
)

from .. import session_socket
from . import account, keystore, membership_ops, profiles, transport
from .attachments import Attachments
from .connection import Connection
from .epochs import KeySchedule
from .errors import ClientError
from .events import ConnectionState, ConnState, Event, RttMeasured, Sent
from .expiry import Expiry
from .history import History
from .inbox import Inbox, Progress
from .link import REQUIRED_LEVEL
from .membership import Audience, Membership
from .messaging import Messaging
from .outbox import SEND_TIMEOUT_S, Outbox
from .pending import Pending
from .receipts import Receipts
from .record import Record
from .rest import Rest
from .rotate import Rotation
from .tokens import RelaySession
from .transparency import Transparency
from .trust import Contact

__all__ = ["ChatClient", "default_profile_root"]

log = logging.getLogger("e2ee.client")


def default_profile_root() -> Path:
    """The platform's user data folder for e2ee-chat (platformdirs)."""
    return Path(platformdirs.user_data_dir("e2ee-chat", appauthor=False))


class ChatClient(Rotation):
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
        relay_level: the level the relay must report (``GET /healthz``) before this client registers
            or logs in; 4, the product's. Only the demonstrations of levels 1-3 (``e2ee-demo``, the
            bench, their tests) pass a lower one, to make the accounts a
            :class:`client_tui.levels.LevelClient` then uses: the websocket still refuses any level but 4.
        key_lifetime_days: my keys are replaced when older than this (a scheduled rotation,
            ``client_tui.core.epochs``); 0: never on a schedule. ``retired_grace_hours``: a replaced
            key's private half is kept at least this long, and until the relay holds nothing
            undelivered sealed to it. ``wall_clock``: ms since the Unix epoch (tests inject one).
    """

    def __init__(
        self,
        server_url: str,
        username: str,
        profile_root: Path | None = None,
        kdf: dict | None = None,
        backoff: tuple[float, float] = (0.5, 30.0),
        cafile: str | None = None,
        clock=time.monotonic,
        relay_level: int = REQUIRED_LEVEL,
        key_lifetime_days: float = 7.0,
        retired_grace_hours: float = 48.0,
        wall_clock: Callable[[], int] = keystore.now_ms,
    ) -> None:
        self.server_url = profiles.normalize_url(server_url)  # InvalidRequest for what is not an address
        self.username = canonical_username(username)  # InvalidRequest for a name the relay would refuse
        self.profile = profiles.profile_dir(profile_root or default_profile_root(), server_url, self.username)
        self.cafile = transport.cafile_from(cafile)
        self.tls = transport.ssl_context(self.cafile)
        self.kdf = kdf
        self.identity: Identity | None = None
        self.retired: tuple[Identity, ...] = ()
        self.session = RelaySession(clock)  # access token, refresh credential, renewals
        self.rest = Rest(self.server_url, self.tls, self.session, self.username, relay_level)
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
        self.progress = Progress()  # cursor and counters, saved with the history cache
        self.inbox = Inbox(self)
        self.outgoing = Outbox(self)
        self.messaging = Messaging(self)  # replies, edits, deletes, reactions, timers
        self.attachments = Attachments(self)  # files as messages
        self.receipts = Receipts(self)  # end-to-end read receipts
        self.expiry = Expiry(self)  # disappearing messages
        self.pending = Pending(self)  # actions that arrived before their message
        self.connection = Connection(self, backoff)
        self.transparency = Transparency(self)  # the key transparency heads verified, the monitor
        self._passphrase: str | None = None
        self._local_key = b""
        self._bundle: keystore.KeyBundle | None = None
        self._keys_lock = asyncio.Lock()  # one rotation step at a time (client_tui.core.rotate)
        self.wall_clock = wall_clock
        self._keystore_digest: bytes | None = None  # the keystore file as this session last read or wrote it
        self.epochs = KeySchedule(self, key_lifetime_days, retired_grace_hours)  # scheduled rotation, erasing
        self._tasks: set[asyncio.Task] = set()
        self._key_fetched_at: dict[str, float] = {}
        self._pos = 0.0

    # -- files and limits ---------------------------------------------------------------------------
    @property
    def keystore_path(self) -> Path:
        return self.profile / "keystore.json"

    @property
    def history_path(self) -> Path:
        return self.profile / "history.sqlite3"

    @property
    def max_envelope(self) -> int:
        """The largest envelope the relay accepts, in bytes (its hello, else the default)."""
        return self.hello.max_envelope if self.hello else envelope.DEFAULT_MAX_ENVELOPE_BYTES

    @property
    def max_recipients(self) -> int:
        """The most recipients an envelope may have (the relay's hello, else the default)."""
        return self.hello.max_recipients if self.hello else envelope.DEFAULT_MAX_RECIPIENTS

    # -- account --------------------------------------------------------------------------------------
    @property
    def token(self) -> str | None:
        """The current access token (renewed by :attr:`session`)."""
        return self.session.access

    async def register(
        self, password: str, passphrase: str, bits: int = DEFAULT_RSA_BITS, identity: Identity | None = None
    ) -> Identity:
        """Generate keys (in a thread), save them encrypted, publish the public parts, log in.

        ``identity``: use these keys instead of generating new ones (tests, imports).

        Raises:
            DowngradeRefused: the relay reports a level below 4 (nothing is generated nor sent).
            ClientError: the relay refused (e.g. ``conflict`` if the name is taken).
            keystore.KeystoreError: empty passphrase.
        """
        return await account.register(self, password, passphrase, bits, identity)

    async def login(self, password: str, passphrase: str) -> Identity:
        """Open the keystore with ``passphrase`` (in a thread) and get a token.

        Raises:
            keystore.WrongPassphrase, keystore.KeystoreError, ClientError; DowngradeRefused: the relay
            reports a level below 4 (no password is sent to it).
        """
        return await account.login(self, password, passphrase)

    async def open_local(self, bundle: keystore.KeyBundle, passphrase: str, *, fresh: bool = False) -> None:
        """Open what this machine keeps for the account, the keystore ``bundle`` being open
        (``fresh``: just made): trust store, history cache, cursor and counters, outbox.

        Raises:
            OSError: a file cannot be written; trust store errors (``client_tui.core.trust``).
        """
        await account.open_local(self, bundle, passphrase, fresh=fresh)

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

    async def change_members(self, conversation: str, add: Sequence[str] = (), remove: Sequence[str] = ()) -> list[str]:
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

    async def recipients_for(self, conversation: str) -> Audience:
        """Whom to seal to: the newest verified epoch of the conversation's membership log and
        its members' keys as the log binds them (``Membership.audience``).

        Raises:
            KeyChangeBlocked: a member's key changed and was not accepted yet.
            MembershipWithheld, LegacyConversation, ClientError (not a member).
        """
        return await self.membership.audience(conversation)

    def missing_counters(self, conversation: str) -> dict[str, tuple[int, ...]]:
        """Counters of each sender in ``conversation`` that never arrived (so far)."""
        return self.inbox.missing_counters(conversation)

    # -- the connection -------------------------------------------------------------------------------
    @property
    def ws_url(self) -> str:
        """The relay's websocket endpoint (``ws://`` or ``wss://`` ... ``/v1/ws``)."""
        return session_socket.ws_url(self.server_url)

    @property
    def online(self) -> bool:
        """A connection is open and the relay said ready."""
        link = self.connection.link
        return link is not None and link.open and self.state == ConnState.ONLINE

    async def connect(self) -> None:
        """Open the websocket, sync everything after my cursor and send the outbox (one attempt;
        :meth:`start` keeps the session alive).

        Raises:
            DowngradeRefused: the relay announced a level below 4.
            AuthFailed: the relay refused the token.
            ClientError: anything else went wrong (``unreachable``, ``protocol``).
        """
        await self.connection.connect()

    def start(self) -> asyncio.Task:
        """Stay connected in the background: connect, and reconnect with exponential backoff and
        jitter after any loss, until :meth:`close`. A refused login ends it (state ``refused``)
        after one fresh login attempt; so does a relay below level 4.

        Returns:
            the supervisor task (done when the session gave up or the client closed).
        """
        return self.connection.start()

    def reconnect_now(self) -> None:
        """Skip the current backoff wait; start the session again if it had stopped (refused)."""
        self.connection.reconnect_now()

    async def wait_synced(self, timeout: float = 30) -> None:
        """Wait until the sync started by :meth:`connect` delivered its last page (TimeoutError)."""
        await asyncio.wait_for(self.inbox.synced.wait(), timeout)

    @property
    def synced(self) -> bool:
        """Online, and no sync is running."""
        link = self.connection.link
        return self.online and link is not None and link.synced and self.inbox.synced.is_set()

    async def settle(self, timeout: float = 30) -> None:
        """Return once every frame the relay queued to this client before the call was handled:
        an empty sync page (``ClientProtocol.barrier``) is answered after them, on the same
        connection. A sync that is running ends first; offline, the next connection's sync answers.

        Raises:
            TimeoutError: not done in ``timeout`` seconds.
        """
        async with asyncio.timeout(timeout):
            while True:
                await self.inbox.synced.wait()
                link = self.connection.link
                if link is not None and link.open and link.synced:
                    self.inbox.synced.clear()
                    with contextlib.suppress(ClientError):  # lost meanwhile: the next connection's sync
                        await link.barrier()
                    await self.inbox.synced.wait()
                    return
                await asyncio.sleep(0.01)  # lost since its last sync: the supervisor is reconnecting

    async def send_envelope(self, conversation: str, data: bytes, timeout: float = SEND_TIMEOUT_S) -> int:
        """Send an envelope sealed elsewhere (tests, tooling) as it is; the seq it was stored at.

        Raises:
            ClientError: ``offline`` or the relay's refusal; TimeoutError.
        """
        link = self.connection.link
        if link is None:
            raise ClientError("not connected", code=ErrorCode.OFFLINE)
        mid = envelope.parse(data, max_bytes=self.max_envelope).header.mid
        return await asyncio.wait_for(self.outgoing.submit(link, conversation, data, mid), timeout)

    async def ping(self) -> float:
        """Round trip over the websocket in ms (websocket ping/pong)."""
        assert self.connection.link is not None
        return await self.connection.link.ping()

    async def _set_state(self, state: ConnState, detail: str = "", retry_in: float | None = None) -> None:
        self.state = state
        await self.events.put(ConnectionState(state, detail, retry_in))

    async def _on_event(self, event: ClientEvent) -> None:
        """One event of the session protocol, in the order the relay's frames came."""
        if isinstance(event, frames.Message):
            await self.inbox.on_message(event)
        elif isinstance(event, frames.Stored):
            await self.outgoing.on_stored(event)
        elif isinstance(event, SendRefused):
            self.outgoing.on_refused(event.mid, event.error)
        elif isinstance(event, SyncProgress):
            await self.inbox.on_sync_progress(event)
        elif isinstance(event, frames.Delivered):
            await self.inbox.on_delivered(event)
        elif isinstance(event, frames.Event):
            await self.inbox.on_relay_event(event)
        elif isinstance(event, RoundTrip):
            self.rtt_ms = event.ms
            await self.events.put(RttMeasured(event.ms))
        elif isinstance(event, RelayError):
            log.warning("relay error %s: %s", event.error.code, event.error.message)
        elif isinstance(event, Closed):
            self.connection.lost()
            self.outgoing.on_closed()
            self.last_close = (event.code, event.reason)
            await self._set_state(ConnState.OFFLINE, f"{event.code} {event.reason}".strip() if event.code else "")
        elif not isinstance(event, Opened | Renewed | RenewalDue):  # handled by the link
            log.warning("unexpected session event %s", type(event).__name__)

    # -- sending --------------------------------------------------------------------------------------
    def _next_pos(self) -> float:
        self._pos = max(self._pos, float(self.progress.cursor)) + 0.001
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
        return (await self.outgoing.queue(conversation, text, hold)).record

    async def send_text(self, conversation: str, text: str, timeout: float = SEND_TIMEOUT_S) -> Sent:
        """Seal ``text`` for every member and send it; return its ``mid`` and ``seq`` once stored.

        A relay answer ``recipients_mismatch`` (members or keys changed) makes the client reload
        the members and their keys and seal again (same counter).

        Raises:
            EnvelopeTooLarge, KeyChangeBlocked, MemberWithoutKey, ClientError (relay error codes;
            ``offline`` when neither connected nor reconnecting), TimeoutError.
        """
        if self.connection.link is None and not self.connection.running:
            raise ClientError("not connected", code=ErrorCode.OFFLINE)
        return await self.outgoing.send_text(conversation, text, timeout)

    async def retry(self, lid: str) -> None:
        """Send a ``failed`` message of mine again (sealed anew, with a new counter)."""
        await self.outgoing.retry(lid)

    @property
    def outbox(self) -> list[Record]:
        """My messages waiting to be stored by the relay (sealing, sending or blocked), in order."""
        return self.outgoing.records

    async def load_history(self, conversation: str, limit: int = 200, before: float | None = None) -> list[Record]:
        """Records of ``conversation`` from the local cache (no RSA work), oldest first."""
        if self.history is None:
            return []
        return await self.history.recent(conversation, limit, before)

    # -- lifetime -------------------------------------------------------------------------------------
    async def close(self) -> None:
        """Stop the session, close the websocket and the HTTP client; save contacts; close the cache."""
        await self.connection.close()
        self.epochs.stop()
        self.expiry.stop()
        self.receipts.stop()
        for t in list(self._tasks):
            t.cancel()
        for t in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):  # each failure was logged as it ended
                await t
        await self.rest.aclose()
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
