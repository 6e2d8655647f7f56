"""``GET /v1/metrics``: counters for operators and the bench, behind the operator token.

The counters carry no message data, but they tell who is busy and how the relay is doing, so
they are not public: the request must carry ``Authorization: Bearer <operator token>``
(``--operator-token``, or the one generated into ``data_dir/operator.token``), compared in
constant time; anything else is 401.
"""

from __future__ import annotations

import time

from starlette.requests import Request
from starlette.responses import Response

from shared import digests
from shared.errors import AuthFailed

from .auth import bearer_token
from .web import json_response, state


async def metrics(request: Request) -> Response:
    """Counters: messages stored, cumulative relay time per phase (s; level-3 decryption counts as
    checks), writer batches and ops (ops / batches = the group-commit factor), connections online,
    the relay process's CPU time (s), token and session figures, limits that refused work, the
    broker's and retention's counts.

    Raises:
        AuthFailed: no operator token, or another one.
    """
    st = state(request)
    token = bearer_token(request.headers.get("authorization")) or ""
    if not digests.equal(token.encode(), st.operator_token.encode()):
        raise AuthFailed("GET /v1/metrics needs the operator token", field="authorization")
    m = st.relay.metrics
    g = st.relay.guard
    broker = st.relay.broker
    return json_response(
        {
            "level": st.settings.level,
            "stored": m.stored,
            "checks_s": m.checks_s,
            "commit_s": m.commit_s,
            "fanout_s": m.fanout_s,
            "writer_batches": st.writer.batches,
            "writer_ops": st.writer.ops,
            "wal_checkpoints": st.writer.checkpoints,
            "writer_busy_waits": st.writer.busy_waits,
            "connections": len(st.relay.hub.all()),
            "unauthenticated_ws": st.relay.preauth.count,
            "process_cpu_s": time.process_time(),
            "jwt_verifications": st.tokens.verifications,
            "jwt_cache_hits": st.tokens.cache_hits,
            "password_hashes_pending": st.passwords.pending,
            "password_hashes_refused": st.passwords.refused,
            "sessions": {
                "logins": g.logins,
                "refreshes": g.refreshes,
                "ended": g.ended_count,
                "reuse_detected": g.reuse_detected,
                "cache_queries": g.queries,
            },
            "retention": {
                "deleted": st.retention.deleted,
                "sweeps": st.retention.sweeps,
                "last_sweep_s": st.retention.last_sweep_s,
                "sessions_deleted": st.retention.sessions_deleted,
                "blobs_deleted": st.retention.blobs_deleted,
            },
            "broker": None
            if broker is None
            else {
                "up": broker.up,
                "published": broker.published,
                "received": broker.received,
                "rejected": broker.rejected,
            },
        }
    )
