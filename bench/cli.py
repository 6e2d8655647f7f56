"""``e2ee-bench``: what each security level costs, measured on this machine with the project's code.

Subcommands: one per suite (``bench/suites.py``) and ``report``. Every figure printed is measured
in the same run, except columns labelled "article (quoted)". Medians, p95 and p99 in ms.
"""

from __future__ import annotations

import argparse
import json
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from shared.extras import require

from . import __version__, machine
from . import targets as targets_mod
from .suites import BY_NAME, SUITES, Suite

if TYPE_CHECKING:  # rich is the bench extra's: imported once the arguments are parsed
    from rich.console import Console


@contextmanager
def progress_bar(console: Console, title: str):
    """A rich progress line; yields ``step(label)`` that advances it and shows ``label``."""
    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    with Progress(
        SpinnerColumn(),
        TextColumn("[bold]{task.fields[title]}[/] {task.description}"),
        BarColumn(),
        TextColumn("{task.completed} steps"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as prog:
        task = prog.add_task("starting", total=None, title=title)

        def step(label: str) -> None:
            prog.update(task, description=label, advance=1)

        yield step


def _run(console: Console, suite: Suite, args: argparse.Namespace, results: dict) -> None:
    from . import console as out

    with progress_bar(console, suite.name) as step:
        results[suite.name] = suite.run(args, step)
    out.print_suite(console, suite, results[suite.name])


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="e2ee-bench", description=__doc__.splitlines()[0])
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--version", action="version", version=f"e2ee-bench {__version__}")
    common.add_argument("--quick", action="store_true", help="small loops (< 30 s per suite), for CI smoke runs")
    common.add_argument("--json", dest="json_path", help="write results and machine facts to this JSON file")
    common.add_argument("-n", type=int, default=None, help="iterations per operation (default 1000; quick 60)")
    common.add_argument("--bits", type=int, default=3072, choices=[2048, 3072, 4096], help="RSA size for L4")
    common.add_argument("--clients", type=int, default=None, help="path/relay: number of clients")
    common.add_argument("--messages", type=int, default=None, help="path/relay: messages per client pair/client")
    common.add_argument(
        "--relays", type=int, default=1, choices=[1, 2], help="path: 2 = two relays on PostgreSQL with Redis fan-out"
    )
    sub = p.add_subparsers(dest="command", required=True)
    for suite in SUITES:
        sub.add_parser(suite.name, parents=[common], help=suite.help, description=suite.help)
    text = "run every suite (or read --from JSON) and write docs/bench/REPORT.md with PNG charts"
    sp = sub.add_parser("report", parents=[common], help=text, description=text)
    sp.add_argument("--from", dest="from_json", help="read results from this JSON instead of running")
    sp.add_argument("--out", default="docs/bench", help="folder for REPORT.md and the PNGs")
    sp.add_argument("--skip", default="", help="comma-separated suites not to run")
    sp.add_argument("--compare", help="the JSON of another full run: its targets go beside this run's")
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``e2ee-bench``; returns the exit code."""
    args = _parser().parse_args(argv)
    require("e2ee-bench", "bench")  # --help and --version need no extra; every suite does
    from rich.console import Console

    from . import console as out

    console = Console() if sys.stdout.isatty() else Console(width=200)
    if args.command == "report" and args.from_json:
        results = json.loads(Path(args.from_json).read_text())
    else:
        facts = machine.facts()
        console.print(f"[dim]{machine.one_line(facts)}[/]")
        results = {"machine": facts, "quick": args.quick}
        if args.command == "report":
            skip = {s for s in args.skip.split(",") if s}
            for suite in SUITES:
                if suite.name not in skip:
                    _run(console, suite, args, results)
        else:
            _run(console, BY_NAME[args.command], args, results)
        results["machine"]["loadavg_end"] = machine.load_now()  # the machine is shared: load at both ends
        results["targets"] = targets_mod.check(results)
    if args.command != "report":  # one suite: only the targets it decides
        results["targets"] = [t for t in results["targets"] if t["met"] is not None]
    if results["targets"]:
        out.print_targets(console, results["targets"])
    if args.json_path:
        Path(args.json_path).write_text(json.dumps(results, indent=1))
    if args.command == "report":
        from . import report

        if args.compare:
            other = json.loads(Path(args.compare).read_text())
            results["previous"] = {
                "file": Path(args.compare).name,
                "targets": other.get("targets", []),
                "started": machine.when(other.get("machine", {})),
            }
        written = report.write(results, Path(args.out))
        console.print(f"wrote {', '.join(str(w) for w in written)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
