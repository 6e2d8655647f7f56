"""A folder that really cannot be written (no mock): for tests of a keystore save that fails."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.helpers.config import in_ci


@contextlib.contextmanager
def unwritable(folder: Path):
    """Make ``folder`` refuse new files and renames for real: ``chattr +i`` as root (root ignores
    mode bits), mode 0500 otherwise. Checked with a probe file; restored on exit."""
    folder = Path(folder)
    root = os.geteuid() == 0
    if root:
        tool = shutil.which("chattr")
        if tool is None or subprocess.run([tool, "+i", str(folder)], capture_output=True).returncode != 0:
            (pytest.fail if in_ci() else pytest.skip)("cannot make a folder immutable here (chattr +i)")
    else:
        mode = folder.stat().st_mode
        folder.chmod(0o500)
    try:
        with pytest.raises(OSError):
            (folder / ".probe").write_bytes(b"x")
        yield folder
    finally:
        if root:
            subprocess.run([shutil.which("chattr"), "-i", str(folder)], check=True)
        else:
            folder.chmod(mode)
