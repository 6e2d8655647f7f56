"""Attacks on epoch forward secrecy against a real relay: the wall clock
jumping a century ahead and back, a relay lying on ``GET /v1/keys/outstanding`` (counts for other key
ids, negative, bool, float, missing, another user's, nested past any parser, huge), and an erase whose
keystore save fails (a folder that cannot be written). Nothing sealed to a key may be lost, no
rotation storm, nothing erased on a lie, and an erase that could not be saved is tried again."""

from __future__ import annotations

import httpx2
import pytest

from client_tui.core.epochs import DAY_MS, HOUR_MS
from tests.helpers.config import PASSWORD, passphrase
from tests.helpers.fsfault import unwritable
from tests.helpers.keyschedule import Clock, outstanding_is, retired_past_its_grace
from tests.helpers.lying import lie

CENTURY_MS = 100 * 365 * DAY_MS
OUTSTANDING = "/v1/keys/outstanding"


async def test_a_century_jump_and_back_keeps_undelivered_keys_and_rotates_once_each_way(world):
    relay = world.relay()
    clock = Clock()
    bob = await world.client(relay, "bob", wall_clock=clock)
    alice = await world.client(relay, "alice")
    conv = await alice.create_conversation("pair", ["bob"])
    await bob.refresh_conversations()
    await bob.connection.close()  # what alice sends now waits at the relay, sealed to bob's first key
    k1 = bob.identity
    await alice.send_text(conv, "sent while bob was away")
    await bob.rotate_keys()
    k2, real = bob.identity, clock.now

    clock.now = real + CENTURY_MS  # the clock jumps a century ahead
    ahead = await bob.epochs.tick()
    assert ahead.rotated is True and ahead.erased == []
    assert ahead.kept == {k1.wrap_kid: "1 envelope(s) sealed to it not delivered yet"}  # no mass erase
    k3 = bob.identity
    assert (await bob.epochs.tick()).rotated is False and bob.identity is k3  # no storm

    clock.now = real + HOUR_MS  # ... and comes back: k3 is dated a century ahead
    back = await bob.epochs.tick()
    assert back.rotated is True and bob.identity.wrap_kid not in {k1.wrap_kid, k2.wrap_kid, k3.wrap_kid}
    assert k1.wrap_kid not in back.erased and k1.wrap_kid in {r.wrap_kid for r in bob.retired}  # in its grace
    assert k2.wrap_kid in back.erased  # retired "a century ahead": asked about now, and nothing is outstanding
    for _ in range(3):
        clock.now += HOUR_MS
        assert (await bob.epochs.tick()).rotated is False  # one rotation each way, then the schedule as usual
    assert "keys replaced every 7 days (next: 20" in bob.epochs.words()[0]

    await bob.connect()  # the waiting envelope opens with the retired first key
    await bob.wait_synced()
    await world.rec(bob).until(lambda r: "sent while bob was away" in r.texts)


def _rewrites():
    def counts(change):
        def rewrite(method, path, body, answer):
            if path.startswith(OUTSTANDING):
                change(answer)
            return answer

        return rewrite

    def other_kids(a):
        a["outstanding"] = {"A" * 43: 0}

    def negative(a):
        a["outstanding"] = {k: -1 for k in a["outstanding"]}

    def boolean(a):
        a["outstanding"] = {k: False for k in a["outstanding"]}

    def floating(a):
        a["outstanding"] = {k: 0.0 for k in a["outstanding"]}

    def missing(a):
        a["outstanding"] = {}

    def someone_else(a):
        a["username"] = "alice"

    def not_an_object(a):
        a["outstanding"] = [0]

    def huge(a):
        a["padding"] = ["x" * 1000] * 5000  # 5 MB of other members: the counts still true
        a["outstanding"] = {k: 1 for k in a["outstanding"]}

    return {
        f.__name__: counts(f)
        for f in (other_kids, negative, boolean, floating, missing, someone_else, not_an_object, huge)
    }


@pytest.mark.parametrize("lie_name", sorted(_rewrites()))
async def test_a_lying_count_erases_nothing(world, lie_name):
    _, _, bob, old = await retired_past_its_grace(world)
    before = bob.keystore_path.read_bytes()
    lie(bob, _rewrites()[lie_name])
    result = await bob.epochs.tick()
    assert result.erased == [] and list(result.kept) == [old.wrap_kid]
    assert [r.wrap_kid for r in bob.retired] == [old.wrap_kid] and bob.keystore_path.read_bytes() == before


@pytest.mark.parametrize("answer", [{}, {"conversations": None}, {"conversations": [{"id": 5}]}, [1]])
async def test_a_malformed_conversation_list_while_erasing_erases_nothing_and_raises_nothing(world, answer):
    _, _, bob, old = await retired_past_its_grace(world)
    await outstanding_is(bob, old.wrap_kid, 0)  # the relay says 0: the membership logs decide

    def rewrite(method, path, body, served):
        return answer if path == "/v1/conversations" else served

    lie(bob, rewrite)
    result = await bob.epochs.tick()  # before: KeyError/TypeError out of tick (and out of the login's tick)
    assert result.erased == [] and result.kept == {old.wrap_kid: "the membership log of (not verified) still binds it"}
    assert [r.wrap_kid for r in bob.retired] == [old.wrap_kid]


class NestedAnswer(httpx2.AsyncBaseTransport):
    """The real relay answers everything but the outstanding route, which gets JSON nested deeper
    than any parser goes (a relay that wants the client's schedule, and its login, to crash)."""

    def __init__(self, inner: httpx2.AsyncBaseTransport) -> None:
        self.inner = inner

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if request.url.path == OUTSTANDING:
            return httpx2.Response(200, content=b"[" * 200_000 + b"]" * 200_000)
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


async def test_an_answer_nested_past_the_parser_erases_nothing_and_the_login_still_works(world):
    relay, clock, bob, old = await retired_past_its_grace(world)
    bob.rest.http._transport = NestedAnswer(bob.rest.http._transport)
    result = await bob.epochs.tick()
    assert result.erased == [] and old.wrap_kid in result.kept
    await bob.close()
    again = await world.client(relay, "bob", register=False, connect=False, wall_clock=clock, login=False)
    again.rest.http._transport = NestedAnswer(again.rest.http._transport)
    await again.login(PASSWORD, passphrase("bob"))  # its tick asks the same route: the login must not crash
    assert [r.wrap_kid for r in again.retired] == [old.wrap_kid]


async def test_an_erase_whose_save_fails_keeps_the_key_and_is_done_at_the_next_tick(world):
    _, _, bob, old = await retired_past_its_grace(world)
    await outstanding_is(bob, old.wrap_kid, 0)
    before = bob.keystore_path.read_bytes()
    with unwritable(bob.keystore_path.parent):
        failed = await bob.epochs.tick()
        assert failed.erased == [] and failed.kept == {old.wrap_kid: "the keystore could not be saved"}
        assert [r.wrap_kid for r in bob.retired] == [old.wrap_kid]  # in memory as on disk: kept
        assert bob.keystore_path.read_bytes() == before
        again = await bob.epochs.tick()  # still failing: kept again, nothing lost, the current key intact
        assert again.erased == [] and bob.keystore_path.read_bytes() == before
    done = await bob.epochs.tick()
    assert done.erased == [old.wrap_kid] and bob.retired == ()
    assert bob._bundle.identity.wrap_kid == bob.identity.wrap_kid != old.wrap_kid
