"""The inspector: what the relay stored for a message (never its plaintext), what sealing or
opening it cost here, and why a message did not open, in plain words."""

from __future__ import annotations

import json
import time

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from shared.b64 import b64u_decode
from shared.errors import E2EEError, ErrorCode

from .core.record import Record
from .display import shorten
from .inspectdoc import inspect_document
from .safe import one_line, plain

UNREADABLE_TEXT = {
    ErrorCode.NOT_A_RECIPIENT: "a message you cannot read (it was not encrypted for your key)",
    ErrorCode.CONTENT_INVALID: "could not read (its sender's app wrote a message this version does not understand)",
    ErrorCode.CONTENT_TOO_LARGE: "could not read (its content is larger than a message may be)",
    ErrorCode.KEY_ERASED: "sealed to a key of yours deleted for forward secrecy: it can no longer be opened",
}


_MALFORMED = "it is not a well-formed envelope: damaged on the way, or built wrongly"
# What each reason an envelope fails to open means, in words a user can act on (the inspector
# shows it next to the error code; PROTOCOL.md §5.7 lists the checks).
REASON_WORDS = {
    ErrorCode.CONVERSATION_MISMATCH: "it was written for another conversation: the relay delivered it in this one",
    ErrorCode.SENDER_MISMATCH: "the relay names someone other than the sender who signed it",
    ErrorCode.SIGNATURE_INVALID: "its signature does not verify: it was changed after it was sent, or forged",
    ErrorCode.UNKNOWN_SENDER_KEY: "it is signed with a key that is not the one you have for this sender",
    ErrorCode.DECRYPTION_FAILED: "its encrypted text fails the integrity check: it was changed on the way",
    ErrorCode.UNWRAP_FAILED: "the message key encrypted for you is damaged, or was not made for your key",
    ErrorCode.NOT_A_RECIPIENT: "it was not encrypted for your key",
    ErrorCode.RETIRED_SENDER_KEY: "it is signed by a key its sender replaced, and the relay stored it after the "
    "replacement: a stolen or leaked old key, not the sender",
    ErrorCode.KEY_CHANGE_UNREVIEWED: "it is signed by a new key of the sender that their previous key did not sign: "
    "review the key change (Ctrl+K) to read it",
    ErrorCode.KEY_COMMITMENT_INVALID: "the key it carries for you is not the one it committed to: its sender may show "
    "different people different texts",
    ErrorCode.AUDIENCE_MISMATCH: "it was sealed to other people than the conversation's verified members",
    ErrorCode.EPOCH_MISMATCH: "it was sealed to a membership change the relay has not shown you, or to another "
    "history of the members than the one you verified",
    ErrorCode.RECIPIENT_LIST_INVALID: "its list of recipients was changed after it was signed",
    ErrorCode.RECIPIENT_DUPLICATED: "its list of recipients names one key twice",
    ErrorCode.UNSUPPORTED_ALGORITHM: "it uses a format or an algorithm this client does not accept",
    ErrorCode.ENVELOPE_TOO_LARGE: "it is larger than this client accepts",
    ErrorCode.TOO_MANY_RECIPIENTS: "it names more recipients than this client accepts",
    ErrorCode.ENVELOPE_MALFORMED: _MALFORMED,
    ErrorCode.BASE64_INVALID: _MALFORMED,
    ErrorCode.NONCE_INVALID: _MALFORMED,
    ErrorCode.TAG_INVALID: _MALFORMED,
    ErrorCode.TRAILING_DATA: _MALFORMED,
    ErrorCode.DUPLICATE_MEMBER: _MALFORMED,
    ErrorCode.MALFORMED: _MALFORMED,
    ErrorCode.CONTENT_INVALID: "it verified and decrypted, but what its sender wrote inside is not a content document "
    "of this version (a newer or faulty app): nothing in it was applied",
    ErrorCode.CONTENT_TOO_LARGE: "it verified and decrypted, but its content is larger than a message may be",
    ErrorCode.KEY_ERASED: "it was sealed only to a key of yours whose private half this client deleted for forward "
    "secrecy, after the relay reported every message sealed to it delivered: nobody can open it any more. It is "
    "not a forgery; if the relay still held it, it said otherwise when asked",
}


def unreadable_text(reason: str, sender: str | None = None, detail: str = "") -> str:
    """The message list's line for a message that did not open ("could not verify"); a message
    held back by a key change names the sender: "bob's key changed: review it to read this"; one
    sealed to an erased key of mine says which and when (``detail``, the client's own words:
    "sealed to your key 3fa9…, deleted on 2026-12-02 for forward secrecy: ...")."""
    if reason == ErrorCode.KEY_CHANGE_UNREVIEWED:
        return f"{one_line(sender) if sender else 'the sender'}'s key changed: review it to read this"
    if reason == ErrorCode.KEY_ERASED and detail:
        return one_line(detail)
    return UNREADABLE_TEXT.get(reason, "could not verify")


def reason_words(reason: str) -> str:
    """Why a message did not open, in plain words (for the inspector), from its error code."""
    return REASON_WORDS.get(reason, "it failed a check before any text was shown")


# -- the inspector ---------------------------------------------------------------------------------
MAX_SHOWN_CHARS = 1200


def _b64len(value: str) -> int:
    try:
        return len(b64u_decode(value))
    except E2EEError:
        return -1


def inspect_membership_line(record: Record) -> RenderableType:
    """What a membership line stands for: a statement of the conversation's membership log signed
    by its actor (operation, epoch, hash, whether the signature and chain were verified), or a
    warning about one that was refused. It is no sealed message: it has no envelope."""
    info = record.info
    parts: list[RenderableType] = [Text("A membership statement", style="bold")]
    facts = Table.grid(padding=(0, 2))
    facts.add_column(style="dim")
    facts.add_column()
    facts.add_row("actor", plain(record.sender))
    if info.op is not None:
        facts.add_row("operation", plain(info.op))
    if info.ep is not None:
        facts.add_row("epoch", str(info.ep))
    if info.hash is not None:
        facts.add_row("hash", plain(info.hash))
    if info.verified:
        facts.add_row(
            "signature", Text("verified (the actor's signing key, the chain to the epoch before)", style="green")
        )
    if info.warning:
        facts.add_row(
            "refused", Text.assemble(plain(info.warning, "bold yellow"), plain("  " + (info.detail or ""), "yellow"))
        )
    parts.append(facts)
    parts.append(
        Text(
            "Signed by a member and checked here; the relay only keeps the log and cannot "
            "change who is in the conversation. Not a message: nothing was sealed.",
            style="dim",
        )
    )
    return Group(*parts)


def inspect_record(
    record: Record | None, *, kid_names: dict[str, str], me: str, readers: list[str] | None = None
) -> RenderableType:
    """What the relay stored for ``record`` (never its plaintext) and what it cost here; the
    document's part (edits, reactions, ``readers``: who read it) shown here only."""
    if record is None:
        return Text("Select a message (Ctrl+Up / Ctrl+Down, or click one) to see what the relay stored.", style="dim")
    if record.state == "system":
        return inspect_membership_line(record)
    parts: list[RenderableType] = []
    document = inspect_document(record, readers or [])
    if document is not None:
        parts.append(document)
    title = Text("What the relay stored", style="bold")
    if record.seq is not None:
        title.append(f"  seq {record.seq}", style="dim")
    parts.append(title)
    if record.state == "unreadable":
        parts.append(
            Text.assemble(
                ("cannot be opened: " if record.reason == ErrorCode.KEY_ERASED else "could not verify: ", "bold red"),
                plain(record.reason, "red"),
                (" — " + reason_words(record.reason), "red"),
                plain("  " + record.detail, "dim"),
            )
        )
    env = record.envelope
    if env is None:
        parts.append(Text("not sealed yet", style="dim"))
        return Group(*parts)
    try:
        doc = json.loads(env)
        if not isinstance(doc, dict):
            raise ValueError
    except (ValueError, RecursionError):  # any bytes a relay stored: not JSON, another shape, too deep
        parts.append(Text(f"{len(env)} bytes, not a JSON envelope:", style="yellow"))
        parts.append(plain(repr(env[:600])))
        return Group(*parts)
    sizes = Table.grid(padding=(0, 2))
    sizes.add_column(style="dim")
    sizes.add_column(justify="right")
    sizes.add_row("envelope", f"{len(env)} bytes")
    recipients = doc.get("recipients") if isinstance(doc.get("recipients"), list) else []
    for name, member in (
        ("protected header", "protected"),
        ("ciphertext", "ciphertext"),
        ("iv", "iv"),
        ("tag", "tag"),
        ("signature", "sig"),
    ):
        if isinstance(doc.get(member), str):
            sizes.add_row(name, f"{_b64len(doc[member])} bytes")
    if recipients:
        first = recipients[0].get("encrypted_key", "") if isinstance(recipients[0], dict) else ""
        sizes.add_row("wrapped keys", f"{len(recipients)} × {_b64len(first) if isinstance(first, str) else '?'} bytes")
    parts.append(sizes)
    header = None
    if isinstance(doc.get("protected"), str):
        try:
            header = json.loads(b64u_decode(doc["protected"]))
        except (E2EEError, ValueError, RecursionError):
            header = None
    kids = Table(title="recipients (wrap key ids)", title_justify="left", show_header=False, box=None, padding=(0, 1))
    kids.add_column()
    kids.add_column(style="dim")
    malformed = 0
    for r in recipients:
        kid = _kid_of(r)
        malformed += kid is None
        who = kid_names.get(kid, "unknown key") if kid is not None else "malformed recipient entry"
        kids.add_row(plain(kid or "?"), plain(who + (" (you)" if who == me else "")))
    parts.append(kids)
    if malformed:
        parts.append(Text(f"{malformed} recipient entr(y/ies) malformed: no header with a string kid", style="yellow"))
    t = record.info.timings
    if t:
        cost = Table(title="measured here (ms)", title_justify="left", show_header=False, box=None, padding=(0, 1))
        cost.add_column(style="dim")
        cost.add_column(justify="right")
        if "wrap" in t:
            wraps = t.get("wrap") or []
            cost.add_row("encrypt (AES-256-GCM + encoding)", f"{t.get('encrypt', 0):.3f}")
            cost.add_row(
                f"wrap × {len(wraps)} (RSA-OAEP-256)",
                f"{sum(wraps):.3f}" + (f"  ({', '.join(f'{w:.3f}' for w in wraps)})" if wraps else ""),
            )
            cost.add_row("sign (Ed25519)", f"{t.get('sign', 0):.3f}")
        else:
            cost.add_row("verify (Ed25519)", f"{t.get('verify', 0):.3f}")
            cost.add_row("unwrap (RSA-OAEP-256)", f"{t.get('unwrap', 0):.3f}")
            cost.add_row("decrypt (AES-256-GCM + decoding)", f"{t.get('decrypt', 0):.3f}")
        cost.add_row("total", f"{t.get('total', 0):.3f}")
        parts.append(cost)
    if isinstance(header, dict):
        parts.append(relay_learns(header, doc, len(recipients)))
    if header is not None:
        parts.append(Text("protected header (the relay can read this: routing metadata)", style="bold"))
        parts.append(plain(_dumps(header, doc["protected"])))
    parts.append(Text("envelope as stored (JWE General JSON + sig)", style="bold"))
    parts.append(plain(_dumps(doc, env)))
    return Group(*parts)


def relay_learns(header: dict, doc: dict, recipients: int) -> Text:
    """One paragraph: what the relay learns from this envelope (docs/THREAT_MODEL.md §2) and what
    stays inside the ciphertext since protocol v3 (kind, text, the sender's clock and counter,
    reactions, file names)."""
    size = _b64len(doc["ciphertext"]) if isinstance(doc.get("ciphertext"), str) else None
    xp = header.get("xp")
    learns = [
        f"sender {header.get('snd')!s}",
        f"conversation {header.get('cid')!s}",
        f"{recipients} recipient key(s)",
        f"a {size}-byte padded bucket" if size is not None else "its size",
        "when it was stored and fetched",
    ]
    if isinstance(xp, int) and xp > 0:
        learns.append("an expiry hour (" + time.strftime("%Y-%m-%d %H:00 UTC", time.gmtime(xp / 1000)) + ")")
    t = Text("the relay learns: ", style="bold")
    t.append(plain(", ".join(learns)))
    t.append(
        "\nnot: whether it is a message, an edit, a reaction, a receipt or a file; its text; the "
        "sender's clock and counter; file names and keys",
        style="dim",
    )
    return t


def _dumps(value: object, raw: bytes | str) -> str:
    """``value`` as indented JSON with long strings shortened; nested too deep to print: the first
    600 characters of ``raw`` as they were stored."""
    try:
        return json.dumps(shorten(value, MAX_SHOWN_CHARS), indent=1, ensure_ascii=False)
    except (ValueError, RecursionError):
        return "nested too deep to show: " + repr(raw[:600])


def _kid_of(entry: object) -> str | None:
    """The ``header.kid`` of one ``recipients`` entry of an unverified envelope, or None when the
    entry is not of that shape (a relay can store any JSON: a list, a number, a kid that is an object)."""
    header = entry.get("header") if isinstance(entry, dict) else None
    kid = header.get("kid") if isinstance(header, dict) else None
    return kid if isinstance(kid, str) else None
