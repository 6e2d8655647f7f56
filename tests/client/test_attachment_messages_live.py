"""A file as a message against a real relay (issue 16): ``e2ee-chat send --attach`` a 10 MiB file,
bob's ``get-attachment`` writes it bit-exact (SHA-256 equal) with mode 0600, progress drawn on
standard error; the message carries name, type, size and the blob's hash, sealed like any other."""

from __future__ import annotations

import hashlib
import json
import os
import stat

from shared.b64 import b64u_encode
from tests.helpers.cli import run

MiB = 1024 * 1024


def test_a_10_mib_file_sent_with_the_cli_arrives_bit_exact(profiles, monkeypatch, capsys, tmp_path):
    data = os.urandom(10 * MiB)
    (tmp_path / "scan.png").write_bytes(data)
    code, out, err = run(
        monkeypatch,
        capsys,
        "alice",
        "send",
        "--to",
        "bob",
        "--attach",
        str(tmp_path / "scan.png"),
        "--text",
        "the scan",
    )
    assert code == 0, err
    assert out.startswith("stored seq=") and out.rstrip().endswith("file=scan.png")
    assert err.splitlines()[-1].startswith("upload scan.png [########################] 100 %")
    mid = out.split("mid=")[1].split()[0]
    (tmp_path / "bob").mkdir(exist_ok=True)  # get-attachment creates no folder
    code, out, err = run(monkeypatch, capsys, "bob", "get-attachment", mid, "--out", str(tmp_path / "bob" / "scan.png"))
    assert code == 0, err
    assert out.startswith(f"saved {tmp_path / 'bob' / 'scan.png'} (10485760 bytes, image/png")
    assert "download scan.png [" in err and " 100 %" in err
    got = tmp_path / "bob" / "scan.png"
    assert hashlib.sha256(got.read_bytes()).digest() == hashlib.sha256(data).digest()
    assert stat.S_IMODE(got.stat().st_mode) == 0o600
    code, out, _ = run(monkeypatch, capsys, "bob", "tail", "--json")
    (msg,) = [m for m in map(json.loads, out.splitlines()) if m["mid"] == mid]
    assert (msg["type"], msg["text"], msg["sender"]) == ("attachment", "the scan", "alice")
    att = msg["attachment"]
    assert (att["name"], att["type"], att["size"], att["chunk"]) == ("scan.png", "image/png", 10 * MiB, 65536)
    assert "key" not in att and "sha256" not in att and len(att["blob_sha256"]) == 43
    assert att["blob_sha256"] != b64u_encode(hashlib.sha256(data).digest())  # the blob's hash, not the file's
    code, out, _ = run(monkeypatch, capsys, "bob", "tail")
    assert f"alice: [file scan.png · image/png · {10 * MiB} bytes · mid {mid}] the scan" in out
