"""The level client, the bench client and the load generator are loops around the sans-I/O
session (shared.session.ClientProtocol, through client_tui.session_socket): none of them builds
or decodes a session frame itself (hello, auth, ready, sync, ack, ping), opens a websocket, or
reads one frame by hand. A second copy of the handshake would drift from the protocol's."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LOOPS = ("client_tui/levels.py", "bench/wsclient.py", "bench/tools/loadgen.py")
SESSION_FRAMES = {"Hello", "Auth", "Ready", "Sync", "Synced", "Ack", "Ping", "Pong", "Send", "Error"}
FORBIDDEN_CALLS = {"decode_relay_frame", "connect", "recv", "start_handshake"}  # and frames.* above


def _uses(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "frames"
            and node.attr in SESSION_FRAMES | {"decode_relay_frame", "encode"}
        ):
            found.add(f"frames.{node.attr}")
        if isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name in FORBIDDEN_CALLS:
                found.add(f"{name}()")
    return found


@pytest.mark.parametrize("module", LOOPS)
def test_the_loop_leaves_the_session_to_the_protocol(module):
    source = (ROOT / module).read_text()
    assert "ClientProtocol" in source and "SessionSocket" in source
    assert _uses(ROOT / module) == set()
