"""Rooms small enough to read in one sitting: no product module over 500 lines, no class over 400
(docs/ARCHITECTURE.md; the limits issue 15 set). A change that grows one past them splits it."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("shared", "server", "client_tui", "bench")
MAX_MODULE_LINES = 500
MAX_CLASS_LINES = 400
MODULES = sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))


def _too_big(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    name = str(path.relative_to(ROOT))
    found = [f"{name}: {len(text.splitlines())} lines"] if len(text.splitlines()) > MAX_MODULE_LINES else []
    return found + [
        f"{name}: class {node.name}: {node.end_lineno - node.lineno + 1} lines"
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.ClassDef) and node.end_lineno - node.lineno + 1 > MAX_CLASS_LINES
    ]


def test_no_module_over_500_lines_and_no_class_over_400():
    assert len(MODULES) > 100
    assert [line for path in MODULES for line in _too_big(path)] == []
