"""shared.errors is ordered by its tree, and the tree drawn in its docstring is the real one:
every class, its parent, code and HTTP status, in the order of the package's ``__all__``, which is
the order its modules define them in; ErrorCode lists the same codes in the same order, then the
client's own."""

from __future__ import annotations

import re

import pytest

from shared import errors
from shared.errors import E2EEError, ErrorCode

CLASSES = [c for c in (getattr(errors, n) for n in errors.__all__) if isinstance(c, type) and issubclass(c, E2EEError)]
ROW = re.compile(r"^(?P<indent>[│├└─ ]*)(?P<name>[A-Za-z0-9]+)\s+(?P<code>[a-z0-9_]+)(?: \[(?P<status>\d+)\])?$")


def drawing() -> list[tuple[int, str, str, int | None]]:
    """``(depth, class name, code, status or None)`` for each line of the docstring's tree."""
    text = errors.__doc__.split("::", 1)[1].split("\n\n")[1]
    rows = []
    for line in text.splitlines():
        m = ROW.match(line.strip("\n")[4:])
        assert m, f"not a tree line: {line!r}"
        depth = len(m["indent"]) // 4
        rows.append((depth, m["name"], m["code"], int(m["status"]) if m["status"] else None))
    return rows


def test_the_drawn_tree_is_the_class_tree_in_module_order():
    rows = drawing()
    assert [name for _, name, _, _ in rows] == [c.__name__ for c in CLASSES]  # pre-order = module order
    parents: list[type] = []
    for depth, name, code, status in rows:
        cls = getattr(errors, name)
        del parents[depth:]
        if parents:
            assert cls.__mro__[1] is parents[-1], f"{name} is drawn under {parents[-1].__name__}"
        assert cls.code == code
        parent_status = parents[-1].status if parents else None
        assert (status if status is not None else parent_status) == cls.status, name
        parents.append(cls)


def test_the_order_is_the_modules_definition_order():
    modules = (errors.base, errors.input, errors.verification, errors.answers)
    defined = [
        c
        for m in modules
        for c in vars(m).values()
        if isinstance(c, type) and issubclass(c, E2EEError) and c.__module__ == m.__name__
    ]
    assert defined == CLASSES
    exported = {c for c in vars(errors).values() if isinstance(c, type) and issubclass(c, E2EEError)}
    assert exported == set(CLASSES)  # __all__ lists every class


def test_error_code_lists_every_class_code_in_tree_order_then_the_clients():
    codes = [c.code for c in CLASSES]
    assert list(ErrorCode)[: len(codes)] == codes
    assert all(isinstance(c.code, ErrorCode) for c in CLASSES)
    assert len(set(ErrorCode)) == len(list(ErrorCode))


def test_error_data_comes_from_constructor_fields():
    limited = errors.RateLimited("slow down", field="sends", retry_after=1.23456)
    assert (limited.retry_after, limited.as_dict()["detail"]) == (1.23456, {"retry_after": 1.235})
    assert errors.Busy("full").retry_after == 1.0
    assert "detail" not in errors.Forbidden("no").as_dict()
    stale = errors.EpochStale("old", epoch=3, head="h")
    assert stale.as_dict() == {
        "code": "epoch_stale",
        "message": "old",
        "field": "ep",
        "detail": {"epoch": 3, "head": "h"},
    }


@pytest.mark.parametrize("code", list(ErrorCode))
def test_codes_are_strings_on_the_wire(code):
    assert code == code.value and str(code) == code.value
