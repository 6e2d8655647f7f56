"""Every module of the protocol package says what it exports (``__all__``), and the list is complete.

``shared`` is the package both sides import, so its public names are its API: a class, function or
constant that a module defines without an underscore must be listed in that module's ``__all__``, and
every listed name must exist. Modules of the relay and the client that keep an ``__all__`` list every
public class and function they define.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path
from typing import TypeVar

import pytest

import client_tui
import server
import shared


def modules(package) -> list[str]:
    """Dotted names of every module below ``package`` (``__main__`` modules run a program: skipped)."""
    return [
        m.name
        for m in pkgutil.walk_packages(package.__path__, package.__name__ + ".")
        if not m.name.endswith("__main__")
    ]


def defined_public_names(module, constants: bool) -> set[str]:
    """Classes and functions (and, with ``constants``, UPPER_CASE constants other than type
    variables) defined at the top level of ``module``'s source."""
    tree = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif constants and isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name) and t.id.isupper())
    return {n for n in names if not n.startswith("_") and not isinstance(getattr(module, n, None), TypeVar)}


def check_list(module, constants: bool) -> None:
    listed = list(module.__all__)
    assert len(listed) == len(set(listed)), f"{module.__name__}.__all__ repeats a name"
    assert not [n for n in listed if not hasattr(module, n)], f"{module.__name__}.__all__ names what is not there"
    missing = defined_public_names(module, constants) - set(listed)
    assert not missing, f"{module.__name__} defines public {sorted(missing)} but does not list them in __all__"


@pytest.mark.parametrize("name", modules(shared))
def test_every_protocol_module_lists_its_whole_public_api(name):
    module = importlib.import_module(name)
    assert hasattr(module, "__all__"), f"{name} has no __all__"
    check_list(module, constants=True)


@pytest.mark.parametrize("name", [n for p in (server, client_tui) for n in modules(p)])
def test_relay_and_client_lists_are_complete_where_kept(name):
    module = importlib.import_module(name)
    if hasattr(module, "__all__"):
        check_list(module, constants=False)


def test_the_rule_catches_an_unlisted_function(tmp_path, monkeypatch):
    (tmp_path / "probe_api_mod.py").write_text('__all__ = ["listed"]\ndef listed(): ...\ndef forgotten(): ...\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(AssertionError, match="forgotten"):
        check_list(importlib.import_module("probe_api_mod"), constants=False)
