"""``e2ee-bench``: measured costs of the protocol's primitives and of sealing/opening an envelope.

Every figure printed is measured in the same run; medians, p95 and p99 in ms.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys

import cryptography
from cryptography.hazmat.backends.openssl.backend import backend
from rich.console import Console
from rich.table import Table

from . import primitives


def machine_facts() -> dict[str, object]:
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "?")
    except OSError:
        pass
    import os

    return {
        "cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(),
        "openssl": backend.openssl_version_text(), "cryptography": cryptography.__version__,
    }


def cmd_primitives(args, console: Console) -> dict:
    result = primitives.run(n=args.n, size=args.size, recipients=args.recipients, bits=args.bits)
    table = Table(title=f"Primitive costs vs L4 seal/open (n={args.n}, medians in ms)")
    for col in ("operation", "median", "p95", "p99"):
        table.add_column(col, justify="left" if col == "operation" else "right")
    for name, s in result["rows"].items():
        table.add_row(name, f"{s.median:.4f}", f"{s.p95:.4f}", f"{s.p99:.4f}")
    console.print(table)
    for name, ratio in result["ratios"].items():
        console.print(f"{name} = [bold]{ratio:.3f}[/] (target <= 1.15)")
    return {
        "params": result["params"], "ratios": result["ratios"],
        "rows": {k: v.as_dict() for k, v in result["rows"].items()},
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="e2ee-bench", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command")
    prim = sub.add_parser("primitives", help="primitive costs and L4 seal/open (default)")
    for sp in (p, prim):
        sp.add_argument("-n", type=int, default=1000, help="iterations per operation")
        sp.add_argument("--size", type=int, default=1024, help="message size in bytes")
        sp.add_argument("--recipients", type=int, default=2)
        sp.add_argument("--bits", type=int, default=3072, choices=[2048, 3072, 4096])
        sp.add_argument("--quick", action="store_true", help="n=50, for CI smoke runs")
        sp.add_argument("--json", dest="json_path", help="also write results and machine facts as JSON")
    args = p.parse_args(argv)
    if args.quick:
        args.n = 50
    console = Console()
    facts = machine_facts()
    console.print(f"[dim]{facts['cpu']} · {facts['cores']} cores · Python {facts['python']} · {facts['openssl']}[/]")
    out = {"machine": facts, "primitives": cmd_primitives(args, console)}
    if args.json_path:
        with open(args.json_path, "w") as f:
            json.dump(out, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
