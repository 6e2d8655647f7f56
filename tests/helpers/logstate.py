"""What a test may not leave behind in the process's logging: the ``e2ee*`` loggers' levels,
handlers and flags, and the root logger's level.

The relay and the client log under ``e2ee.relay*`` and ``e2ee.client*``/``e2ee.tui``; one test
that sets ``e2ee`` to INFO and keeps it (the client app's log file once did) silently drops every
later test's DEBUG lines of an in-process relay, and the test that reads them fails far away.
"""

from __future__ import annotations

import logging

State = dict[str, tuple[int, tuple[logging.Handler, ...], bool, bool]]


def snapshot() -> State:
    """``{logger name: (level, handlers, disabled, propagate)}`` of every ``e2ee*`` logger, and
    the root logger's level under the name ``""`` (its handlers are pytest's, per phase)."""
    manager = logging.Logger.manager
    state: State = {"": (logging.getLogger().level, (), False, True)}
    for name, lg in list(manager.loggerDict.items()):
        if (name == "e2ee" or name.startswith("e2ee.")) and isinstance(lg, logging.Logger):
            state[name] = (lg.level, tuple(lg.handlers), lg.disabled, lg.propagate)
    return state


def changes(before: State, after: State) -> list[str]:
    """What differs, one line per logger (a logger made during the test counts as unchanged if it
    has no level, no handlers, is enabled and propagates)."""
    fresh = (logging.NOTSET, (), False, True)
    return [
        f"{name or 'root'}: {before.get(name, fresh)} -> {state}"
        for name, state in after.items()
        if state != before.get(name, fresh)
    ]


def restore(before: State) -> None:
    """Put every ``e2ee*`` logger and the root level back as they were."""
    logging.getLogger().setLevel(before[""][0])
    manager = logging.Logger.manager
    for name, lg in list(manager.loggerDict.items()):
        if not isinstance(lg, logging.Logger) or not (name == "e2ee" or name.startswith("e2ee.")):
            continue
        level, handlers, disabled, propagate = before.get(name, (logging.NOTSET, (), False, True))
        lg.setLevel(level)
        lg.handlers[:] = list(handlers)
        lg.disabled, lg.propagate = disabled, propagate
