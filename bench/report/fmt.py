"""Formatting for REPORT.md: times, ratios, Markdown tables, and the prose templates."""

from __future__ import annotations

import math
import re
import tomllib
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from ..timing import result_at

m = result_at
"""``m(results, key, ...)``: the value at that path, a Stats dict giving its median (None if missing)."""


def ms(x: float | None) -> str:
    """A time in ms with sensible precision ("-" for missing)."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    if x >= 100:
        return f"{x:,.0f}"
    if x >= 10:
        return f"{x:.1f}"
    if x >= 1:
        return f"{x:.2f}"
    if x >= 0.1:
        return f"{x:.3f}"
    return f"{x:.4f}"


def ratio(a: float | None, b: float | None) -> str:
    """``a / b`` as "1.23x" ("-" when either is missing)."""
    if a is None or b is None or b == 0:
        return "-"
    r = a / b
    return f"{r:.2f}x" if r < 100 else f"{r:,.0f}x"


_NUMERIC = re.compile(r"^[-~]?[\d.,]+( ?(x|%|ms|\(.*\)))?$|^-$|^[\d.,]+ / [\d.,-]+$")


def table(head: list[str], rows: list[list[str]]) -> str:
    """A Markdown table; columns whose cells are all numbers are right-aligned."""
    align = []
    for i in range(len(head)):
        cells = [str(r[i]) for r in rows if i < len(r)]
        numeric = i > 0 and cells and all(_NUMERIC.match(c) for c in cells)
        align.append("---:" if numeric else "---")
    lines = ["| " + " | ".join(head) + " |", "| " + " | ".join(align) + " |"]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def config(path: dict | None, level: int, tls: bool, topology: str = "SQLite 1 relay") -> dict | None:
    """The path suite's configuration at ``level`` with/without TLS on ``topology`` (None if absent)."""
    for c in (path or {}).get("configs", []):
        if c["level"] == level and c["tls"] == tls and c["topology"] == topology:
            return c
    return None


PROSE_FILE = Path(__file__).with_name("prose.toml")


@cache
def _prose() -> dict[str, str]:
    with PROSE_FILE.open("rb") as f:
        return tomllib.load(f)


def prose(key: str, **values: object) -> str:
    """The paragraph ``key`` of ``prose.toml`` with ``{name}`` fields filled from ``values``; white
    space runs become one space, and a line starting with ``|`` starts a new line."""
    lines = _prose()[key].split("\n|")
    return "\n".join(" ".join(line.split()) for line in lines).format(**values)


@dataclass
class View:
    """One run's results as the sections read them: each suite's JSON (None when it did not
    run; ``node`` and ``browser`` only when they ran rather than skipped) and the charts written."""

    results: dict
    charts: set[str] = field(default_factory=set)

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        return self.results.get(name)

    @property
    def node(self) -> dict | None:
        """Node's results unless that suite was skipped."""
        peers = self.results.get("peers")
        return peers if peers and "skipped" not in peers else None

    @property
    def chromium(self) -> dict | None:
        """The browser suite's results unless it was skipped."""
        b = self.results.get("browser")
        return b if b and "skipped" not in b else None

    def img(self, file: str, alt: str) -> str:
        """A Markdown image line for chart ``file`` when it was written, else ""."""
        return f"\n\n![{alt}]({file})" if file in self.charts else ""


def section(title: str, *parts: str | None) -> str:
    """A ``## title`` section from its non-empty parts (paragraphs, tables), blank-line separated."""
    return "\n\n".join([f"## {title}", *(p for p in parts if p)])
