"""The chat header names a conversation once, its members when they add something."""

from __future__ import annotations

from types import SimpleNamespace

from client_tui.app import ChatScreen


def header(title: str, members: list[str], timer_s: int = 0) -> str:
    client = SimpleNamespace(
        members={"c1": members},
        titles={"c1": title},
        username="alice",
        inactive=set(),
        expiry=SimpleNamespace(timers={"c1": timer_s} if timer_s else {}),
    )
    return ChatScreen.title_text(SimpleNamespace(client=client, conversation="c1")).plain


def test_a_title_made_of_the_member_names_is_not_repeated():
    assert header("alice, bob", ["alice", "bob"]) == "alice, bob  ·  end-to-end encrypted as alice"


def test_a_chosen_title_is_followed_by_the_members():
    assert header("launch team", ["alice", "bob"]) == "launch team  ·  alice, bob  ·  end-to-end encrypted as alice"


def test_a_disappearing_timer_is_shown_right_after_the_title():
    # first, so a narrow terminal cuts the members and "encrypted as", never the timer's unit (newcomer F10)
    assert header("launch team", ["alice", "bob"], timer_s=300) == (
        "launch team  ·  ⏱ 5 min  ·  alice, bob  ·  end-to-end encrypted as alice"
    )
