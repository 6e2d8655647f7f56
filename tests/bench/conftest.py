"""Fixtures for the bench smoke tests: one ``e2ee-bench report --quick`` run per session.

These tests check that the suites run to the end and write what they promise (JSON keys, the
report, the charts). They never assert on a timing: this machine is shared and noisy.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def quick_report(tmp_path_factory) -> tuple[dict, Path, subprocess.CompletedProcess]:
    """Run ``e2ee-bench report --quick --json`` once per test run; return (results, out folder,
    process). Under pytest-xdist the workers share one run (the first makes it under a file
    lock, the others wait and read it: the report is ~1 CPU-minute on this machine)."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # shared by the run's workers
    folder = root / "bench-report-shared"
    folder.mkdir(exist_ok=True)
    out, json_path, done = folder / "report", folder / "results.json", folder / "process.json"
    with open(folder / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            proc = subprocess.run(
                [sys.executable, "-m", "bench.cli", "report", "--quick", "--json", str(json_path), "--out", str(out)],
                capture_output=True,
                text=True,
                timeout=480,
            )
            done.write_text(
                json.dumps(
                    {"args": proc.args, "returncode": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr}
                )
            )
    ran = json.loads(done.read_text())
    proc = subprocess.CompletedProcess(ran["args"], ran["returncode"], ran["stdout"], ran["stderr"])
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(json_path.read_text()), out, proc
