"""``peers``: the same rows run by Node.js on this machine (node:crypto and WebCrypto), through
``bench/peers.mjs`` — the article's own platform, measured in the same run as ours."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).with_name("peers.mjs")


def run(
    n: int = 1000,
    keygen_n: int = 4,
    bits: int = 3072,
    sizes: tuple[int, ...] = (2048, 3072, 4096),
    timeout_s: float = 600,
    progress=None,
) -> dict:
    """Run ``node bench/peers.mjs`` and return its JSON (times in ms), or ``{"skipped": reason}``
    when ``node`` is not on PATH or fails."""
    node = shutil.which("node")
    if node is None:
        return {"skipped": "node is not on PATH"}
    if progress is not None:
        progress("node bench/peers.mjs")
    cmd = [node, str(SCRIPT), str(n), str(keygen_n), str(bits), ",".join(str(s) for s in sizes)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return {"skipped": f"node did not finish within {timeout_s:.0f} s"}
    if proc.returncode != 0:
        return {"skipped": f"node exited {proc.returncode}: {proc.stderr.strip()[-300:]}"}
    return json.loads(proc.stdout)
