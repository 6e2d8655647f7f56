"""Staying connected: open a :class:`~client_tui.core.link.Link`, and the supervisor that opens
the next one after a loss.

:meth:`Connection.connect` opens one websocket and syncs (raises on failure; no reconnect).
:meth:`Connection.start` keeps a session alive: reconnect with exponential backoff and "equal
jitter" (half the delay fixed, half random), never retrying a refused login in a loop (close
1008/4403 or HTTP 401/403: one refresh or fresh login, then the state is ``refused`` and the
supervisor stops), sync from the persisted cursor, send the outbox again. A relay below level 4
stops it too (no silent downgrade). :meth:`Connection.reconnect_now` skips the backoff wait, or
starts a stopped supervisor again -- never a second one.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from typing import TYPE_CHECKING

from shared.errors import AuthFailed, DowngradeRefused
from shared.session import CloseCode

from .errors import ClientError
from .events import ConnState
from .link import Link

if TYPE_CHECKING:
    from .client import ChatClient

STABLE_S = 10.0  # a connection that lived this long resets the backoff
SLOW_RETRY_S = 0.05  # first retry after a slow-reader close (1013): sync at once


class Connection:
    """The websocket side of one :class:`~client_tui.core.ChatClient` (``client.connection``).

    Attributes:
        link: the live connection, or None.
        backoff: ``(first, most)`` reconnect delays in seconds.
    """

    def __init__(self, client: ChatClient, backoff: tuple[float, float]) -> None:
        self.c = client
        self.backoff = backoff
        self.link: Link | None = None
        self.closing = False
        self._supervisor: asyncio.Task | None = None
        self._wake = asyncio.Event()

    @property
    def running(self) -> bool:
        """The supervisor is keeping the session alive."""
        return self._supervisor is not None and not self._supervisor.done()

    async def connect(self) -> None:
        """Open the websocket, check the relay's level, start reading, sync everything after my
        cursor and send the outbox.

        Raises:
            DowngradeRefused: the relay announced a level below 4.
            AuthFailed: the relay refused the token.
            ClientError: anything else went wrong (``unreachable``, ``protocol``).
        """
        c = self.c
        await c.rest.login_if_pending()  # started while the relay was down
        token = await c.rest.socket_token()  # no session at all: the relay refuses the upgrade (403)
        await c._set_state(ConnState.CONNECTING, c.server_url)
        link = await Link.dial(
            c.server_url,
            username=c.username,
            token=token,
            tls=c.tls,
            handler=c._on_event,
            renewer=c.rest.renewal_token,
            clock=c.session.clock,
        )
        c.hello = link.opened.hello
        self.link = link
        c.inbox.synced.clear()
        link.start(after=c.progress.cursor)
        await c._set_state(ConnState.ONLINE, c.server_url)
        with contextlib.suppress(ClientError):
            await link.write()  # the sync request
        c._spawn(c.outgoing.run(link))

    def lost(self) -> None:
        """The live link closed (its reader's last event)."""
        if self.link is not None and not self.link.open:
            self.link = None

    def start(self) -> asyncio.Task:
        """Stay connected in the background until :meth:`close` (see the module's docstring).

        Returns:
            the supervisor task (done when the session gave up or the client closed).
        """
        if not self.running:
            self.closing = False
            self._supervisor = asyncio.create_task(self._supervise(), name=f"session-{self.c.username}")
        assert self._supervisor is not None
        return self._supervisor

    def reconnect_now(self) -> None:
        """Skip the current backoff wait; start the session again if it had stopped (refused)."""
        self._wake.set()
        if self._supervisor is not None and not self.running and not self.closing:
            self.start()

    async def _refused(self, detail: str) -> None:
        await self.c._set_state(ConnState.REFUSED, detail)

    async def _reauth_or_stop(self) -> bool:
        """One refresh or login after a refusal; False (and ``refused``) if that was refused too."""
        try:
            await self.c.rest.reauth()
        except (ClientError, AuthFailed) as exc:
            if isinstance(exc, AuthFailed) or exc.status in (401, 403):
                await self._refused(f"login refused: {exc.message}")
                return False
        return True

    async def _supervise(self) -> None:
        attempt = 0
        relogged = False
        auth_closes = 0
        while not self.closing:
            try:
                if self.link is None:  # (a connection opened by connect() before start() is adopted)
                    await self.connect()
            except DowngradeRefused as exc:
                return await self._refused(exc.message)
            except AuthFailed as exc:
                if relogged:
                    return await self._refused(f"login refused: {exc.message}")
                relogged = True
                if not await self._reauth_or_stop():
                    return
                continue
            except (ClientError, OSError) as exc:
                why = getattr(exc, "message", str(exc))
                if getattr(exc, "status", None) in (401, 403):  # the password itself was refused
                    return await self._refused(f"login refused: {why}")
                delay = self._delay(attempt)
                attempt += 1
                await self.c._set_state(ConnState.OFFLINE, why, retry_in=delay)
                await self._wait(delay)
                continue
            relogged = False
            started = time.monotonic()
            link = self.link
            assert link is not None and link.reader is not None
            try:
                await asyncio.shield(link.reader)
            except asyncio.CancelledError:
                # The reader ending cancelled is a lost connection like any other; this task being
                # cancelled (the event loop shutting down, a caller giving up) ends the session. A
                # session that swallowed its own cancellation reconnected forever, and the loop's
                # shutdown waited for it forever.
                current = asyncio.current_task()
                if current is not None and current.cancelling():
                    raise
            if self.closing:
                return
            code, reason = self.c.last_close
            if code in (CloseCode.AUTH_REFUSED, CloseCode.SESSION_ENDED):  # one refresh, never a loop
                auth_closes += 1
                if auth_closes > 1:
                    return await self._refused(f"the relay refused the session: {reason}".strip(": "))
                if not await self._reauth_or_stop():
                    return
                continue
            auth_closes = 0
            if time.monotonic() - started > STABLE_S:
                attempt = 0
            delay = SLOW_RETRY_S if code == CloseCode.SLOW_READER and attempt == 0 else self._delay(attempt)
            attempt += 1
            detail = f"{code or ''} {reason}".strip() or "connection lost"
            await self.c._set_state(ConnState.OFFLINE, detail, retry_in=delay)
            await self._wait(delay)

    def _delay(self, attempt: int) -> float:
        """Exponential backoff with jitter: half fixed, half random ("equal jitter")."""
        first, most = self.backoff
        d = min(most, first * (2 ** min(attempt, 16)))
        return d / 2 + random.uniform(0, d / 2)

    async def _wait(self, delay: float) -> None:
        self._wake.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), delay)

    async def close(self) -> None:
        """Stop the supervisor; send the due ack and close the websocket; wait for its reader."""
        self.closing = True
        self._wake.set()
        if self._supervisor is not None:
            self._supervisor.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._supervisor
        link = self.link
        if link is not None:
            await link.close()  # what was shown is acknowledged before the socket goes
            if link.reader is not None:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await link.reader
