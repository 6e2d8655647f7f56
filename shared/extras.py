"""The install's extras (pyproject.toml ``[project.optional-dependencies]``) as the modules they
bring, for the commands: a command whose extra is missing says so in one line and exits 2,
instead of a traceback from an import.

The base install is this package only; every entry point (``server.cli``, ``client_tui.cli``,
``bench.cli``, ``bench.tools.demo``) parses its arguments with the standard library, so that
``--help`` and ``--version`` need no extra, then calls :func:`require` before it imports anything
heavier. Checking is by :func:`importlib.util.find_spec` (nothing is imported).
"""

from __future__ import annotations

import importlib.util
import sys

__all__ = ["EXIT_MISSING_EXTRA", "MODULES", "missing_module", "require"]

# top-level modules of each extra's distributions (py-spy brings only a program, no module);
# tests/packaging/test_extras.py checks this against pyproject.toml's requirements
_SERVER = ("starlette", "uvicorn", "websockets", "jwt", "sqlalchemy", "aiosqlite", "alembic", "argon2", "platformdirs")
_CLIENT = ("textual", "rich", "websockets", "httpx2", "platformdirs", "zxcvbn")
_POSTGRES = (*_SERVER, "asyncpg", "redis")
MODULES: dict[str, tuple[str, ...]] = {
    "server": _SERVER,
    "postgres": _POSTGRES,
    "client": _CLIENT,
    "demo": (*_SERVER, *_CLIENT),
    "bench": (*_SERVER, *_CLIENT, *_POSTGRES, "matplotlib", "playwright"),
}
EXIT_MISSING_EXTRA = 2  # a usage error: the install lacks what the command needs


def missing_module(extra: str) -> str | None:
    """The first module of ``extra`` (a key of :data:`MODULES`) that cannot be imported, else None.

    Raises:
        KeyError: ``extra`` is not one of :data:`MODULES`.
    """
    for name in MODULES[extra]:
        try:
            if importlib.util.find_spec(name) is None:
                return name
        except ImportError:  # a finder that refuses the name, or a broken parent package
            return name
    return None


def require(prog: str, extra: str) -> None:
    """Return if every module of ``extra`` can be imported; else print ONE line on standard error
    naming the extra and how to install it, and exit :data:`EXIT_MISSING_EXTRA` (2).

    ``prog``: the command's name (``e2ee-chat``). Raises ``SystemExit(2)`` when something is missing.
    """
    name = missing_module(extra)
    if name is not None:
        print(
            f"{prog} needs the {extra} extra: pip install 'e2ee-chat[{extra}]' (module {name!r} is missing)",
            file=sys.stderr,
        )
        raise SystemExit(EXIT_MISSING_EXTRA)
