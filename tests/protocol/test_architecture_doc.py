"""docs/ARCHITECTURE.md keeps up with the code: every function its message walk names exists.

The walk names a file, then the functions on the path in it (``Class.method`` or a module
function). A rename or a move that leaves the page behind fails here.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "ARCHITECTURE.md").read_text("utf-8")
WALK = DOC.split("## One message", 1)[1].split("\n## ", 1)[0]


def _names(path: Path) -> set[str]:
    """``name`` of every module-level function and class; ``Class.name`` of what a class defines,
    and of the attributes its methods set on ``self``."""
    out: set[str] = set()

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                out.add(prefix + child.name)
                if isinstance(child, ast.ClassDef):
                    visit(child, f"{prefix}{child.name}.")
                    out.update(
                        f"{prefix}{child.name}.{t.attr}"
                        for t in ast.walk(child)
                        if isinstance(t, ast.Attribute)
                        and isinstance(t.value, ast.Name)
                        and t.value.id == "self"
                        and isinstance(t.ctx, ast.Store)
                    )

    visit(ast.parse(path.read_text("utf-8")), "")
    return out


def _mentions() -> list[tuple[str, str]]:
    """``(file, name)``: each backticked name right after a backticked file, and each
    ``Class.method`` anywhere in the walk (looked up in every file the walk names)."""
    tokens = re.findall(r"`([^`]+)`", WALK)
    pairs, last = [], None
    for token in tokens:
        if token.endswith(".py"):
            last = token
        elif last is not None and re.fullmatch(r"[A-Za-z_]\w*(\.\w+)?", token):
            pairs.append((last, token))
            last = None
        if re.fullmatch(r"[A-Z]\w*\.\w+", token):
            pairs.append(("*", token))
    return sorted(set(pairs))


FILES = sorted({t for t in re.findall(r"`([^`]+\.py)`", WALK)})


def test_the_walk_names_files_that_exist():
    assert FILES and all((ROOT / f).is_file() for f in FILES), [f for f in FILES if not (ROOT / f).is_file()]


@pytest.mark.parametrize(("file", "name"), _mentions())
def test_each_function_named_on_the_walk_exists(file, name):
    where = FILES if file == "*" else [file]
    assert any(name in _names(ROOT / f) for f in where if (ROOT / f).is_file()), f"{name} not in {where}"
