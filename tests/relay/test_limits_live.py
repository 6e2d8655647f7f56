"""The limits that need a real relay process: its peak memory while 256 MiB bodies are refused,
and uvicorn's own X-Forwarded-For handling being off (issue 13)."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import httpx2
import pytest

from tests.helpers.asgi import account
from tests.helpers.relays import start_relay

MiB = 1024 * 1024


def kib(pid: int, field: str) -> int:
    """A ``VmRSS``/``VmHWM`` figure of process ``pid`` from /proc, KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def post_raw(port: int, head: bytes, chunks, total: int) -> tuple[int, int]:
    """Send ``head`` then up to ``total`` bytes from ``chunks`` while a thread reads the answer;
    stop when the relay answered or closed. Returns (HTTP status, bytes of body sent)."""
    sock = socket.create_connection(("127.0.0.1", port))
    answer = bytearray()
    got_status = threading.Event()

    def read() -> None:
        try:
            while data := sock.recv(65536):
                answer.extend(data)
                if b"\r\n" in answer:
                    got_status.set()
        except OSError:
            pass
        got_status.set()

    reader = threading.Thread(target=read)
    reader.start()
    sent = 0
    try:
        sock.sendall(head)
        for chunk in chunks:
            if got_status.is_set() or sent >= total:
                break
            sock.sendall(chunk)
            sent += len(chunk)
    except OSError:  # the relay closed after answering: the rest is never read
        pass
    got_status.wait(30)
    reader.join(30)
    sock.close()
    return int(answer.split(b" ", 2)[1]), sent


@pytest.mark.process  # the relay's own peak memory (/proc/PID)
def test_256_mib_bodies_declared_or_chunked_leave_peak_memory_within_20_mib_of_idle(tmp_path):
    relay = start_relay(tmp_path / "mem", process=True)
    try:
        pid = relay.proc.pid
        assert httpx2.get(relay.url + "/healthz").status_code == 200
        idle = kib(pid, "VmRSS")
        Path(f"/proc/{pid}/clear_refs").write_text("5")  # reset the peak (VmHWM) to the current RSS
        piece = b"x" * MiB
        declared = (
            b"POST /v1/accounts HTTP/1.1\r\nHost: relay\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % (256 * MiB)
        )
        status, sent = post_raw(relay.port, declared, iter(lambda: piece, None), 256 * MiB)
        assert status == 413
        chunked = (
            b"POST /v1/accounts HTTP/1.1\r\nHost: relay\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        frame = b"%x\r\n" % len(piece) + piece + b"\r\n"
        status2, sent2 = post_raw(relay.port, chunked, iter(lambda: frame, None), 256 * MiB)
        assert status2 == 413
        peak = kib(pid, "VmHWM")
        print(
            f"\nrelay RSS idle {idle / 1024:.1f} MiB, peak while refusing 2 x 256 MiB {peak / 1024:.1f} MiB "
            f"(+{(peak - idle) / 1024:.1f} MiB); body bytes the client got to send: {sent / MiB:.0f} MiB "
            f"declared, {sent2 / MiB:.0f} MiB chunked"
        )
        assert peak - idle < 20 * 1024
        assert httpx2.get(relay.url + "/healthz").status_code == 200  # still serving
    finally:
        relay.stop()


def test_x_forwarded_for_from_loopback_does_not_pick_the_rate_limit_key(tmp_path, identities):
    relay = start_relay(tmp_path / "xff", env={"E2EE_RATE_REGISTRATIONS_PER_MIN": "2"})  # a burst of one
    try:
        r = httpx2.post(
            relay.url + "/v1/accounts", json=account(identities["bob"]), headers={"X-Forwarded-For": "198.51.100.1"}
        )
        assert r.status_code == 201
        r = httpx2.post(
            relay.url + "/v1/accounts", json=account(identities["carol"]), headers={"X-Forwarded-For": "198.51.100.2"}
        )
        assert r.status_code == 429  # the peer is 127.0.0.1 whatever the header says
    finally:
        relay.stop()
