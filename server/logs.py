"""Logging for the relay: plain or JSON lines, to stderr and ``data_dir/relay.log``.

Log lines carry ids and sizes only. A filter removes query strings from every record (uvicorn
logs request paths), so a token someone put in a URL never reaches a log.
"""

from __future__ import annotations

import json
import logging
import re
import time
from pathlib import Path

_QUERY = re.compile(r"\?[^\s\"']*")


class RedactQuery(logging.Filter):
    """Drop the query string of any URL or path in a record's message and arguments."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.args:
            args = record.args if isinstance(record.args, tuple) else (record.args,)
            record.args = tuple(_QUERY.sub("?[redacted]", a) if isinstance(a, str) else a for a in args)
        if isinstance(record.msg, str) and "?" in record.msg:
            record.msg = _QUERY.sub("?[redacted]", record.msg)
        return True


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return json.dumps({
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname, "logger": record.name, "msg": record.getMessage(),
        })


def setup(data_dir: Path, fmt: str = "plain", level: str = "INFO") -> dict:
    """Configure logging; returns a uvicorn ``log_config`` dict that uses the same handlers."""
    formatter = JsonFormatter() if fmt == "json" else logging.Formatter(
        "%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    handlers: list[logging.Handler] = [logging.StreamHandler(), logging.FileHandler(data_dir / "relay.log")]
    root = logging.getLogger()
    for h in list(root.handlers):
        root.removeHandler(h)
    for h in handlers:
        h.setFormatter(formatter)
        h.addFilter(RedactQuery())
        root.addHandler(h)
    root.setLevel(level)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        lg = logging.getLogger(name)
        lg.handlers.clear()
        lg.propagate = True
    return {"version": 1, "disable_existing_loggers": False}
