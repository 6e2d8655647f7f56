"""``e2ee-demo --level 4`` sends a file and an edit too (issue 16): alice's launch plan goes up as
an attachment blob, bob saves it verified and bit-exact, alice edits her last message and bob's and
carol's screens show the new text as edited, and the blindness search over the relay's database and
logs, which now holds the blob and the edit, finds none of their text."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.process  # the demo runs its relay as a process
def test_the_demo_sends_a_file_and_an_edit_and_the_relay_still_holds_no_plaintext(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "bench.tools.demo", "--level", "4", "--data-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    out = " ".join(done.stdout.split())
    assert "alice sent launch-plan.txt (154,000 bytes)" in out
    assert (
        "bob saved bob-launch-plan.txt: each chunk and the blob's SHA-256 verified, mode 0600, same bytes: True" in out
    )
    edited = "Thanks both. Meeting moved to 11:15 ☕ — bring the 2FA codes. (edited)"
    assert "bob and carol now show it as edited" in out and out.count(edited) == 2  # bob's and carol's screens
    assert "plaintext hits: 0" in out and "the relay holds only ciphertext" in out
    assert (tmp_path / "clients-l4" / "bob-launch-plan.txt").read_bytes() == (
        tmp_path / "clients-l4" / "launch-plan.txt"
    ).read_bytes()
