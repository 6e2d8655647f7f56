"""Logging for the relay: plain or JSON lines, to stderr and ``data_dir/relay.log``.

Log lines carry ids and sizes only. A filter on every handler removes what could carry a
credential, whatever library logged it: query strings (uvicorn logs request paths, and a token
someone put in a URL must never reach a log), ``Authorization`` header values (websockets logs
request headers at DEBUG) and anything shaped like a JWT.
"""

from __future__ import annotations

import json
import logging
import re
import time
from pathlib import Path

_SECRETS = [
    (re.compile(r"\?[^\s\"']*"), "?[redacted]"),  # query strings
    (re.compile(r"(?i)(authorization:?\s*)[^\r\n\"']*"), r"\1[redacted]"),  # header values
    (re.compile(r"(?i)bearer\s+[^\s\"']+"), "Bearer [redacted]"),
    (re.compile(r"eyJ[A-Za-z0-9_-]*\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*"), "[redacted-jwt]"),  # JWS compact
]


def redact(text: str) -> str:
    """``text`` without query strings, Authorization values, bearer tokens or JWTs."""
    for pattern, repl in _SECRETS:
        text = pattern.sub(repl, text)
    return text


class Redact(logging.Filter):
    """Apply :func:`redact` to a record's formatted message (every library's records)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        return True


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return json.dumps(
            {
                "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
                "level": record.levelname,
                "logger": record.name,
                "msg": record.getMessage(),
            }
        )


def setup(data_dir: Path, fmt: str = "plain", level: str = "INFO") -> dict[str, object]:
    """Configure logging; returns a uvicorn ``log_config`` dict that uses the same handlers."""
    formatter = (
        JsonFormatter() if fmt == "json" else logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    )
    handlers: list[logging.Handler] = [logging.StreamHandler(), logging.FileHandler(data_dir / "relay.log")]
    root = logging.getLogger()
    for h in list(root.handlers):
        root.removeHandler(h)
    for h in handlers:
        h.setFormatter(formatter)
        h.addFilter(Redact())
        root.addHandler(h)
    root.setLevel(level)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        lg = logging.getLogger(name)
        lg.handlers.clear()
        lg.propagate = True
    return {"version": 1, "disable_existing_loggers": False}
