"""Where a call's time goes beyond its primitives: a cProfile breakdown per call, for the
closing note's "why" of a target that is not met (e.g. the seal's Python overhead at one
recipient, where the floor is smallest).

cProfile adds its own cost to every Python-level call, so the absolute µs it gives are inflated;
the shares between functions are what to read. The overhead in plain time is the paired
measurement's ``seal - floor``, reported next to it.
"""

from __future__ import annotations

import cProfile
import pstats
from collections.abc import Callable

PRIMITIVE_METHODS = {
    "encrypt",
    "decrypt",
    "sign",
    "verify",
    "finalize",
    "update",
    "urandom",
    "exchange",
    "encapsulate",
    "decapsulate",
    "derive",
    "generate",
}
"""cryptography's (and the OS CSPRNG's) C/Rust entry points: the floor's own work."""


def breakdown(fn: Callable[[], object], calls: int = 2000, top: int = 8) -> dict:
    """Profile ``calls`` calls of ``fn``; returns ``{"calls", "primitives_us", "python_us",
    "functions": [{"function", "us_per_call", "ncalls_per_call", "primitive"}]}`` with each
    function's own time (tottime) per call of ``fn``, largest first (µs under the profiler)."""
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(calls):
        fn()
    prof.disable()
    rows = []
    for (file, line, name), (_cc, nc, tt, _ct, _callers) in pstats.Stats(prof).stats.items():
        bare = name.strip("<>").split(" of ")[0].replace("method '", "").replace("built-in method ", "").strip("'")
        label = name if file == "~" else f"{'/'.join(file.split('/')[-2:])}:{line}({name})"
        rows.append(
            {
                "function": label,
                "us_per_call": tt / calls * 1e6,
                "ncalls_per_call": nc / calls,
                "primitive": file == "~" and bare.split(".")[-1] in PRIMITIVE_METHODS,
            }
        )
    rows = [r for r in rows if "disable" not in r["function"] and "<lambda>" not in r["function"]]
    rows.sort(key=lambda r: r["us_per_call"], reverse=True)
    return {
        "calls": calls,
        "primitives_us": sum(r["us_per_call"] for r in rows if r["primitive"]),
        "python_us": sum(r["us_per_call"] for r in rows if not r["primitive"]),
        "functions": [r for r in rows if not r["primitive"]][:top],
    }
