"""REST: conversations (their signed membership logs: create, append, read; the list of one's
conversations) and the REST send."""

from __future__ import annotations

import logging

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from shared import frames
from shared import membership as shared_membership
from shared.errors import (
    AuthFailed,
    InvalidRequest,
    LimitExceeded,
)

from . import membership, queries
from .web import ENVELOPE_TYPES
from .web import claims_of as _claims
from .web import json_response as _json
from .web import read_body as _body
from .web import require_type as _require_type
from .web import state as _state

log = logging.getLogger("e2ee.relay.http")


class StatementBody(msgspec.Struct, forbid_unknown_fields=True):
    statement: str  # a membership statement's signed form (shared.membership, PROTOCOL.md §12)


async def _statement(request: Request, cid: str | None) -> Response:
    """Check a membership statement against the stored log, store it (the member table follows its
    members), and tell every member before and after (``members_changed``)."""
    claims = _claims(request)
    st = _state(request)
    body = await _body(request, StatementBody)
    statement = shared_membership.parse(body.statement)  # the form only: StatementMalformed before any lookup
    # an update (a rotation's new keys moved into each conversation: one per conversation, checked
    # to be the actor's current keys) has a budget of its own, so that a rotation by a user in many
    # conversations is not cut off by the member-change limit
    if cid is None:
        limit = st.limits.conversations
    else:
        limit = st.limits.key_updates if statement.op == "update" else st.limits.member_changes
    limit.check(claims.sub)
    async with st.sessions() as session:
        checked = await membership.check(session, statement, claims.sub, cid=cid, max_members=st.settings.max_members)
    s = checked.statement
    if not checked.duplicate:
        before, after = await st.writer.run(membership.append(checked))
        st.relay.forget_members(s.cid)
        st.relay.notify(before + after, frames.Event("members_changed", conversation=s.cid))
        log.info("membership conv=%s epoch=%d op=%s by=%s members=%d", s.cid, s.ep, s.op, claims.sub, len(s.members))
    return _json(
        {"id": s.cid, "title": s.title, "members": list(s.usernames), "epoch": s.ep, "head": s.hash},
        200 if checked.duplicate else 201,
    )


async def create_conversation(request: Request) -> Response:
    """A new conversation from its signed creation statement (the client chose its id)."""
    return await _statement(request, None)


async def append_statement(request: Request) -> Response:
    """The next statement of a conversation's membership log (add, remove, title, admins, update)."""
    return await _statement(request, request.path_params["cid"])


async def membership_log(request: Request) -> Response:
    """The conversation's membership log, oldest first (after epoch ``?after=N`` if given): all of
    it for a member, up to their removal for a former member."""
    claims = _claims(request)
    st = _state(request)
    try:
        after = int(request.query_params.get("after", "-1"))
    except ValueError:
        raise InvalidRequest("after: an epoch number", field="after") from None
    async with st.sessions() as session:
        statements, epoch, head = await membership.log_for(session, request.path_params["cid"], claims.sub, after)
    return _json({"id": request.path_params["cid"], "statements": statements, "epoch": epoch, "head": head})


async def post_message(request: Request) -> Response:
    """REST send: the body is the envelope; same checks as the websocket; 201 with mid and seq.

    Level 1 takes the sender from the ``X-E2EE-User`` header without any check (the point of
    L1); level 3 needs a websocket session key, so it has no REST send.
    """
    st = _state(request)
    level = st.settings.level
    if level == 3:
        raise InvalidRequest("level 3 sends need a websocket session key", field="level")
    subject = request.headers.get("x-e2ee-user", "") if level == 1 else _claims(request).sub
    _require_type(request, ENVELOPE_TYPES)
    data = await request.body()
    if len(data) > st.settings.max_envelope_bytes:
        raise LimitExceeded(f"envelope over {st.settings.max_envelope_bytes} bytes", field="envelope")
    async with st.sessions() as session:
        user = await queries.get_user(session, subject)
    if user is None:
        raise AuthFailed("token subject is unknown", field="sub")
    st.relay.sends.check(user.username)
    stored = await st.relay.accept(user.username, user.id, request.path_params["cid"], data)
    return _json(
        {"mid": stored.mid, "seq": stored.seq, "duplicate": stored.duplicate}, 200 if stored.duplicate else 201
    )


async def list_conversations(request: Request) -> Response:
    """The caller's conversations: ``{"conversations": [{"id", "title", "members", "epoch", "head"}]}``."""
    claims = _claims(request)
    st = _state(request)
    async with st.sessions() as session:
        user = await queries.get_user(session, claims.sub)
        if user is None:
            raise AuthFailed("token subject is unknown", field="sub")
        return _json({"conversations": await queries.conversations_of(session, user.id)})
