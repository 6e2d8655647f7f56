"""Between the wire's content documents (:mod:`shared.content`, docs/PROTOCOL.md §13) and the
records the client keeps (:class:`~client_tui.core.record.Doc` beside the text).

The one place that builds the plaintext of a message from a record and reads a record's text
and document from an opened envelope: the outbox seals :func:`plaintext`, the inbox (and a
message opened later, after a key decision) reads with :func:`read`.
"""

from __future__ import annotations

import msgspec

from shared import content as wire
from shared import envelope
from shared.errors import ContentInvalid

from .record import Doc, Record

__all__ = ["from_wire", "plaintext", "read", "to_wire"]


def to_wire(rec: Record) -> wire.Content:
    """The content document of my record ``rec``: its type and references (``rec.content``), its
    text, ``ts`` (ms) and counter; ``exp`` when a timer was set.

    Raises:
        ContentInvalid: the record's document is incomplete or out of its limits (a ``ref`` that
            is not a message id, an empty body, ...); ``field`` names the member.
    """
    d, body = rec.content, rec.text or ""
    base = {"ts": rec.ts, "ctr": rec.ctr or 1, "exp": d.exp or 0}
    try:
        match d.t:
            case "text":
                doc: wire.Content = wire.Text(body=body, **base)
            case "reply":
                doc = wire.Reply(body=body, ref=_ref(d), **base)
            case "edit":
                doc = wire.Edit(body=body, ref=_ref(d), **base)
            case "delete":
                doc = wire.Delete(ref=_ref(d), **base)
            case "react":
                doc = wire.React(ref=_ref(d), emoji=d.emoji or "", on=d.on, **base)
            case "read":
                doc = wire.Read(ref=_ref(d), upto=d.upto or 0, **base)
            case "attachment":
                doc = wire.Attachment(att=msgspec.convert(d.att, wire.AttachmentRef), body=body, **base)
            case "expire":
                doc = wire.Expire(seconds=d.seconds or 0, **base)
            case "title":
                doc = wire.Title(title=d.title or "", **base)
            case _:
                raise ContentInvalid(f"no content document of type {d.t[:32]!r}", field="t")
    except msgspec.ValidationError as exc:
        raise ContentInvalid(f"att: {exc}", field="att") from None
    return wire.check(doc)


def _ref(d: Doc) -> str:
    if not d.ref:
        raise ContentInvalid(f"a {d.t} document needs the id of the message it refers to", field="ref")
    return d.ref


def plaintext(rec: Record, scheme: wire.Scheme = wire.DEFAULT_SCHEME) -> bytes:
    """The plaintext ``envelope.seal`` will encrypt for ``rec``: its content document, encoded and
    padded (``shared.content.encode``). The outbox calls it to refuse a message before it is queued.

    Raises:
        ContentInvalid, ContentTooLarge (over ``shared.content.MAX_CONTENT_BYTES``).
    """
    return wire.encode(to_wire(rec), scheme)


def from_wire(doc: wire.Content) -> tuple[str | None, Doc]:
    """The text (a document's body; None without one) and the record's :class:`Doc` of a verified
    content document."""
    local = Doc(t=doc.kind, exp=doc.exp or None)
    text: str | None = getattr(doc, "body", None)
    if isinstance(doc, wire.Reply | wire.Edit | wire.Delete | wire.React | wire.Read):
        local.ref = doc.ref
    if isinstance(doc, wire.React):
        local.emoji, local.on = doc.emoji, doc.on
    elif isinstance(doc, wire.Read):
        local.upto = doc.upto
    elif isinstance(doc, wire.Attachment):
        local.att = msgspec.to_builtins(doc.att)
    elif isinstance(doc, wire.Expire):
        local.seconds = doc.seconds
    elif isinstance(doc, wire.Title):
        local.title = doc.title
    return text, local


def read(opened: envelope.Opened) -> tuple[str | None, Doc, int, int]:
    """The text, document, ``ts`` and counter of an opened envelope (``envelope.open`` decoded its
    content document strictly and checked its ``exp`` against the header's ``xp``).

    Returns:
        ``(text, doc, ts, ctr)``: ``text`` is the body (None for a document without one).
    """
    text, local = from_wire(opened.content)
    return text, local, opened.ts, opened.ctr
