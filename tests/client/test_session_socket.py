"""client_tui.session_socket against a scripted relay on a real socket: the protocol's headers
go into the upgrade, the handshake ends at ``ready``, due acks and pings are written when their
timer passes (the socket waits on the protocol's deadline, not only on frames), a pong comes
back as a round trip, and the close code ends the events."""

from __future__ import annotations

import asyncio

import msgspec
import pytest
from websockets.asyncio.server import serve

from client_tui.session_socket import SessionSocket
from shared import frames
from shared.errors import DowngradeRefused
from shared.session import ClientProtocol, ClientState, CloseCode, Closed, Opened, RoundTrip

HELLO = frames.Hello(version=2, level=4, max_frame=70_000, max_envelope=65_536, max_recipients=64, auth_timeout_s=5.0)


async def test_handshake_timers_and_close_over_a_socket():
    seen: dict = {"frames": []}

    async def relay(ws) -> None:
        seen["authorization"] = ws.request.headers.get("Authorization")
        await ws.send(frames.encode(HELLO).decode())
        await ws.send(frames.encode(frames.Ready("alice", 900)).decode())
        await ws.send(frames.encode(frames.Message(5, "c1", "bob", msgspec.Raw(b'{"x":1}'))).decode())
        while len(seen["frames"]) < 2:  # the batched ack and the first ping, in whichever order
            frame = frames.decode_client_frame(await ws.recv())
            seen["frames"].append(frame)
            if isinstance(frame, frames.Ping):
                await ws.send(frames.encode(frames.Pong(frame.nonce)).decode())
        await ws.close(CloseCode.TOKEN_EXPIRED, "token expired")

    async with serve(relay, "127.0.0.1", 0) as server:
        port = server.sockets[0].getsockname()[1]
        protocol = ClientProtocol("alice", token="jwt", ack_delay=0.01, ping_every=30)
        sock, opened = await SessionSocket.open(f"http://127.0.0.1:{port}", protocol)
        assert isinstance(opened, Opened) and opened.user == "alice"
        events = []
        async with asyncio.timeout(10):
            async for event in sock.events():
                events.append(event)
                if isinstance(event, frames.Message):
                    protocol.ack(event.seq)
        await sock.close()
    assert seen["authorization"] == "Bearer jwt"
    assert sorted(seen["frames"], key=lambda f: type(f).__name__) == [frames.Ack(5), frames.Ping(1)]
    assert [type(e) for e in events] == [frames.Message, RoundTrip, Closed]
    assert events[-1] == Closed(CloseCode.TOKEN_EXPIRED, "token expired", ())


async def test_a_refused_handshake_raises_and_closes_the_socket():
    closed = asyncio.Event()

    async def relay(ws) -> None:  # a level-3 relay: no relay_key needed, the level check comes first
        await ws.send(frames.encode(msgspec.structs.replace(HELLO, level=3)).decode())
        await ws.wait_closed()
        closed.set()

    async with serve(relay, "127.0.0.1", 0) as server:
        port = server.sockets[0].getsockname()[1]
        with pytest.raises(DowngradeRefused):
            await SessionSocket.open(f"http://127.0.0.1:{port}", ClientProtocol("alice", level=4, token="jwt"))
        async with asyncio.timeout(10):
            await closed.wait()


async def test_a_handshake_cancelled_while_waiting_for_the_relay_closes_the_socket():
    """The client closing (or a caller giving up) while the relay has not said ``ready`` yet: the
    socket is closed at once, not left to the garbage collector (a ResourceWarning in the SIGKILL
    test, whose clients closed while reconnecting to a relay that had just been restarted)."""
    accepted, closed = asyncio.Event(), asyncio.Event()

    async def relay(ws) -> None:  # says hello, then never ready
        await ws.send(frames.encode(HELLO).decode())
        accepted.set()
        await ws.wait_closed()
        closed.set()

    protocol = ClientProtocol("alice", level=4, token="jwt")
    async with serve(relay, "127.0.0.1", 0) as server:
        port = server.sockets[0].getsockname()[1]
        opening = asyncio.create_task(SessionSocket.open(f"http://127.0.0.1:{port}", protocol))
        async with asyncio.timeout(10):
            await accepted.wait()
            while protocol.state is not ClientState.AUTHENTICATING:  # the hello read: waiting for ready
                await asyncio.sleep(0.001)
        opening.cancel()
        with pytest.raises(asyncio.CancelledError):
            await opening
        async with asyncio.timeout(5):  # left open, the relay would see the end only when it shuts down
            await closed.wait()
