"""The words of the lines a membership change adds to a conversation (plain text: the message log
renders them as text, never as markup, so a title or a name cannot style or hide anything)."""

from __future__ import annotations

from shared.errors import E2EEError, ErrorCode
from shared.membership import Statement


def line_id(st: Statement) -> str:
    """The local id of a verified statement's line: the same statement is one line, however often
    the log is verified again."""
    return f"m-{st.hash[:22]}"


def _names(names) -> str:
    names = list(names)
    return ", ".join(names) if names else "nobody"


def change(st: Statement, prev: Statement | None) -> str:
    """What ``st`` does, as a sentence without its actor: "added dave", "renamed ..."."""
    before = set(prev.usernames) if prev is not None else set()
    after = set(st.usernames)
    if st.op == "create":
        return f"created the conversation “{st.title}” with {_names(sorted(after - {st.actor}))}"
    if st.op == "add":
        return f"added {_names(sorted(after - before))}"
    if st.op == "remove":
        gone = sorted(before - after)
        return "left the conversation" if gone == [st.actor] else f"removed {_names(gone)}"
    if st.op == "title":
        return f"renamed the conversation to “{st.title}”"
    if st.op == "admins":
        if st.admins is None:
            return "let every member change the members"
        return f"made {_names(st.admins)} the only members who may change the members"
    return "moved to new keys in this conversation (signed with their previous key)"


def verified(st: Statement, prev: Statement | None) -> str:
    return f"{change(st, prev)} · epoch {st.ep}, signature verified"


def invalid(claim: Statement | None, prev: Statement | None, exc: E2EEError) -> str:
    what = f"{claim.actor} {change(claim, prev)}" if claim is not None else "a change that cannot be read"
    return (
        f"⚠ ignored a membership change that does not verify ({exc.code}): it claims “{what}”. "
        "Nothing changed; the relay may be lying about who is in this conversation."
    )


def fork(exc: E2EEError) -> str:
    return (
        f"⚠ the relay's membership log contradicts the one verified here ({exc.code}: {exc.message}). "
        "The verified one is kept; messages are not sent until the relay shows it again."
    )


def withheld(claimed: int, verified_ep: int) -> str:
    return (
        f"⚠ the relay says this conversation is at epoch {claimed}, but shows no change after epoch "
        f"{verified_ep} that verifies: a change is withheld. Messages are not sent until it is shown."
    )


def unseen(sender: str, ep: int, verified_ep: int) -> str:
    return (
        f"⚠ {sender} sent a message sealed to epoch {ep} of the members, but the relay shows no change after "
        f"epoch {verified_ep}: a change is withheld from you. Your messages here wait until it is shown."
    )


def downgrade() -> str:
    return (
        "⚠ the relay now lists this conversation as made before signed membership, but its membership log "
        "was verified here: the verified members are kept, and messages are not sent until the relay serves "
        "the log again."
    )


def unlisted() -> str:
    return (
        "⚠ the relay no longer lists this conversation, but its verified membership log has you as a member: "
        "no one removed you. The relay may be hiding it from you."
    )


def legacy() -> str:
    return (
        "this conversation was made before signed membership: its members cannot be verified, so it "
        "is read-only. Start a new conversation to keep talking."
    )


WARNING_WORDS = {
    ErrorCode.STATEMENT_SIGNATURE_INVALID: "ignored a change whose signature does not verify",
    ErrorCode.ACTOR_NOT_MEMBER: "ignored a change made by someone who is not a member",
    ErrorCode.ACTOR_KEY_MISMATCH: "ignored a change signed with a key the log does not name",
    ErrorCode.EPOCH_SKIPPED: "ignored a change that does not follow the log",
    ErrorCode.CHAIN_BROKEN: "ignored a change that does not follow the log",
    ErrorCode.CONVERSATION_MISMATCH: "ignored a change that belongs to another conversation",
    ErrorCode.POLICY_VIOLATION: "ignored a change its author may not make",
    ErrorCode.STATEMENT_MALFORMED: "ignored a malformed change",
    ErrorCode.MEMBERSHIP_FORK: "the relay's log contradicts the one verified here (a fork, or an older log)",
    ErrorCode.MEMBERSHIP_WITHHELD: "the relay withholds a change of the members",
    ErrorCode.EPOCH_MISMATCH: "a message was sealed to a change the relay does not show",
    ErrorCode.INVALID_REQUEST: "made before signed membership: read-only",
}


def warning_words(code: str) -> str:
    """A warning line's gist in a few plain words (the attacks table, notifications)."""
    return WARNING_WORDS.get(code, "a change of the members could not be verified")
