"""Operations: TLS with the dev certificate, JSON logs without secrets, graceful shutdown (1001)."""

from __future__ import annotations

import asyncio
import json
import signal
import ssl

import httpx2
import pytest
from websockets.exceptions import ConnectionClosed

from bench.tools.loadgen import _register, make_identities
from client_tui.levels import LevelClient
from server.devcert import write_dev_cert
from shared import membership
from tests.helpers.relays import start_relay
from tests.helpers.ws import open_ws, recv_type


async def test_tls_with_the_dev_certificate(tmp_path):
    cert, key = write_dev_cert(tmp_path / "tls")
    relay = start_relay(
        tmp_path / "tls-relay", "--ssl-certfile", str(cert), "--ssl-keyfile", str(key), "--level", "2", "--demo-level"
    )
    relay_url = relay.url
    assert relay_url.startswith("https://")
    try:
        ctx = relay.ssl_context()
        async with httpx2.AsyncClient(base_url=relay_url, verify=ctx) as http:
            assert (await http.get("/healthz")).json() == {"ok": True, "level": 2}
            a, b = make_identities(["alice", "bob"])
            tokens = [await _register(http, a), await _register(http, b)]
            created = membership.create(a, "conv-tls", "tls", [membership.member_of(i.public) for i in (a, b)])
            r = await http.post(
                "/v1/conversations",
                json={"statement": created.signed},
                headers={"Authorization": f"Bearer {tokens[0]}"},
            )
            conv = r.json()["id"]
        la = LevelClient(relay_url, "alice", 2, token=tokens[0], ssl=ctx)
        lb = LevelClient(relay_url, "bob", 2, token=tokens[1], ssl=ctx)
        await la.connect()
        await lb.connect()
        sent = await la.send_text(conv, "over wss")
        got = await asyncio.wait_for(lb.events.get(), 10)
        assert (got.text, got.seq) == ("over wss", sent.seq)
        await la.close()
        await lb.close()
        with pytest.raises(httpx2.ConnectError):  # not trusted without the certificate
            async with httpx2.AsyncClient(base_url=relay_url, verify=ssl.create_default_context()) as http:
                await http.get("/healthz")
        # plain http on the TLS port does not work either
        with pytest.raises(httpx2.HTTPError):
            httpx2.get(relay.url.replace("https", "http") + "/healthz", timeout=2)
    finally:
        relay.stop()


async def test_json_logs_carry_ids_and_sizes_only(tmp_path, make_client):
    relay = start_relay(tmp_path / "jsonlog", "--log-format", "json", "--log-level", "DEBUG")
    try:
        alice = await make_client("alice", url=relay.url)
        await make_client("bob", url=relay.url)
        conv = await alice.create_conversation("pair", ["bob"])
        await alice.connect()
        await alice.send_text(conv, "secret canary 1234")
        await alice.close()
    finally:
        relay.stop()
    lines = [json.loads(line) for line in (relay.data_dir / "relay.log").read_text().splitlines()]
    assert {"ts", "level", "logger", "msg"} <= set(lines[-1])
    text = (relay.data_dir / "relay.log").read_text()
    assert any("stored seq=1" in line["msg"] for line in lines)
    assert "canary" not in text
    assert alice.token.split(".")[2] not in text


@pytest.mark.process  # a signal to the relay's process, its exit code
async def test_sigterm_closes_websockets_with_1001(make_client, relay):
    alice = await make_client("alice")
    ws = await open_ws(relay, alice.token)
    await recv_type(ws, "ready")
    relay.proc.send_signal(signal.SIGTERM)
    with pytest.raises(ConnectionClosed):
        while True:
            await asyncio.wait_for(ws.recv(), 10)
    assert ws.close_code == 1001
    assert ws.close_reason == "relay shutting down"
    assert relay.proc.wait(10) in (0, -signal.SIGTERM)  # uvicorn re-raises the signal after shutdown
    assert "relay stopped" in (relay.data_dir / "relay.log").read_text()


@pytest.mark.process  # SIGINT to the relay's process, its exit code and output
async def test_ctrl_c_stops_the_relay_cleanly_without_a_traceback(make_client, relay):
    alice = await make_client("alice")
    ws = await open_ws(relay, alice.token)
    await recv_type(ws, "ready")
    relay.proc.send_signal(signal.SIGINT)  # what Ctrl+C in the relay's terminal sends
    with pytest.raises(ConnectionClosed):
        while True:
            await asyncio.wait_for(ws.recv(), 10)
    assert ws.close_code == 1001
    assert relay.proc.wait(10) == 130  # the shell's code for an interrupted command
    out = (relay.data_dir / "relay.stdout").read_text()
    assert "Traceback" not in out and "KeyboardInterrupt" not in out
    assert "relay stopped" in (relay.data_dir / "relay.log").read_text()
