"""Headless sub-commands of ``e2ee-chat`` that act on a message or a conversation beyond sending
text: ``edit MID --text``, ``delete MID``, ``react MID EMOJI [--off]``, ``expire --to NAMES
SECONDS`` (and ``send --reply MID``, in :mod:`.commands`), and the JSON form of a message that
``tail --json`` and ``search --json`` print (``commands.message_json``).

Each one logs in, syncs (so the message it names is stored here), sends one content document
and prints ``stored seq=N mid=M conversation=C`` once the relay stored it. A refusal before
anything is sent (someone else's message: ``not_author``; an id not stored here:
``unknown_reference``) is one line on standard error, exit 1.
"""

from __future__ import annotations

from .commands import find_conversation, logged_in
from .core import ChatClient
from .core.record import Record

__all__ = ["delete", "edit", "expire", "react"]


async def _online(args) -> ChatClient:
    """The user's client, logged in, connected and synced (every message stored here)."""
    client, _ = await logged_in(args)
    try:
        await client.refresh_conversations()
        await client.connect()
        await client.wait_synced()
    except BaseException:
        await client.close()
        raise
    return client


def _stored(rec: Record) -> int:
    print(f"stored seq={rec.seq} mid={rec.mid} conversation={rec.conversation}", flush=True)
    return 0


async def edit(args) -> int:
    """``edit MID --text TEXT``: new text for my message MID, for everyone."""
    client = await _online(args)
    try:
        return _stored(await client.messaging.edit(args.mid, args.text, wait=True))
    finally:
        await client.close()


async def delete(args) -> int:
    """``delete MID``: delete my message MID for everyone (and here)."""
    client = await _online(args)
    try:
        return _stored(await client.messaging.delete(args.mid, wait=True))
    finally:
        await client.close()


async def react(args) -> int:
    """``react MID EMOJI [--off] [--conversation ID] [--from NAME]``: add (or take back) my
    reaction to message MID (the options say which when MID names several messages here)."""
    client = await _online(args)
    try:
        react = client.messaging.react
        on = not args.off
        return _stored(
            await react(args.mid, args.emoji, on, conversation=args.conversation, sender=args.sender, wait=True)
        )
    finally:
        await client.close()


async def expire(args) -> int:
    """``expire (--to NAMES | --conversation ID) SECONDS``: the conversation's disappearing-message
    timer for every member (0: off)."""
    client = await _online(args)
    try:
        conv = args.conversation or await find_conversation(client, args.to, None)
        return _stored(await client.messaging.set_timer(conv, args.seconds, wait=True))
    finally:
        await client.close()
