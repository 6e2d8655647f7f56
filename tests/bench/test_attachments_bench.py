"""``e2ee-bench attachments`` (bench/attachments.py): one small run through a real relay process
writes every rate and share, and its REPORT.md section shows each next to the AES-GCM limit. No
timing assertion: the machine is shared."""

from __future__ import annotations

import pytest

from bench import attachments


@pytest.mark.process  # the suite starts a relay process
def test_one_small_run_reports_every_rate_and_its_share_of_the_limit():
    result = attachments.run(mib=1, rounds=2)
    names = {"aes_gcm_encrypt", "aes_gcm_decrypt", "seal_blob", "open_blob", "encrypt_upload", "download_decrypt"}
    assert set(result["mb_s"]) == set(result["seconds"]) == names
    assert all(len(s) == 2 and min(s) > 0 for s in result["seconds"].values())
    assert result["bytes"] == 1024 * 1024 and result["chunk"] == 65536
    assert set(result["share"]) == names - {"aes_gcm_encrypt", "aes_gcm_decrypt"}
    text = attachments.section(result, {"attachments": result})
    assert text.startswith("### Attachments (issue 16)")
    for _, label, _ in attachments.ROWS:
        assert label in text
