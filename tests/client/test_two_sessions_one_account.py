"""One account, two sessions on one machine (the app open while a script runs ``e2ee-chat send`` or
``delete`` with the same profile): what the other session sends arrives in the open one once, and
its deletes, edits and timers take effect there too (they are the same author's)."""

from __future__ import annotations

from client_tui.core import RecordChanged
from client_tui.core.record import RecordState
from tests.helpers.clients import messages_of, wait_event
from tests.helpers.config import PASSWORD, passphrase


async def two_sessions(make_client):
    window, bob = await make_client("alice"), await make_client("bob")
    conv = await window.create_conversation("ab", ["bob"])
    for c in (window, bob):
        await c.connect()
        await c.wait_synced()
    script = await make_client("alice", register=False)
    await script.login(PASSWORD, passphrase("alice"))
    await script.connect()
    await script.wait_synced()
    return window, script, bob, conv


async def test_a_message_sent_by_my_other_session_is_shown_once_and_its_delete_applies(make_client):
    window, script, bob, conv = await two_sessions(make_client)
    sent = await script.messaging.send(conv, "from the script", wait=True)
    await window.settle()
    mine = [r for r in await messages_of(window, conv) if r.mid == sent.mid]
    assert [(r.text, r.sender) for r in mine] == [("from the script", "alice")]
    await script.messaging.delete(sent.mid, wait=True)
    await window.settle()
    await bob.settle()
    for c in (window, bob):
        (gone,) = await c.history.by_mid(sent.mid, conv)
        assert (gone.state, gone.text) == (RecordState.DELETED, None)


async def test_a_timer_set_by_my_other_session_applies_in_the_open_one(make_client):
    window, script, bob, conv = await two_sessions(make_client)
    await script.messaging.set_timer(conv, 300, wait=True)
    await window.settle()
    assert window.expiry.timers == {conv: 300}


async def test_a_message_my_other_session_wrote_under_a_timer_expires_in_the_open_one(make_client):
    window, script, bob, conv = await two_sessions(make_client)
    await script.messaging.set_timer(conv, 1, wait=True)
    sent = await script.messaging.send(conv, "gone in a second", wait=True)
    for c in (window, bob):
        await wait_event(
            c, RecordChanged, lambda e: e.record.mid == sent.mid and e.record.state == RecordState.DELETED, timeout=20
        )
        (gone,) = await c.history.by_mid(sent.mid, conv)
        assert (gone.state, gone.text) == (RecordState.DELETED, None)


async def test_the_open_session_shows_the_row_the_other_session_stored(make_client):
    """One row per message in the shared cache: the open session's screen gets that row's local
    id, so the delete that later changes the row changes the line on screen (the app drew the
    line twice and kept a deleted one)."""
    window, script, bob, conv = await two_sessions(make_client)
    sent = await script.messaging.send(conv, "one row", wait=True)
    shown = await wait_event(window, RecordChanged, lambda e: e.record.mid == sent.mid)
    (row,) = await window.history.by_mid(sent.mid, conv)
    assert shown.record.lid == row.lid


async def test_a_message_my_other_session_deleted_when_it_expired_is_taken_off_the_open_one(make_client):
    """The script session's timer fires first and deletes the row from the shared cache; the open
    session's own sweep then found nothing to delete (it asks the cache for rows not deleted yet) and
    kept showing the expired message until a restart — the race behind an intermittent failure of
    the test above under load."""
    window, script, bob, conv = await two_sessions(make_client)
    await script.messaging.set_timer(conv, 1, wait=True)
    sent = await script.messaging.send(conv, "gone in a second", wait=True)
    await wait_event(window, RecordChanged, lambda e: e.record.mid == sent.mid)  # shown in the window
    window.expiry.stop()  # the window's timer waits: the script's fires first
    await wait_event(
        script, RecordChanged, lambda e: e.record.mid == sent.mid and e.record.state == RecordState.DELETED, timeout=20
    )
    gone = await window.expiry.sweep()
    assert [(r.mid, r.state, r.text) for r in gone] == [(sent.mid, RecordState.DELETED, None)]
    shown = await wait_event(
        window, RecordChanged, lambda e: e.record.mid == sent.mid and e.record.state == RecordState.DELETED
    )
    assert shown.record.lid == gone[0].lid
    assert await window.expiry.sweep() == []  # announced once
