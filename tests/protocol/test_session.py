"""The sans-I/O session (shared.session), both sides, frame in and events out: no socket, no loop."""

from __future__ import annotations

import ast
from pathlib import Path

import msgspec
import pytest

from shared import frames, l3
from shared.b64 import b64u_encode
from shared.errors import (
    AuthFailed,
    DowngradeRefused,
    FrameInvalid,
    KeyInvalid,
    LevelMismatch,
    ProtocolViolation,
    SessionStateError,
)
from shared.keys import spki_der
from shared.session import (
    MAX_SEQ,
    AckReceived,
    AuthRequested,
    ClientProtocol,
    ClientState,
    CloseCode,
    Closed,
    FrameRefused,
    Opened,
    RelayError,
    RelayProtocol,
    RelayState,
    RenewalDue,
    RenewalRequested,
    Renewed,
    RoundTrip,
    SendRefused,
    SendRequested,
    SyncProgress,
    SyncRequested,
)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def enc(frame) -> bytes:
    return frames.encode(frame)


def hello(level: int = 4, **kw) -> frames.Hello:
    return frames.Hello(
        version=2, level=level, max_frame=70_000, max_envelope=65_536, max_recipients=64, auth_timeout_s=5.0, **kw
    )


def sent(p) -> list:
    """The frames a protocol queued, decoded."""
    decode = frames.decode_client_frame if isinstance(p, ClientProtocol) else frames.decode_relay_frame
    return [decode(f) for f in p.frames_to_send()]


def msg(seq: int) -> bytes:
    return enc(frames.Message(seq, "c1", "bob", msgspec.Raw(b'{"x":1}')))


def opened(clock: Clock | None = None, **kw) -> ClientProtocol:
    p = ClientProtocol("alice", token="jwt", clock=clock or Clock(), **kw)
    assert p.receive_frame(enc(hello())) == []
    (ev,) = p.receive_frame(enc(frames.Ready("alice", 900)))
    assert isinstance(ev, Opened)
    return p


# -- the client's handshake ---------------------------------------------------------------------------
def test_level_4_handshake_puts_the_token_in_the_header_and_opens_on_ready():
    p = ClientProtocol("alice", token="jwt")
    assert p.state is ClientState.CONNECTING and p.handshake_headers() == {"Authorization": "Bearer jwt"}
    assert p.receive_frame(enc(hello())) == [] and p.state is ClientState.AUTHENTICATING
    assert p.frames_to_send() == []  # the header authenticated: no auth frame
    (ev,) = p.receive_frame(enc(frames.Ready("alice", 900)))
    assert ev == Opened(hello(), "alice", 900) and p.state is ClientState.OPEN and p.user == "alice"


@pytest.mark.parametrize(
    ("relay", "wanted", "error"), [(3, 4, DowngradeRefused), (1, 2, DowngradeRefused), (4, 2, LevelMismatch)]
)
def test_another_level_than_asked_closes_the_session(relay, wanted, error):
    p = ClientProtocol("alice", level=wanted, token="jwt")
    with pytest.raises(error, match=f"level {relay}"):
        p.receive_frame(enc(hello(relay)))
    assert p.state is ClientState.CLOSED and p.hello is not None and p.hello.level == relay
    with pytest.raises(SessionStateError, match="closed"):
        p.receive_frame(enc(frames.Ready("alice")))


def test_a_relay_that_does_not_start_with_hello_or_send_ready_breaks_the_protocol():
    p = ClientProtocol("alice", token="jwt")
    with pytest.raises(ProtocolViolation, match="hello"):
        p.receive_frame(enc(frames.Ready("alice")))
    p = ClientProtocol("alice", token="jwt")
    p.receive_frame(enc(hello()))
    with pytest.raises(ProtocolViolation, match="ready"):
        p.receive_frame(enc(frames.Pong(1)))
    p = ClientProtocol("alice", token="jwt")
    with pytest.raises(FrameInvalid):
        p.receive_frame(b"not json")
    assert p.state is ClientState.CLOSED


def test_an_error_before_ready_is_a_refused_login():
    p = ClientProtocol("alice", token="jwt")
    p.receive_frame(enc(hello()))
    with pytest.raises(AuthFailed, match="token expired") as info:
        p.receive_frame(enc(frames.Error("auth_failed", "token expired", "exp")))
    assert info.value.field == "exp" and p.state is ClientState.CLOSED


def test_level_1_names_the_user_in_its_first_frame_and_sends_no_header():
    p = ClientProtocol("alice", level=1)
    assert p.handshake_headers() == {}
    p.receive_frame(enc(hello(1)))
    assert sent(p) == [frames.Auth(user="alice")]


def test_level_3_makes_the_handshake_with_the_pinned_relay_key(ids):
    relay_key = ids["mallory"].wrap_private
    der = spki_der(relay_key.public_key())
    challenge = bytes(range(16))
    h = hello(3, challenge=b64u_encode(challenge), relay_key=b64u_encode(der))
    p = ClientProtocol("alice", level=3, token="jwt")
    assert p.handshake_headers() == {}  # level 3: the token travels with the handshake
    p.receive_frame(enc(h))
    (auth,) = sent(p)
    assert auth.token == "jwt" and p.relay_key == der  # pinned on first use
    assert l3.accept_handshake(auth.l3_key, relay_key, challenge).id == p.l3.id
    other = ClientProtocol("alice", level=3, token="jwt", relay_key=b"another key")
    with pytest.raises(KeyInvalid, match="pinned"):
        other.receive_frame(enc(h))
    assert sent(other) == []


# -- the client, open ------------------------------------------------------------------------------
def test_nothing_is_sent_before_ready_and_the_error_names_the_state():
    p = ClientProtocol("alice", token="jwt")
    with pytest.raises(SessionStateError, match="send in state connecting"):
        p.send("c1", b"{}", "m1")
    p.receive_frame(enc(hello()))
    with pytest.raises(SessionStateError, match="ack in state authenticating"):
        p.ack(3)


def test_sends_are_answered_by_stored_or_refused_and_the_rest_is_unanswered_at_close():
    p = opened()
    for mid in ("m1", "m2", "m3"):
        p.send("c1", b'{"e":1}', mid)
    assert [f.envelope for f in sent(p)] == [msgspec.Raw(b'{"e":1}')] * 3
    assert p.in_flight == ("m1", "m2", "m3")
    stored = frames.Stored("m1", 7, "c1")
    assert p.receive_frame(enc(stored)) == [stored]
    refusal = frames.Error("recipients_mismatch", "keys changed", ref="m2")
    assert p.receive_frame(enc(refusal)) == [SendRefused("m2", refusal)]
    stray = frames.Error("frame_invalid", "bad", ref="gone")
    assert p.receive_frame(enc(stray)) == [RelayError(stray)]
    assert p.connection_lost(1013, "slow") == [Closed(1013, "slow", ("m3",))]
    assert p.state is ClientState.CLOSED and not p.open


def test_live_messages_wait_for_the_sync_and_come_out_in_seq_order():
    p = opened()
    p.start_sync(5)
    assert sent(p) == [frames.Sync(after=5, limit=200)] and p.state is ClientState.SYNCING
    for seq in (9, 6, 7, 9):  # live 9 overtakes the sync's 6 and 7, and comes twice
        assert p.receive_frame(msg(seq)) == []
    events = p.receive_frame(enc(frames.Synced(7, True)))
    assert [e.seq for e in events[:-1]] == [6, 7] and events[-1] == SyncProgress(7, True)
    assert sent(p) == [frames.Sync(after=7, limit=200)]  # the next page, asked for by the protocol
    p.receive_frame(msg(8))
    events = p.receive_frame(enc(frames.Synced(8, False)))
    assert [e.seq for e in events[:-1]] == [8, 9] and events[-1] == SyncProgress(8, False)
    assert p.state is ClientState.OPEN and sent(p) == []
    assert [e.seq for e in p.receive_frame(msg(10))] == [10]  # caught up: live ones pass at once
    with pytest.raises(SessionStateError, match="syncing"):
        p.start_sync(0)
        p.start_sync(0)


def test_a_barrier_is_an_empty_page_answered_in_order_and_holds_nothing():
    p = opened()
    p.barrier()
    assert sent(p) == [frames.Sync(after=MAX_SEQ, limit=200)] and p.state is ClientState.OPEN
    assert [e.seq for e in p.receive_frame(msg(5))] == [5]  # live ones keep the relay's order
    assert [e.seq for e in p.receive_frame(msg(4))] == [4]
    with pytest.raises(SessionStateError, match="barrier"):  # its answer would end the sync early
        p.start_sync(5)
    assert p.receive_frame(enc(frames.Synced(5, False))) == [SyncProgress(5, False)]
    p.start_sync(5)  # answered: a sync may start
    with pytest.raises(SessionStateError, match="syncing"):
        p.barrier()


def test_acks_of_a_burst_go_out_as_one_frame_after_the_delay():
    clock = Clock()
    p = opened(clock, ack_delay=0.05)
    p.ack(3)
    p.ack(5)
    p.ack(4)
    assert sent(p) == [] and p.next_deadline() == pytest.approx(clock.now + 0.05) and p.ack_unsent == 5
    clock.now += 0.05
    assert p.on_timer() == []
    assert sent(p) == [frames.Ack(5)] and p.ack_unsent == 0 and p.next_deadline() is None
    p.ack(5)  # nothing new
    assert p.next_deadline() is None
    p.ack(6)
    p.flush_acks()  # before a deliberate close: at once
    assert sent(p) == [frames.Ack(6)]


def test_pings_carry_nonces_and_only_the_matching_pong_is_timed():
    clock = Clock()
    p = opened(clock, ping_every=15.0)
    assert p.next_deadline() == clock.now  # the first ping right after ready
    p.on_timer()
    assert sent(p) == [frames.Ping(1)] and p.next_deadline() == clock.now + 15
    clock.now += 0.02
    assert p.receive_frame(enc(frames.Pong(7))) == []  # not ours
    (rtt,) = p.receive_frame(enc(frames.Pong(1)))
    assert rtt.nonce == 1 and rtt.ms == pytest.approx(20.0)
    assert p.receive_frame(enc(frames.Pong(1))) == []  # timed once
    assert isinstance(rtt, RoundTrip)


def test_renewal_is_due_at_two_thirds_of_the_lifetime_and_the_answer_moves_the_next():
    clock = Clock()
    p = opened(clock, renew=True)
    start = clock.now
    assert p.next_deadline() == pytest.approx(start + 600)
    clock.now = start + 600
    assert p.on_timer() == [RenewalDue()]
    assert p.on_timer() == [] and p.next_deadline() is None  # said once, until renewed
    p.renew("jwt2")
    assert sent(p) == [frames.Auth(token="jwt2")]
    assert p.receive_frame(enc(frames.Ready("alice", 300))) == [Renewed(300)]
    assert p.next_deadline() == pytest.approx(clock.now + 200)
    assert opened(renew=False).next_deadline() is None


# -- the relay's side -------------------------------------------------------------------------------
def relay(level: int = 4, clock: Clock | None = None, **kw) -> RelayProtocol:
    return RelayProtocol(hello(level), clock=clock or Clock(), **kw)


def test_a_header_token_at_level_4_needs_no_auth_frame_and_the_token_bounds_the_connection():
    clock = Clock()
    r = relay(header_auth=True, clock=clock, leeway_s=5)
    assert sent(r) == [hello()] and not r.awaiting_auth_frame and r.next_deadline() is None
    with pytest.raises(SessionStateError, match="authenticating"):
        r.receive_frame(enc(frames.Ping(1)))
    r.accept("alice", 900.7)
    assert sent(r) == [frames.Ready("alice", 900)] and r.state is RelayState.OPEN
    assert r.next_deadline() == pytest.approx(clock.now + 905.7)
    clock.now += 600
    assert r.receive_frame(enc(frames.Auth(token="jwt2"))) == [RenewalRequested("jwt2")]
    r.renewed(900)
    assert sent(r) == [frames.Ready("alice", 900)] and r.next_deadline() == pytest.approx(clock.now + 905)
    clock.now += 905
    r.on_timer()
    assert (r.state, r.close_code) == (RelayState.CLOSING, CloseCode.TOKEN_EXPIRED) and r.close_code == 4401


@pytest.mark.parametrize(
    ("level", "first", "field"),
    [(4, frames.Sync(), "type"), (1, frames.Auth(token="x"), "user"), (3, frames.Auth(token="x"), "l3_key")],
)
def test_a_first_frame_the_level_cannot_use_is_refused_with_1008(level, first, field):
    r = relay(level)
    r.frames_to_send()
    assert r.receive_frame(enc(first)) == []
    (err,) = sent(r)
    assert (err.code, err.field) == ("auth_failed", field)
    assert (r.state, r.close_code, r.close_reason) == (RelayState.CLOSING, CloseCode.AUTH_REFUSED, "auth_failed")
    assert r.receive_frame(enc(frames.Auth(token="x"))) == [] and sent(r) == []  # the close is decided


def test_no_auth_frame_in_time_is_refused():
    clock = Clock()
    r = relay(2, clock)
    r.frames_to_send()
    assert r.next_deadline() == clock.now + 5.0
    clock.now += 5.0
    r.on_timer()
    assert [f.message for f in sent(r)] == ["no auth frame in time"] and r.close_code is CloseCode.AUTH_REFUSED


def test_auth_frame_is_handed_to_the_relay_to_decide():
    r = relay(3)
    r.frames_to_send()
    auth = frames.Auth(token="jwt", l3_key="hs")
    assert r.receive_frame(enc(auth)) == [AuthRequested(auth)] and r.next_deadline() is None
    with pytest.raises(SessionStateError, match="before the relay decided"):
        r.receive_frame(enc(frames.Ping(1)))
    r.refuse(AuthFailed("the session ended"))
    assert [f.code for f in sent(r)] == ["auth_failed"] and r.state is RelayState.CLOSING
    with pytest.raises(SessionStateError):
        r.accept("alice", None)


def test_the_refusal_names_the_error_it_was_refused_with_once():
    clock = Clock()
    r = relay(2, clock)
    assert r.refusal is None
    clock.now += 5.0
    r.on_timer()
    assert isinstance(r.refusal, AuthFailed) and r.refusal.message == "no auth frame in time"
    first = r.refusal
    r.refuse(AuthFailed("later"))  # the close is decided: the first reason stays
    assert r.refusal is first
    accepted = relay(header_auth=True)
    accepted.accept("alice", None)
    accepted.error(AuthFailed("not a refusal"))
    assert accepted.refusal is None


def test_open_relay_turns_frames_into_work_and_answers_pings_itself():
    r = relay(1)
    r.receive_frame(enc(frames.Auth(user="alice")))
    r.accept("alice", None)
    assert sent(r) == [hello(1), frames.Ready("alice", None)] and r.next_deadline() is None
    send = frames.Send("c1", msgspec.Raw(b"{}"))
    assert r.receive_frame(enc(send)) == [SendRequested(send)]
    assert r.receive_frame(enc(frames.Sync(after=3))) == [SyncRequested(3, 200)]
    assert r.receive_frame(enc(frames.Ack(9))) == [AckReceived(9)]
    assert r.receive_frame(enc(frames.Ping(4))) == [] and sent(r) == [frames.Pong(4)]
    assert r.receive_frame(enc(frames.Auth(token="x"))) == []  # level 1 has nothing to renew
    assert [(f.code, f.field) for f in sent(r)] == [("frame_invalid", "type")]
    r.stored(frames.Stored("m1", 4, "c1"))
    r.page_done(4, False)
    r.error(AuthFailed("no"), ref="m2")
    assert sent(r) == [
        frames.Stored("m1", 4, "c1"),
        frames.Synced(4, False),
        frames.Error("auth_failed", "no", None, None, "m2"),
    ]


def test_the_twentieth_invalid_frame_closes_the_connection():
    r = relay(header_auth=True)
    r.accept("alice", None)
    r.frames_to_send()
    for i in range(1, 21):
        (ev,) = r.receive_frame(b'{"type":"nope"}')
        assert isinstance(ev, FrameRefused) and ev.error.code == "frame_invalid" and ev.size == 15
        assert r.state is (RelayState.OPEN if i < 20 else RelayState.CLOSING)
    assert len(sent(r)) == 20 and (r.close_code, r.close_reason) == (1008, "too many invalid frames")
    r.stored(frames.Stored("m1", 4, "c1"))
    assert sent(r) == []  # queued after the close: dropped
    r.connection_lost()
    assert r.state is RelayState.CLOSED


# -- both sides together ---------------------------------------------------------------------------
def pump(a, b) -> list:
    """Deliver everything ``a`` queued to ``b``; ``b``'s events."""
    return [e for f in a.frames_to_send() for e in b.receive_frame(f)]


def test_a_client_and_a_relay_protocol_talk_to_each_other_without_a_socket():
    clock = Clock()
    client = ClientProtocol("alice", level=1, clock=clock)
    relay_side = relay(1, clock, header_auth=bool(client.handshake_headers()))
    assert pump(relay_side, client) == []
    (auth,) = pump(client, relay_side)  # level 1: the auth frame names the user
    assert auth == AuthRequested(frames.Auth(user="alice"))
    relay_side.accept("alice", 60)
    (ev,) = pump(relay_side, client)
    assert isinstance(ev, Opened) and ev.expires_in == 60
    client.send("c1", b'{"mid":"m1"}', "m1")
    client.start_sync(0)
    req, sync = pump(client, relay_side)
    assert isinstance(req, SendRequested) and sync == SyncRequested(0, 200)
    relay_side.stored(frames.Stored("m1", 1, "c1"))
    relay_side.page_done(1, False)
    stored, progress = pump(relay_side, client)
    assert stored.seq == 1 and progress == SyncProgress(1, False) and client.in_flight == ()


def test_shared_session_imports_no_asyncio_and_no_socket():
    root = Path(__file__).resolve().parents[2] / "shared"
    banned = {"asyncio", "socket", "websockets", "httpx2", "starlette", "threading"}
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and not node.level
                else []
            )
            assert not {n.split(".")[0] for n in names} & banned, f"{path.name} imports {names}"


def test_the_relay_leaves_the_session_to_relay_protocol():
    """No second copy of the session in server/: only RelayProtocol decodes client frames and writes
    the session's own frames (ready, pong, synced, error)."""
    root = Path(__file__).resolve().parents[2] / "server"
    session_only = {"decode_client_frame", "Ready", "Pong", "Synced", "Error"}
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "frames":
                assert node.attr not in session_only, f"{path.name} uses frames.{node.attr}"
