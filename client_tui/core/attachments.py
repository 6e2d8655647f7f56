"""Attachments on the client (docs/PROTOCOL.md §13.3, §13.4): a file sealed in chunks under a
fresh key and streamed to the relay's blob store, and a blob streamed back, verified chunk by
chunk and as a whole, and opened into a 0600 file; :class:`Attachments` sends a file as a message
(its reference in an ``attachment`` document) and saves the file of one.

Neither direction holds the file whole: the upload reads, seals and sends about 1 MiB at a time,
the download decrypts what arrived and appends it to a :class:`~client_tui.core.private.PrivateStream`
(a 0600 temporary file renamed over the target only once every check passed). File reads,
AES-GCM and disk writes run in a worker thread, so an event loop that drives a UI keeps answering.
Progress is reported as ``progress(done, total)`` in blob bytes (ciphertext, header and tags
included).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import mimetypes
import os
import stat
import unicodedata
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

import httpx2
import msgspec

from shared import content
from shared.attachment import DEFAULT_CHUNK, AttachmentDecryptor, AttachmentEncryptor, blob_size, max_plaintext
from shared.b64 import b64u_decode, b64u_encode
from shared.content import AttachmentRef
from shared.errors import BlobTooLarge, InvalidRequest, QuotaExceeded

from .outbox import SEND_TIMEOUT_S
from .private import PrivateStream
from .record import Doc, Record
from .rest import Rest, relay_error

if TYPE_CHECKING:
    from .client import ChatClient

__all__ = ["Attachments", "Progress", "upload", "download", "blob_path", "check_file", "HOP_BYTES"]

log = logging.getLogger("e2ee.client.attachments")
Progress = Callable[[int, int], None]
"""``progress(done, total)``: blob bytes sent or received so far, and in all."""
HOP_BYTES = 1024 * 1024  # work handed to the worker thread at a time (reads + AES-GCM + writes)
OCTETS = "application/octet-stream"
MIB = 1024 * 1024


def _no_progress(done: int, total: int) -> None:
    pass


def _media_type(name: str) -> str:
    guessed = mimetypes.guess_type(name, strict=False)[0]
    return guessed if guessed and ";" not in guessed else OCTETS


def check_file(path: Path) -> None:
    """Refuse, in a user's words, a ``path`` that cannot be sent as a file: missing, a folder, not
    a regular file (a device such as ``/dev/null``, a pipe, a socket) or not readable.

    Raises:
        InvalidRequest: naming ``path`` and what it is (``field`` ``file``).
    """
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise InvalidRequest(f"{path}: no such file", field="file") from None
    except OSError as exc:
        why = (exc.strerror or "system error").lower()
        raise InvalidRequest(f"{path}: cannot be read ({why})", field="file") from None
    if stat.S_ISDIR(mode):
        raise InvalidRequest(f"{path} is a folder, not a file: give a file in it", field="file")
    if not stat.S_ISREG(mode):
        raise InvalidRequest(f"{path} is not a regular file (a device, pipe or socket): give a file", field="file")
    if not os.access(path, os.R_OK):
        raise InvalidRequest(f"{path}: cannot be read (permission denied)", field="file")


def _check_name(name: str) -> None:
    """Refuse a file name an attachment reference cannot carry (:func:`shared.content.check`'s
    ``att.name`` rule), in words that name the file and suggest renaming it.

    Raises:
        InvalidRequest: the name is empty, ``.``/``..``, a path, over
            :data:`~shared.content.MAX_NAME_CHARS` characters, or has control characters.
    """
    why = (
        "it has control characters (escape sequences, tabs, newlines)"
        if any(unicodedata.category(ch) == "Cc" for ch in name)
        else f"it is longer than {content.MAX_NAME_CHARS} characters"
        if len(name) > content.MAX_NAME_CHARS
        else "it is not a file name"
        if not name or name in (".", "..") or "/" in name or "\\" in name
        else "it is not valid UTF-8"
        if not name.isprintable() and _surrogates(name)
        else ""
    )
    if why:
        raise InvalidRequest(f"the file name {name!r} cannot be sent: {why}; rename the file", field="file")


def _surrogates(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _take(pieces: Iterator[bytes], limit: int) -> list[bytes]:
    """The next pieces of ``pieces`` up to about ``limit`` bytes (blocking: a worker thread's)."""
    out, n = [], 0
    for piece in pieces:
        out.append(piece)
        n += len(piece)
        if n >= limit:
            break
    return out


async def upload(
    rest: Rest,
    conversation: str,
    path: Path,
    *,
    name: str | None = None,
    media_type: str | None = None,
    chunk: int = DEFAULT_CHUNK,
    caption: str = "",
    progress: Progress | None = None,
) -> AttachmentRef:
    """Seal the file at ``path`` under a fresh 32-byte key and store it as a blob of
    ``conversation`` (``POST /v1/blobs``); returns the reference a message carries.

    Args:
        name: the name shown to recipients (default the file's own); ``media_type`` default
            guessed from it (``application/octet-stream`` otherwise); ``caption``: the text the
            message will carry (checked with them before anything is sent).
        chunk: plaintext bytes per chunk (1 KiB..4 MiB, default 64 KiB).
        progress: called with (blob bytes sent, blob size) after each piece.

    Raises:
        InvalidRequest: not a regular file, a file name that cannot be sent (control characters,
            too long: the user is asked to rename it), or it changed size while read (``field`` ``file``).
        ContentInvalid: a media type a reference cannot carry (before anything is sent).
        BlobTooLarge, QuotaExceeded: the relay's limits (``GET /v1/blob-limits``) leave no room for
            it: refused before anything is sealed or sent.
        ClientError: the relay's refusal (``forbidden``, or a limit another upload reached first
            ..., with ``status``), or ``unreachable``.
        OSError: the file cannot be read.
    """
    path = Path(path)
    name = name or path.name
    media_type = media_type or _media_type(name)
    _check_name(name)
    content.check(
        content.Attachment(att=_ref("x", bytes(32), name, media_type, 0, bytes(32), chunk), body="", ts=0, ctr=1)
    )
    f = await asyncio.to_thread(open, path, "rb")
    try:
        st = os.fstat(f.fileno())
        if not path.is_file():
            raise InvalidRequest(f"{path} is not a regular file", field="file")
        encryptor = AttachmentEncryptor(st.st_size, chunk)
        total, report = blob_size(st.st_size, chunk), progress or _no_progress
        await _check_limits(rest, path, st.st_size, total, chunk)

        async def body() -> AsyncIterator[bytes]:
            pieces, sent = encryptor.stream(f.read), 0
            while batch := await asyncio.to_thread(_take, pieces, HOP_BYTES):
                piece = b"".join(batch)  # one socket write per hop, not one per chunk
                yield piece
                sent += len(piece)
                report(sent, total)

        headers = {
            "Authorization": f"Bearer {await rest.socket_token()}",
            "Content-Type": OCTETS,
            "Content-Length": str(total),
        }
        try:
            resp = await rest.http.post(
                "/v1/blobs", params={"conversation": conversation}, content=body(), headers=headers
            )
        except ValueError as exc:  # the file shrank while it was read (AttachmentEncryptor.stream)
            raise InvalidRequest(f"{path}: {exc}", field="file") from None
        except httpx2.HTTPError as exc:
            raise rest.unreachable(exc) from None
        if resp.status_code >= 400:
            raise relay_error(resp)
        sealed = encryptor.finish()
    finally:
        f.close()
    blob_id = resp.json()["id"]
    log.info("attachment stored blob=%s bytes=%d", blob_id, total)
    return _ref(blob_id, sealed.key, name, media_type, sealed.size, sealed.sha256, chunk)


async def _check_limits(rest: Rest, path: Path, size: int, total: int, chunk: int) -> None:
    """Refuse here what the relay would refuse (``GET /v1/blob-limits``), before a byte is sealed.

    Raises:
        BlobTooLarge: the blob would exceed ``max_blob_bytes``; QuotaExceeded: the quota's rest.
    """
    limits = await rest.request("GET", "/v1/blob-limits")
    largest = limits["max_blob_bytes"]
    if total > largest:
        most = max_plaintext(largest, chunk)
        raise BlobTooLarge(
            f"{path.name} is {size} bytes ({size / MIB:.2f} MiB); the relay takes files up to {most} bytes "
            f"({most / MIB:.2f} MiB: its limit of {largest} bytes is on the sealed file, "
            f"{largest - most} of them header and chunk tags)",
            field="file",
        )
    room = limits["quota_bytes"] - limits["used_bytes"]
    if total > room:
        raise QuotaExceeded(
            f"{path.name} needs {total} bytes on the relay; {max(0, room)} of your {limits['quota_bytes']} are left "
            "(blobs are deleted once every member fetched them)",
            field="blob_quota_bytes",
        )


def _ref(blob_id: str, key: bytes, name: str, media_type: str, size: int, sha256: bytes, chunk: int) -> AttachmentRef:
    return AttachmentRef(
        id=blob_id, key=b64u_encode(key), name=name, type=media_type, size=size, sha256=b64u_encode(sha256), chunk=chunk
    )


async def download(rest: Rest, ref: AttachmentRef, out: Path, *, progress: Progress | None = None) -> Path:
    """Fetch blob ``ref.id`` (``GET /v1/blobs/{id}``), check it against ``ref`` and write the
    file to ``out`` (mode 0600, replaced atomically); returns ``out``. Nothing is written to
    ``out`` unless every chunk and the whole blob verified.

    Raises:
        AttachmentMalformed: ``ref`` has a key or hash of the wrong form.
        AttachmentKeyMismatch, ChunkTampered, ChunkOutOfOrder, AttachmentTruncated,
            AttachmentHashMismatch, AttachmentSizeMismatch: the blob does not verify (each names
            what is wrong; shared.attachment).
        ClientError: the relay's refusal (``not_found``, ``forbidden``) or ``unreachable``
            (also a download cut short by the network).
        OSError: ``out`` cannot be written.
    """
    decryptor = AttachmentDecryptor(
        b64u_decode(ref.key, "att.key"), size=ref.size, sha256=b64u_decode(ref.sha256, "att.sha256"), chunk=ref.chunk
    )
    total, report = decryptor.expected, progress or _no_progress
    headers = {"Authorization": f"Bearer {await rest.socket_token()}"}

    def feed(data: bytes, stream: PrivateStream) -> None:
        stream.write(decryptor.update(data))

    stream = await asyncio.to_thread(PrivateStream, Path(out))
    try:
        async with rest.http.stream("GET", blob_path(ref.id), headers=headers) as resp:
            if resp.status_code >= 400:
                await resp.aread()
                raise relay_error(resp)
            pending: list[bytes] = []
            waiting = 0
            async for piece in resp.aiter_raw():
                pending.append(piece)
                waiting += len(piece)
                if waiting >= HOP_BYTES:
                    await asyncio.to_thread(feed, b"".join(pending), stream)
                    pending, waiting = [], 0
                report(decryptor.received + waiting, total)
            await asyncio.to_thread(feed, b"".join(pending), stream)
        await asyncio.to_thread(lambda: stream.write(decryptor.finish()))
        await asyncio.to_thread(stream.commit)
    except httpx2.HTTPError as exc:
        await asyncio.to_thread(stream.abort)
        raise rest.unreachable(exc) from None
    except BaseException:
        await asyncio.to_thread(stream.abort)
        raise
    log.info("attachment opened blob=%s bytes=%d", ref.id, ref.size)
    return Path(out)


def blob_path(blob_id: str) -> str:
    """``/v1/blobs/{blob_id}`` with the id percent-encoded as one path segment (RFC 3986 §3.3): a
    ``/``, ``?`` or ``#`` stays inside the segment. ``.`` and ``..`` (dot segments, unreserved) are
    refused earlier, by ``shared.content`` (an ``att.id`` is 1-64 of ``[A-Za-z0-9_-]``)."""
    return "/v1/blobs/" + quote(blob_id, safe="")


class Attachments:
    """Files as messages for one :class:`~client_tui.core.ChatClient` (``client.attachments``):
    the blob goes to the relay first, then an ``attachment`` document (its reference and a
    caption) is sealed to the conversation's members through the outbox like any message."""

    def __init__(self, client: ChatClient) -> None:
        self.c = client

    async def send(
        self,
        conversation: str,
        path: Path,
        *,
        caption: str = "",
        progress: Progress | None = None,
        wait: bool = True,
        timeout: float = SEND_TIMEOUT_S,
    ) -> Record:
        """Upload the file at ``path`` (:func:`upload`) and send its reference with ``caption``;
        returns the message's record (stored, with ``wait``). A blob whose message cannot be
        sealed (a key change, members without keys ...) is deleted again (``DELETE /v1/blobs/{id}``).

        Raises:
            as :func:`upload`; then as :meth:`ChatClient.send_text` (KeyChangeBlocked, AudienceGrew,
            ContentInvalid, ClientError, TimeoutError).
        """
        ref = await upload(self.c.rest, conversation, path, caption=caption, progress=progress)
        doc = Doc(t="attachment", att=msgspec.to_builtins(ref))
        try:
            item = await self.c.outgoing.queue(conversation, caption, not wait, doc)
        except BaseException:  # never sealed: nobody can open the blob, so its quota goes back now
            with contextlib.suppress(Exception):
                await self.c.rest.request("DELETE", blob_path(ref.id))
            raise
        if wait:
            await self.c.outgoing.stored(item, timeout)
        return item.record

    async def reference(self, mid: str, *, conversation: str | None = None, sender: str | None = None) -> AttachmentRef:
        """The reference carried by the attachment message ``mid`` stored here (in
        ``conversation``, written by ``sender``).

        A mid is unique per sender, not globally (any member, helped by a relay that reads the
        headers, can reuse another's), so a mid naming several stored messages is refused rather
        than resolved to the first one stored.

        Raises:
            UnknownReference: no message ``mid`` here; InvalidRequest (``field`` ``mid``): it
                carries no file, or it names several messages (``--conversation``/``--from`` tell
                which).
        """
        rec = await self.c.messaging.message(mid, conversation, sender)
        if rec.content.t != "attachment" or not rec.content.att:
            raise InvalidRequest(f"message {mid} carries no file", field="mid")
        return msgspec.convert(rec.content.att, AttachmentRef)

    async def save(
        self,
        mid: str,
        out: Path,
        *,
        conversation: str | None = None,
        sender: str | None = None,
        progress: Progress | None = None,
    ) -> Path:
        """Download, verify and open the file of attachment message ``mid`` (in ``conversation``,
        by ``sender``) into ``out`` (0600).

        Raises:
            as :meth:`reference` and :func:`download`.
        """
        ref = await self.reference(mid, conversation=conversation, sender=sender)
        return await download(self.c.rest, ref, out, progress=progress)
