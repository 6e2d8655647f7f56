"""``report``: REPORT.md shaped like the seed article (its sections 01-08 with this machine's
numbers and its decision table answered from them) plus PNG charts, from one run's results.

Figures from the article appear only in columns headed "article (quoted)"; everything else is
taken from ``results`` (the JSON that ``e2ee-bench report --json`` writes).

Layout: :data:`SECTIONS` lists the page top to bottom; each entry takes a :class:`~.fmt.View` of
the results and returns Markdown (or None to leave the section out). Fixed paragraphs live in
``prose.toml``. A new bench suite adds its section through ``bench/suites.py`` (its module's
``section`` function), rendered in :func:`~.verdicts.extra_sections`, not by editing this list.
"""

from __future__ import annotations

from pathlib import Path

from .. import article
from . import context, levels, path, verdicts, webcrypto
from .charts import CHARTS, charts
from .fmt import View, ms, prose

__all__ = ["CHARTS", "SECTIONS", "markdown", "ms", "write"]


def _title(v: View) -> str:
    return "\n\n".join(
        ["# What encryption costs in e2ee-chat — measured", prose("intro", source=article.SOURCE), prose("reproduce")]
    )


def _how(v: View) -> str:
    return "## How it was measured\n\n" + prose("how")


SECTIONS = [
    _title,
    levels.machine,
    # the article's sections 01-07
    levels.levels,
    levels.per_request,
    levels.one_time,
    levels.enc_dec,
    levels.l4_parts,
    context.context,
    context.mobile,
    path.whole_path,
    # beyond the article
    path.recipients,
    webcrypto.browser,
    path.relay,
    verdicts.extra_sections,
    # the verdicts
    verdicts.decisions,
    verdicts.targets,
    verdicts.closing,
    _how,
]


def markdown(results: dict, chart_files: list[Path]) -> str:
    """The REPORT.md text for ``results`` (charts referenced by file name)."""
    v = View(results, {p.name for p in chart_files})
    return "\n\n".join(s for s in (section(v) for section in SECTIONS) if s) + "\n"


def write(results: dict, out: Path) -> list[Path]:
    """Write REPORT.md and the charts into ``out``; returns the files written."""
    out.mkdir(parents=True, exist_ok=True)
    files = charts(results, out)
    (out / "REPORT.md").write_text(markdown(results, files))
    return [out / "REPORT.md", *files]
