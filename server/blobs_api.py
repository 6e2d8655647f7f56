"""REST: attachment blobs (PROTOCOL.md §13.4). ``POST /v1/blobs?conversation=CID`` stores the
request body as an opaque blob of that conversation and answers its id; ``GET /v1/blobs/{id}``
returns it to its owner and to the members of the conversation when it was uploaded;
``DELETE /v1/blobs/{id}`` lets its owner delete it (a file whose message was not sent);
``GET /v1/blob-limits`` tells a client the size limit and its quota before it uploads.

Neither direction holds a blob whole: an upload is streamed into the database in parts of
:data:`server.blob_store.PART_BYTES`, counted against ``max_blob_bytes`` (by
:mod:`server.bodycap`, from ``Content-Length`` before a byte is read and again while it streams
in) and against the uploader's ``blob_quota_bytes`` (here from ``Content-Length``, then by
:func:`server.blob_store.put_part` for each part, in the database, counting the parts of every
upload in progress); at most ``max_uploads_per_user`` uploads of one user are in progress at once.
A download is streamed part by part. A refused or broken upload leaves nothing stored.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response, StreamingResponse

from shared.errors import AuthFailed, Forbidden, InvalidRequest, QuotaExceeded, RateLimited

from . import blob_store, queries
from .models import User
from .store import now_ms
from .web import State, error_response, require_type
from .web import claims_of as _claims
from .web import json_response as _json
from .web import state as _state

log = logging.getLogger("e2ee.relay.blobs")
BLOB_TYPES = ("application/octet-stream",)


async def _user(request: Request, st: State) -> User:
    claims = _claims(request)
    async with st.sessions() as session:
        user = await queries.get_user(session, claims.sub)
    if user is None:
        raise AuthFailed("token subject is unknown", field="sub")
    return user


async def limits(request: Request) -> Response:
    """``{"max_blob_bytes", "quota_bytes", "used_bytes"}`` for the caller: what an upload may
    take, asked before one starts (a relay refusing a body it did not read closes the connection,
    and a client still writing may see only the reset, not the answer)."""
    st = _state(request)
    user = await _user(request, st)
    async with st.sessions() as session:
        used = await blob_store.used_bytes(session, user.id)
    s = st.settings
    return _json({"max_blob_bytes": s.max_blob_bytes, "quota_bytes": s.blob_quota_bytes, "used_bytes": used})


async def upload(request: Request) -> Response:
    """Store the body (``application/octet-stream``, 1..``max_blob_bytes`` bytes) as a blob of
    the conversation ``?conversation=CID``, which the caller must be a member of. 201
    ``{"id", "size"}``.

    Raises (as typed answers): BlobTooLarge [413], QuotaExceeded [413] and RateLimited [429]
    (``max_uploads_per_user`` uploads already in progress) (both with ``Connection: close``: the
    rest of the body is not read), Forbidden [403] (not a member), InvalidRequest
    (no conversation, an empty body), UnsupportedMediaType [415].
    """
    st = _state(request)
    user = await _user(request, st)
    cid = request.query_params.get("conversation", "")
    if not cid:
        raise InvalidRequest("conversation: the id of the conversation the blob is for", field="conversation")
    require_type(request, BLOB_TYPES)
    async with st.sessions() as session:
        if not await blob_store.is_member(session, cid, user.id):
            raise Forbidden("not a member of this conversation", field="conversation")
        used = await blob_store.used_bytes(session, user.id)
    room = st.settings.blob_quota_bytes - used
    declared = request.headers.get("content-length", "")
    try:
        if declared.isdigit() and int(declared) > room:
            raise blob_store.quota_exceeded(st.settings.blob_quota_bytes, used)
        blob_id, size = await _store(request, st, user, cid, room, used)
    except (QuotaExceeded, RateLimited) as exc:
        log.info("POST /v1/blobs refused code=%s user=%s: %s", exc.code, user.username, exc)
        resp = error_response(exc)
        resp.headers["Connection"] = "close"
        return resp
    log.info("blob stored id=%s conv=%s by=%s bytes=%d", blob_id, cid, user.username, size)
    return _json({"id": blob_id, "size": size}, 201)


async def _store(request: Request, st: State, user: User, cid: str, room: int, used: int) -> tuple[str, int]:
    """Stream the body into a new blob, one part written while the next is read (at most one
    write in flight); on any failure delete what was stored and re-raise."""
    blob_id = blob_store.new_blob_id()
    await st.writer.run(blob_store.begin(blob_id, cid, user.id, now_ms(), st.settings.max_uploads_per_user))
    size, parts, pending = 0, 0, bytearray()
    writing: asyncio.Future[None] | None = None

    async def put(data: bytes) -> None:
        nonlocal writing, parts
        if writing is not None:
            await writing
        op = blob_store.put_part(blob_id, user.id, parts, data, st.settings.blob_quota_bytes)
        writing = asyncio.ensure_future(st.writer.run(op, background=True))
        parts += 1

    try:
        async for piece in request.stream():
            size += len(piece)
            if size > room:
                raise blob_store.quota_exceeded(st.settings.blob_quota_bytes, used)
            pending += piece
            while len(pending) >= blob_store.PART_BYTES:
                await put(bytes(pending[: blob_store.PART_BYTES]))
                del pending[: blob_store.PART_BYTES]
        if size == 0:
            raise InvalidRequest("body: an empty blob", field="body")
        if pending:
            await put(bytes(pending))
        if writing is not None:
            await writing
        await st.writer.run(blob_store.finish(blob_id, user.id, size, st.settings.blob_quota_bytes))
    except BaseException as exc:
        if writing is not None:
            with contextlib.suppress(Exception):
                await writing
        await st.writer.run(blob_store.discard(blob_id), background=True)
        if isinstance(exc, ClientDisconnect):
            log.info("blob upload abandoned by=%s after %d bytes", user.username, size)
        raise
    return blob_id, size


async def download(request: Request) -> Response:
    """The blob's bytes (``application/octet-stream``, ``Content-Length``), streamed; a complete
    download marks it fetched for the caller (retention). Raises NotFound [404], Forbidden [403]."""
    st = _state(request)
    user = await _user(request, st)
    blob_id = request.path_params["blob_id"]
    async with st.sessions() as session:
        blob = await blob_store.readable(session, blob_id, user.id)

    async def fetch(index: int) -> bytes | None:
        async with st.sessions() as session:
            return await blob_store.part(session, blob_id, index)

    async def body() -> AsyncIterator[bytes]:
        """The parts in order, the next one read while this one is sent."""
        sent, index = 0, 0
        upcoming = asyncio.ensure_future(fetch(0))
        try:
            while (data := await upcoming) is not None:
                index += 1
                upcoming = asyncio.ensure_future(fetch(index))
                sent += len(data)
                yield data
        finally:
            upcoming.cancel()
        if sent != blob.size:  # deleted meanwhile: the client sees a short blob (attachment_truncated)
            log.warning("blob id=%s: %d of %d bytes left to send to %s", blob_id, sent, blob.size, user.username)
            return
        await st.writer.run(blob_store.mark_fetched(blob_id, user.id, now_ms()))
        log.info("blob fetched id=%s by=%s bytes=%d", blob_id, user.username, sent)

    headers = {"Content-Length": str(blob.size), "Cache-Control": "no-store"}
    return StreamingResponse(body(), media_type="application/octet-stream", headers=headers)


async def remove(request: Request) -> Response:
    """Delete a blob of the caller's (a file whose message was never sent: the quota is freed at
    once). ``{"deleted": 1}``. Raises NotFound [404], Forbidden [403] (someone else's blob)."""
    st = _state(request)
    user = await _user(request, st)
    blob_id = request.path_params["blob_id"]
    async with st.sessions() as session:
        blob = await blob_store.readable(session, blob_id, user.id)
    if blob.owner_id != user.id:
        raise Forbidden("only its uploader may delete a blob", field="blob")
    await st.writer.run(blob_store.discard(blob_id))
    log.info("blob deleted id=%s by=%s", blob_id, user.username)
    return _json({"deleted": 1})
