"""Key transparency (PROTOCOL.md §14) against inputs a hostile relay or a hostile member can
choose, beyond the split view and the planted key of test_key_transparency.py: a stale head shown
to a monitor, the log's routes refused or left unanswered for one user, a log key changed for one
user, gossiped heads not signed by the log key, proofs for another index, a leaf planted before its
user registered. Real relays (in this process) and real ChatClients; what one client is served is
rewritten with ``tests.helpers.lying.lie``, as a relay that controls every byte it serves can.
Findings and fixes: notes/attacker-kt.md."""

from __future__ import annotations

import json

import pytest
from cryptography.hazmat.primitives.asymmetric import ed25519

from client_tui.core.errors import ClientError
from shared import kt
from shared.b64 import b64u_encode
from shared.errors import ConsistencyProofInvalid, ErrorCode, InclusionProofInvalid, LogKeyMismatch, TreeHeadInvalid
from shared.keys import Identity, PublicIdentity, spki_der
from tests.helpers.config import TEST_BITS
from tests.helpers.lying import lie, logged_substitute


def codes(client) -> list[str]:
    return [str(a.code) for a in client.transparency.alerts]


def kids(client) -> set[tuple[str, str]]:
    return {(client.identity.wrap_kid, client.identity.sign_kid)}


def answering(path: str, answer: dict):
    """A rewrite: ``GET path`` (query aside) is answered ``answer`` instead of the relay's."""

    def rewrite(method, p, body, real):
        return json.loads(json.dumps(answer)) if method == "GET" and p.split("?")[0] == path else real

    return rewrite


def failing(path: str, code: str, status: int | None):
    """A rewrite: ``GET path`` fails as ``code`` (``status`` None: the relay did not answer)."""

    def rewrite(method, p, body, real):
        if method == "GET" and p.split("?")[0] == path:
            raise ClientError(f"{path}: {code}", code=code, status=status)
        return real

    return rewrite


async def test_a_monitor_shown_a_stale_head_reads_up_to_the_newest_head_it_holds(world):
    """A relay plants mallory's keys under bob's name and shows bob's monitor the head from before
    the plant (a consistent, older head: a freeze). Alice's gossip brings bob the newer head; his
    monitor must read the log up to it, not only up to what the relay shows him now."""
    relay = world.hostile("plant-key:mallory")
    mallory = await world.client(relay, "mallory", connect=False)
    bob = await world.client(relay, "bob", connect=False)
    alice = await world.client(relay, "alice", connect=False)
    before = await bob.rest.request("GET", "/v1/kt/head")  # 3 keys: no plant yet
    served = await alice.fetch_keys("bob")
    assert served.wrap_kid == mallory.identity.wrap_kid and alice.transparency.head.size == 4
    lie(bob, answering("/v1/kt/head", before))  # bob is shown the head of 3 keys from now on
    await bob.transparency.gossip_in("alice", alice.transparency.gossip_out())
    assert bob.transparency.head.size == 4 and codes(bob) == []  # consistent: bob holds 4 now
    with pytest.raises(LogKeyMismatch):
        await bob.transparency.monitor(kids(bob), kids(bob))
    assert codes(bob) == ["log_key_mismatch"] and bob.transparency.edge.size == 2  # nothing marked as read


@pytest.mark.parametrize("path", ["/v1/kt/head", "/v1/kt/entries"])
@pytest.mark.parametrize(("code", "status"), [("internal", 500), ("forbidden", 403), ("not_found", 404)])
async def test_a_relay_that_refuses_one_users_monitor_is_alerted(world, path, code, status):
    """The log's routes answer errors to bob alone: his monitor cannot look for keys planted under
    his name. That is an alert (as an empty page of leaves already is), not a line in a log file."""
    relay = world.relay()
    bob = await world.client(relay, "bob", connect=False)
    await world.client(relay, "carol", connect=False)  # a leaf bob's monitor has not read
    lie(bob, failing(path, code, status))
    with pytest.raises(ConsistencyProofInvalid) as err:
        await bob.transparency.monitor(kids(bob), kids(bob))
    assert code in err.value.message and "planted under your name" in err.value.message
    assert codes(bob) == ["consistency_proof_invalid"] and bob.transparency.edge.size == 1


async def test_a_monitor_the_relay_does_not_answer_is_not_an_alert(world):
    """No answer at all (unreachable) decides nothing: the monitor runs again at the next start."""
    relay = world.relay()
    bob = await world.client(relay, "bob", connect=False)
    await world.client(relay, "carol", connect=False)
    lie(bob, failing("/v1/kt/entries", ErrorCode.UNREACHABLE, None))
    with pytest.raises(ClientError):
        await bob.transparency.monitor(kids(bob), kids(bob))
    assert codes(bob) == [] and bob.transparency.edge.size == 1


async def test_a_gossiped_head_the_relay_never_proves_is_kept_and_alerted_after_three_tries(world):
    """The relay forks alice's log and, to keep the fork quiet, never answers her consistency
    requests (the connection drops). Bob's gossiped head is kept, asked again at every refresh
    and after three unanswered tries alerted as a split view naming bob; it survives a restart."""
    relay = world.hostile("split-view:mallory")
    await world.client(relay, "mallory", connect=False)
    bob = await world.client(relay, "bob", connect=False)
    alice = await world.client(relay, "alice", connect=False)
    await alice.fetch_keys("bob")  # forked: alice holds 4, the real log has 3
    await world.client(relay, "carol", connect=False)
    await bob.rotate_keys()  # the real log: 5 keys; a proof from alice's 4 is needed
    await bob.transparency.refresh()
    lie(alice, failing("/v1/kt/consistency", ErrorCode.UNREACHABLE, None))
    await alice.transparency.gossip_in("bob", bob.transparency.gossip_out())
    assert codes(alice) == [] and len(alice.transparency.unproven) == 1  # try 1: kept, not decided
    saved = json.loads((alice.profile / "kt-head.json").read_text())
    assert saved["unproven"][0]["by"] == "bob" and saved["unproven"][0]["tries"] == 1
    await alice.transparency.refresh()  # try 2 (the relay answers its head, not the proof)
    assert codes(alice) == []
    again = type(alice.transparency)(alice)  # a restart: read back from kt-head.json
    alice.transparency = again
    lie(alice, failing("/v1/kt/consistency", ErrorCode.UNREACHABLE, None))
    await again.refresh()  # try 3
    (alert,) = again.alerts
    assert alert.code == "split_view" and alert.field == "bob"
    assert "has not proven" in alert.message and "3 times" in alert.message
    assert again.unproven == []


async def test_a_kept_head_is_settled_when_the_relay_answers_again(world):
    relay = world.relay()
    bob = await world.client(relay, "bob", connect=False)
    alice = await world.client(relay, "alice", connect=False)
    await world.client(relay, "carol", connect=False)
    await bob.transparency.refresh()  # bob: 3, alice: 2
    real = alice.rest.request
    lie(alice, failing("/v1/kt/consistency", ErrorCode.UNREACHABLE, None))
    await alice.transparency.gossip_in("bob", bob.transparency.gossip_out())
    assert len(alice.transparency.unproven) == 1
    alice.rest.request = real  # the relay answers again
    await alice.transparency.refresh()
    assert alice.transparency.unproven == [] and alice.transparency.head.size == 3 and codes(alice) == []


async def test_a_gossiped_head_signed_by_another_key_is_alerted_naming_the_sender_once(world):
    """A head not signed by the log key alice pinned, inside bob's verified message: either bob's
    client forged it, or the relay gave bob another log key (a split view). The alert names bob
    and says both; a hostile bob sending many such heads raises it once."""
    relay = world.relay()
    await world.client(relay, "bob", connect=False)
    alice = await world.client(relay, "alice", connect=False)
    held = alice.transparency.head
    other = ed25519.Ed25519PrivateKey.generate()  # the key another relay (or bob) signs with
    for size in (2, 3, 9):
        head = kt.sign_head(other, size, bytes(32), 1)
        await alice.transparency.gossip_in("bob", head.to_json())
    (alert,) = alice.transparency.alerts
    assert alert.code == "tree_head_invalid" and alert.field == "bob"
    assert "bob" in alert.message and "another log key" in alert.message
    assert alice.transparency.head == held


async def test_a_new_log_key_for_one_user_is_refused_and_the_pinned_key_kept(world):
    """The relay answers alice's head request with a head signed by a new log key (a log of her
    own): refused, the key pinned at first use stays on disk, her next key answers are judged by it."""
    relay = world.relay()
    await world.client(relay, "bob", connect=False)
    alice = await world.client(relay, "alice", connect=False)
    pinned, held = alice.transparency.log_key, alice.transparency.head
    other = ed25519.Ed25519PrivateKey.generate()
    forged = {
        "head": kt.sign_head(other, 2, held.root, held.timestamp_ms + 1).to_json(),
        "log_key": b64u_encode(spki_der(other.public_key())),
    }
    lie(alice, answering("/v1/kt/head", forged))
    with pytest.raises(TreeHeadInvalid) as err:
        await alice.transparency.refresh()
    assert "another log key" in err.value.message
    saved = json.loads((alice.profile / "kt-head.json").read_text())
    assert saved["log_key"] == b64u_encode(spki_der(pinned)) and alice.transparency.head == held


async def test_an_inclusion_proof_moved_to_another_index_or_size_is_refused(world):
    relay = world.relay()
    bob = await world.client(relay, "bob", connect=False)
    alice = await world.client(relay, "alice", connect=False)
    await world.client(relay, "carol", connect=False)
    await bob.rotate_keys()
    doc = await alice.rest.request("GET", "/v1/users/bob/keys")
    real = doc["kt"]
    size = real["head"]["tree_size"]
    for change in (
        {"index": real["index"] - 1},  # the same path, said to be another leaf's
        {"index": real["index"] + 1},
        {"index": size},  # past the tree
        {"proof": real["proof"][:-1]},  # the path of a smaller tree
        {"proof": [*real["proof"], real["proof"][0]]},
        {"leaf": {**real["leaf"], "n": 0}},  # the leaf of bob's first keys, with these key ids
        {"leaf": {**real["leaf"], "user": "carol"}},
    ):
        lie(alice, answering("/v1/users/bob/keys", {**doc, "kt": {**real, **change}}))
        with pytest.raises(InclusionProofInvalid):
            await alice.fetch_keys("bob")
    assert "bob" not in alice.contacts and set(codes(alice)) == {"inclusion_proof_invalid"}


async def test_a_leaf_planted_before_its_user_registered_is_alerted_at_registration(world):
    """The relay logs mallory's keys under the name dave before dave exists (and serves them to
    whoever asks for dave); dave's first monitor, at registration, reads the log from leaf 0."""
    relay = world.relay()
    mallory = world.identities["mallory"]
    await world.client(relay, "mallory", connect=False)
    alice = await world.client(relay, "alice", connect=False)
    as_dave = PublicIdentity("dave", mallory.public.wrap_key, mallory.public.sign_key)
    await logged_substitute(relay, alice, as_dave)
    dave = await world.client(relay, "dave", identity=Identity.generate("dave", TEST_BITS), connect=False)
    (alert,) = dave.transparency.alerts
    assert alert.code == "log_key_mismatch" and mallory.wrap_kid[:8] in alert.message


async def test_head_timestamps_far_in_the_future_or_past_change_nothing_and_print(world):
    """Heads signed by the real log key with timestamps 0 and 2^53-1 ms (year 287396): a timestamp
    carries no promise (an honest relay reuses one signature while its log does not grow), so
    neither alerts nor replaces the held head of the same size; a larger head signed 'in 1970' is
    held like any other, and ``e2ee-chat audit`` prints such a head without failing."""
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    from client_tui import auditcmd

    relay = world.relay()
    await world.client(relay, "bob", connect=False)
    alice = await world.client(relay, "alice", connect=False)
    log_key = load_pem_private_key((relay.data_dir / "kt-ed25519.pem").read_bytes(), None)
    held = alice.transparency.head
    for ts in (0, kt.MAX_TREE_SIZE):
        await alice.transparency.accept(kt.sign_head(log_key, held.size, held.root, ts))
    assert alice.transparency.head == held and codes(alice) == []
    await world.client(relay, "carol", connect=False)
    real = (await alice.rest.request("GET", "/v1/kt/head"))["head"]
    future = kt.sign_head(log_key, real["tree_size"], kt.TreeHead.from_json(real).root, kt.MAX_TREE_SIZE)
    await alice.transparency.accept(future)
    assert alice.transparency.head == future and codes(alice) == []
    assert auditcmd._head_line("held", future).endswith("signed 287396-10-12 08:59:00 UTC")


async def test_the_two_signed_heads_of_a_split_view_are_kept_as_evidence(world):
    """The alert is not all that is left: the two heads the relay signed that no proof joins (the
    fork alice holds, the real one bob showed) are kept in kt-head.json, across a restart, once."""
    relay = world.hostile("split-view:mallory")
    await world.client(relay, "mallory", connect=False)
    bob = await world.client(relay, "bob", connect=False)
    alice = await world.client(relay, "alice", connect=False)
    await alice.fetch_keys("bob")  # forked: 4 keys
    forked = alice.transparency.head
    await world.client(relay, "carol", connect=False)  # the real log: 4 keys, another root
    real = await bob.transparency.refresh()
    for _ in range(2):  # two messages carrying the same head
        await alice.transparency.gossip_in("bob", bob.transparency.gossip_out())
    assert codes(alice) == ["split_view"]
    again = type(alice.transparency)(alice)  # read back from kt-head.json
    (evidence,) = again.evidence
    assert (evidence.held, evidence.shown, evidence.by) == (forked, real, "bob")
    assert evidence.held.size == evidence.shown.size and evidence.held.root != evidence.shown.root
    evidence.held.verify(again.log_key)  # both signed by the log key alice pinned
    evidence.shown.verify(again.log_key)


async def test_a_relay_that_never_answers_one_users_monitor_is_alerted_at_the_third_start(world):
    """The relay answers bob's login and drops every request of his monitor (as if unreachable):
    once is a network, three starts in a row is the relay keeping bob from checking its log."""
    relay = world.relay()
    bob = await world.client(relay, "bob", connect=False)
    await world.client(relay, "carol", connect=False)
    real = bob.rest.request
    lie(bob, failing("/v1/kt/head", ErrorCode.UNREACHABLE, None))
    for n in (1, 2):
        with pytest.raises(ClientError):
            await bob.transparency.monitor(kids(bob), kids(bob))
        assert codes(bob) == [] and bob.transparency.unanswered == n
    again = type(bob.transparency)(bob)  # a restart: the count is kept in kt-head.json
    bob.transparency = again
    with pytest.raises(ClientError):
        await again.monitor(kids(bob), kids(bob))
    (alert,) = again.alerts
    assert alert.code == "consistency_proof_invalid" and "at your last 3 starts" in alert.message
    bob.rest.request = real  # answered again: the count starts over
    await again.monitor(kids(bob), kids(bob))
    assert again.unanswered == 0 and again.edge.size == 2 and len(again.alerts) == 1


async def test_a_relay_that_drops_every_log_request_of_one_user_cannot_keep_a_gossiped_head_unproven(world):
    """The split-view relay drops all of alice's /v1/kt/ requests, the head request too, so no
    refresh ever retries bob's head: each start whose monitor is left unanswered counts as a try."""
    relay = world.hostile("split-view:mallory")
    await world.client(relay, "mallory", connect=False)
    bob = await world.client(relay, "bob", connect=False)
    alice = await world.client(relay, "alice", connect=False)
    await alice.fetch_keys("bob")  # forked: 4 keys
    await world.client(relay, "carol", connect=False)
    await bob.rotate_keys()  # the real log: 5
    await bob.transparency.refresh()

    def dropped(method, p, body, real):
        if p.startswith("/v1/kt/"):
            raise ClientError("connection dropped", code=ErrorCode.UNREACHABLE)
        return real

    lie(alice, dropped)
    await alice.transparency.gossip_in("bob", bob.transparency.gossip_out())  # try 1
    for _ in range(2):  # tries 2 and 3, at two starts
        with pytest.raises(ClientError):
            await alice.transparency.monitor(kids(alice), kids(alice))
    (alert,) = alice.transparency.alerts
    assert alert.code == "split_view" and alert.field == "bob" and "asked 3 times" in alert.message
    assert alice.transparency.unproven == [] and alice.transparency.unanswered == 2
