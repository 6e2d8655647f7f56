"""Fixtures for the bench smoke tests: one ``e2ee-bench report --quick`` run per session.

These tests check that the suites run to the end and write what they promise (JSON keys, the
report, the charts). They never assert on a timing: this machine is shared and noisy.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def quick_report(tmp_path_factory) -> tuple[dict, Path, subprocess.CompletedProcess]:
    """Run ``e2ee-bench report --quick --json`` once; return (results, out folder, process)."""
    folder = tmp_path_factory.mktemp("bench-report")
    out = folder / "report"
    json_path = folder / "results.json"
    proc = subprocess.run(
        [sys.executable, "-m", "bench.cli", "report", "--quick", "--json", str(json_path), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=480,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(json_path.read_text()), out, proc
