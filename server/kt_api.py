"""REST: the key transparency log (docs/PROTOCOL.md §14). Heads and consistency proofs are public
(no token: anyone may check them); the leaves name every account, so reading them takes a token.

- ``GET /v1/kt/head`` -> ``{"head": <signed tree head>, "log_key": b64url SPKI DER (Ed25519)}``
- ``GET /v1/kt/consistency?from=N&to=M`` -> ``{"from", "to", "proof": [b64url]}`` (RFC 9162 §2.1.4)
- ``GET /v1/kt/entries?start=A&end=B`` (Bearer) -> ``{"start", "entries": [leaf]}``, at most ``MAX_PAGE``
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from shared import kt
from shared.b64 import b64u_encode
from shared.errors import InvalidRequest

from .kt_log import KtLog
from .web import claims_of as _claims
from .web import json_response as _json
from .web import state as _state


def _log(request: Request) -> KtLog:
    ktlog: KtLog = _state(request).kt
    return ktlog


def _query_int(request: Request, name: str, default: int | None = None) -> int:
    raw = request.query_params.get(name)
    if raw is None and default is not None:
        return default
    try:
        value = int(raw) if raw is not None and raw.isascii() and raw.isdigit() and len(raw) <= 16 else -1
    except ValueError:
        value = -1
    if value < 0:
        raise InvalidRequest(f"{name}: a tree size, 0 or more", field=name)
    return value


async def head(request: Request) -> Response:
    """The current signed tree head and the relay's log key."""
    ktlog = _log(request)
    await ktlog.sync()
    return _json({"head": ktlog.head().to_json(), "log_key": b64u_encode(ktlog.public_spki)})


async def consistency(request: Request) -> Response:
    """The consistency proof between two tree sizes (``to`` defaults to the current size)."""
    ktlog = _log(request)
    size = await ktlog.sync()
    old, new = _query_int(request, "from"), _query_int(request, "to", size)
    if not old <= new <= size:
        raise InvalidRequest(f"consistency from {old} to {new}: the log has {size} leaves", field="to")
    return _json({"from": old, "to": new, "proof": kt.encode_proof(ktlog.consistency(old, new))})


async def entries(request: Request) -> Response:
    """Leaves ``[start, end)`` (at most ``kt.MAX_PAGE``, none past the current size), for monitors;
    AuthFailed without a valid token (the leaves list every username)."""
    _claims(request)
    ktlog = _log(request)
    size = await ktlog.sync()
    start = _query_int(request, "start")
    end = min(_query_int(request, "end", size), size, start + kt.MAX_PAGE)
    if start > size:
        raise InvalidRequest(f"start {start}: the log has {size} leaves", field="start")
    return _json({"start": start, "entries": await ktlog.entries(start, end) if end > start else []})
