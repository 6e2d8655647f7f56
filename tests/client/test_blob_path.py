"""The blob download/delete URL is built from a document's ``att.id``: the id is one percent-encoded
path segment under /v1/blobs, and dot segments never get that far (attacker F8)."""

from __future__ import annotations

import httpx2
import pytest

from client_tui.core.attachments import blob_path


@pytest.mark.parametrize(
    ("blob_id", "path"),
    [
        ("b7Qz-blob_01", "/v1/blobs/b7Qz-blob_01"),
        ("a/../../v1/keys", "/v1/blobs/a%2F..%2F..%2Fv1%2Fkeys"),
        ("x?y#z", "/v1/blobs/x%3Fy%23z"),
    ],
)
def test_blob_path_stays_under_v1_blobs(blob_id, path):
    assert blob_path(blob_id) == path
    url = httpx2.Client(base_url="http://relay").build_request("GET", blob_path(blob_id)).url
    assert url.raw_path.decode() == path
