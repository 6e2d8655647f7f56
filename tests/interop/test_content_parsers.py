"""Padded content documents (shared.content) read by an independent JSON parser as they are:
Node's ``JSON.parse`` on the padded bytes gives the members and values of the canonical text, for
every kind and both padding schemes (trailing spaces are JSON whitespace, RFC 8259 §2)."""

from __future__ import annotations

import json
import subprocess

import pytest

from shared import content
from shared.b64 import b64u_encode
from tests.helpers.config import require_tool
from tests.protocol.test_content import DOCS

pytestmark = pytest.mark.process  # Node parses

PARSE = """
let input = "";
process.stdin.on("data", (d) => (input += d));
process.stdin.on("end", () => {
  const out = JSON.parse(input).map((b64) => {
    const text = new TextDecoder("utf-8", { fatal: true }).decode(Buffer.from(b64, "base64url"));
    return { length: Buffer.byteLength(text), doc: JSON.parse(text) };
  });
  process.stdout.write(JSON.stringify(out));
});
"""


def test_node_json_parse_reads_every_padded_document():
    node = require_tool("node")
    padded = [content.encode(d, s) for d in DOCS for s in content.SCHEMES]
    proc = subprocess.run(
        [node, "-e", PARSE],
        input=json.dumps([b64u_encode(p) for p in padded]),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    parsed = json.loads(proc.stdout)
    assert [p["length"] for p in parsed] == [len(p) for p in padded]
    assert [p["doc"] for p in parsed] == [json.loads(content.canonical(d)) for d in DOCS for _ in content.SCHEMES]
    assert {p["length"] for p in parsed} == {256, 272, 304, 512}  # buckets: the attachment documents are longer
