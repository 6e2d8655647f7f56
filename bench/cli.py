"""``e2ee-bench``: what each security level costs, measured on this machine with the project's code.

Subcommands: primitives, recipients, path, context, peers, relay, report. Every figure printed is
measured in the same run, except columns labelled "article (quoted)". Medians, p95 and p99 in ms.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from contextlib import contextmanager
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from . import article, machine
from . import targets as targets_mod

SUITES = ("primitives", "recipients", "path", "cross", "context", "peers", "relay")


# -- parameters per suite: (full, quick) ----------------------------------------------------------------
def suite_params(name: str, args: argparse.Namespace) -> dict:
    """Keyword arguments for suite ``name`` from the command line (``--quick`` shrinks every loop)."""
    q = args.quick
    n = args.n if args.n is not None else (60 if q else 1000)
    if name == "primitives":
        return {"n": n, "bits": args.bits, "keygen_n": 1 if q else 6, "sizes": (2048,) if q else (2048, 3072, 4096)}
    if name == "recipients":
        return {"n": min(n, 200), "sizes": (2048,) if q else (2048, 3072, 4096), "most": 8 if q else 256,
                "pool": 3 if q else 8, "budget_ms": 60 if q else 1500}
    if name == "path":
        return {"levels": (1, 4) if q else (1, 2, 3, 4), "tls_modes": (False,) if q else (False, True),
                "clients": args.clients or (2 if q else 4), "messages": args.messages or (10 if q else 200),
                "bits": 2048 if q else args.bits, "relays": args.relays}
    if name == "cross":  # path --relays 2, as its own suite in a report
        return {**suite_params("path", args), "levels": (4,), "tls_modes": (False,), "relays": 2}
    if name == "context":
        return {"n": n, "rows": 2000 if q else 100_000}
    if name == "peers":
        return {"n": n, "keygen_n": 1 if q else 4, "bits": args.bits, "sizes": (2048,) if q else (2048, 3072, 4096)}
    if name == "relay":
        return {"clients": args.clients or (6 if q else 50), "messages": args.messages or (10 if q else 200),
                "bits": 2048 if q else args.bits, "also_full": not q}
    raise ValueError(name)


def run_suite(name: str, params: dict, progress) -> dict:
    """Run one suite with ``params``; ``progress(label)`` is called as it goes. Returns its JSON."""
    t0 = time.perf_counter()
    if name == "primitives":
        from . import primitives

        out = primitives.run(progress=progress, **params)
    elif name == "recipients":
        from . import recipients

        out = recipients.run(progress=progress, **params)
    elif name in ("path", "cross"):
        from . import path

        out = path.run(progress=progress, **params)
    elif name == "context":
        from . import context

        out = context.run(progress=progress, **params)
    elif name == "peers":
        from . import peers

        progress("node bench/peers.mjs")
        out = peers.run(**params)
    elif name == "relay":
        from . import relay_load

        out = relay_load.run(progress=progress, **params)
    else:
        raise ValueError(name)
    out["elapsed_s"] = time.perf_counter() - t0
    return out


@contextmanager
def progress_bar(console: Console, title: str):
    """A rich progress line; yields ``step(label)`` that advances it and shows ``label``."""
    with Progress(SpinnerColumn(), TextColumn("[bold]{task.fields[title]}[/] {task.description}"), BarColumn(),
                  TextColumn("{task.completed} steps"), TimeElapsedColumn(), console=console, transient=True) as prog:
        task = prog.add_task("starting", total=None, title=title)

        def step(label: str) -> None:
            prog.update(task, description=label, advance=1)

        yield step


# -- console tables --------------------------------------------------------------------------------------
def _f(x: float | None, digits: int = 4) -> str:
    if x is None:
        return "-"
    if x >= 100:
        return f"{x:,.0f}"
    if x >= 10:
        return f"{x:.1f}"
    return f"{x:.{digits}f}"


def _ms(d: dict | None, key: str = "median_ms") -> float | None:
    return d.get(key) if isinstance(d, dict) else None


def _table(title: str, cols: list[str]) -> Table:
    t = Table(title=title, title_justify="left")
    for i, c in enumerate(cols):
        t.add_column(c, justify="left" if i == 0 else "right")
    return t


def print_primitives(console: Console, r: dict, peers: dict | None = None) -> None:
    """§02-§04 and the L4 parts as rich tables."""
    node = peers if peers and "skipped" not in peers else None
    t = _table("§02 per-message cost, median ms (article (quoted) = Node/WebCrypto on its machine)",
               ["payload", "L1", "L2", "L2 REST", "L3", "L4", "Node L1", "Node L2", "Node L3", "WebCrypto L3",
                "article (quoted) L1/L2/L3"])
    for p, rows in r["per_request"].items():
        nr = (node or {}).get("per_request", {}).get(p, {})
        q = article.PER_REQUEST[p]
        t.add_row(p, *(_f(_ms(rows[k])) for k in ("L1", "L2", "L2_rest", "L3", "L4")),
                  *(_f(_ms(nr.get(k))) for k in ("L1", "L2", "L3_node", "L3_webcrypto")),
                  f"{q['L1']}/{q['L2']}/{q['L3_node']}")
    console.print(t)
    t = _table("§03 one-time costs, ms", ["operation", "median", "p95", "p99", "Node median", "article (quoted)"])
    once = dict(r["one_time"])
    once["jwt_sign_hs256"] = r["jwt"]["rows"]["jwt_sign_hs256"]
    once["jwt_sign_eddsa"] = r["jwt"]["rows"]["jwt_sign_eddsa"]
    quoted = {"jwt_sign_hs256": article.ONE_TIME["jwt_sign"], "l3_handshake_2048": article.ONE_TIME["rsa_handshake"]}
    for k, s in once.items():
        nq = (node or {}).get("one_time", {}).get(k)
        q = quoted.get(k)
        t.add_row(k, _f(s["median_ms"]), _f(s["p95_ms"]), _f(s["p99_ms"]), _f(_ms(nq)),
                  f"{q[0]} (p95 {q[1]})" if q else "")
    console.print(t)
    t = _table("§04 encrypt-only / decrypt-only, 1 KB, ms", ["operation", "median", "p95", "p99"])
    for k, s in r["enc_dec_1kb"].items():
        t.add_row(k, _f(s["median_ms"]), _f(s["p95_ms"]), _f(s["p99_ms"]))
    if node:
        for k, s in node["enc_dec_1kb"].items():
            t.add_row(f"Node {k}", _f(s["median_ms"]), _f(s["p95_ms"]), _f(s["p99_ms"]))
    for k, v in article.ENC_DEC_1KB.items():
        t.add_row(f"article (quoted) {k}", str(v), "", "")
    console.print(t)
    p = r["l4"]["params"]
    t = _table(f"L4 seal/open vs its primitives (RSA-{p['bits']}, {p['size']} B, {p['recipients']} recipients), ms",
               ["operation", "median", "p95", "p99"])
    for k, s in r["l4"]["rows"].items():
        t.add_row(k, _f(s["median_ms"]), _f(s["p95_ms"]), _f(s["p99_ms"]))
    console.print(t)
    t = _table("JWT, ms", ["operation", "median", "p95", "p99"])
    for k, s in r["jwt"]["rows"].items():
        t.add_row(k, _f(s["median_ms"]), _f(s["p95_ms"]), _f(s["p99_ms"]))
    console.print(t)


def print_recipients(console: Console, r: dict) -> None:
    """Seal/open against recipients per strategy and RSA size."""
    for bits, per in r["sizes"].items():
        t = _table(f"RSA-{bits}: cost against recipients, median ms (wrap {_f(per['wrap']['median_ms'])}, unwrap "
                   f"{_f(per['unwrap']['median_ms'])})",
                   ["N", "RSA seal", "floor", "seal/floor", "RSA open", "relay parse", "X25519 seal", "X25519 open",
                    "group-key seal", "group-key open", "rotation (N wraps)", "envelope bytes"])
        for n, row in per["rows"].items():
            t.add_row(n, _f(row["rsa_seal"]["median_ms"]), _f(row["rsa_seal_floor_ms"]),
                      f"{row['rsa_seal']['median_ms'] / row['rsa_seal_floor_ms']:.2f}",
                      _f(row["rsa_open"]["median_ms"]), _f(row["relay_parse"]["median_ms"]),
                      _f(row["x25519_seal"]["median_ms"]), _f(row["x25519_open"]["median_ms"]),
                      _f(row["group_seal"]["median_ms"]), _f(row["group_open"]["median_ms"]),
                      _f(row["group_rotate"]["median_ms"]), f"{row['rsa_envelope_bytes']:,}")
        console.print(t)
        k = per["knees"]
        def at(n: int | None) -> str:
            return f"N = {n}" if n is not None else "no N in this sweep"

        console.print(f"  per-recipient RSA wrapping: seal > 1 ms from {at(k['over_1ms'])}, > one 60 Hz frame from "
                      f"{at(k['over_ui_frame'])}, > 10x a group-key message from {at(k['over_10x_group_key'])}")


def print_path(console: Console, r: dict) -> None:
    """End-to-end latency, throughput and the split per configuration."""
    t = _table(f"path: {r['params']['clients']} clients x {r['params']['messages']} messages of "
               f"{r['params']['size']} B, through a real relay on 127.0.0.1, ms",
               ["config", "p50", "p95", "p99", "ack p50", "msg/s", "crypto", "serialize", "relay", "db commit",
                "network+rest", "relay CPU/msg", "ws ping"])
    for c in r["configs"]:
        s = c["split_mean_ms"]
        t.add_row(c["name"], _f(c["e2e"]["median_ms"]), _f(c["e2e"]["p95_ms"]), _f(c["e2e"]["p99_ms"]),
                  _f(c["ack"]["median_ms"]), f"{c['throughput_msgs_per_s']:.0f}", _f(s["client_crypto_ms"]),
                  _f(s["serialization_ms"]), _f(s["relay_handling_ms"]), _f(s["db_commit_ms"]),
                  _f(s["network_rest_ms"]), _f(c["relay_cpu_ms_per_msg"]), _f(c["ws_ping"]["median_ms"]))
    console.print(t)
    if "crypto_floor_ms" in r:
        console.print(f"  L4 crypto floor (seal floor + open floor, RSA-{r['params']['bits']}): "
                      f"{r['crypto_floor_ms']:.3f} ms")
    if "cross_relay_added_p50_ms" in r:
        console.print(f"  cross-relay hop adds {r['cross_relay_added_p50_ms']:.3f} ms at p50")
    for s in r.get("skipped", []):
        console.print(f"  [yellow]skipped[/]: {s}")


def print_context(console: Console, r: dict, prim: dict | None = None) -> None:
    """§05: what else costs time, next to the article's quoted ranges."""
    t = _table(f"§05 context ({r['params']['rows']:,} messages of {r['params']['envelope_bytes']} B), ms",
               ["step", "median", "p95", "p99"])
    for k, s in r["rows"].items():
        t.add_row(k, _f(s["median_ms"]), _f(s["p95_ms"]), _f(s["p99_ms"]))
    for k, v in article.CONTEXT.items():
        t.add_row(f"article (quoted) {k}", article.fmt_range(v), "", "")
    console.print(t)
    for s in r.get("skipped", []):
        console.print(f"  [yellow]skipped[/]: {s}")


def print_peers(console: Console, r: dict) -> None:
    """Node's own figures on this machine."""
    if "skipped" in r:
        console.print(f"[yellow]peers skipped[/]: {r['skipped']}")
        return
    t = _table(f"Node {r['node']} (OpenSSL {r['openssl']}) on this machine, median ms", ["row", "median", "p95", "p99"])
    for p, rows in r["per_request"].items():
        for k, s in rows.items():
            t.add_row(f"{k} {p}", _f(s["median_ms"]), _f(s["p95_ms"]), _f(s["p99_ms"]))
    for part in ("one_time", "enc_dec_1kb", "l4"):
        for k, s in r[part].items():
            t.add_row(k, _f(s["median_ms"]), _f(s["p95_ms"]), _f(s["p99_ms"]))
    console.print(t)


def print_relay(console: Console, r: dict) -> None:
    """Relay vs echo app."""
    p = r["params"]
    t = _table(f"relay vs bare echo app: {p['clients']} clients x {p['messages']} messages of 1 KB (L4 envelopes, "
               f"RSA-{p['bits']}), window {p['window']}", ["server", "msg/s", "CPU ms/msg", "wall s", "messages"])
    for k in ("relay", "relay_fsync", "echo"):
        s = r.get(k)
        if not s:
            continue
        label = f"relay (synchronous={s['synchronous']})" if k != "echo" else "echo app"
        t.add_row(label, f"{s['throughput_msgs_per_s']:.0f}", _f(s["cpu_ms_per_msg"]), _f(s["wall_s"], 2),
                  str(s["messages"]))
    console.print(t)
    rel = r["relay"]
    console.print(f"  relay/echo throughput = {r['ratio']:.3f} (target >= 0.5); acked {rel['acked']}, in the database "
                  f"{rel['in_database']}; group commit {rel['group_commit_factor']:.1f} messages per transaction")


def print_targets(console: Console, targets: list[dict]) -> None:
    """Each target as met / not met with its ratio."""
    t = _table("targets", ["target", "value", "limit", "ratio", "result", "detail"])
    for x in targets:
        if x["met"] is None:
            res = "[dim]not measured[/]"
        else:
            res = "[green]met[/]" if x["met"] else "[red]not met[/]"
        t.add_row(x["text"], _f(x["value"]), _f(x["limit"]), f"{x['ratio']:.3f}" if x["ratio"] is not None else "-",
                  res, x["detail"])
    console.print(t)


PRINTERS = {"primitives": print_primitives, "recipients": print_recipients, "path": print_path, "cross": print_path,
            "context": print_context, "peers": print_peers, "relay": print_relay}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="e2ee-bench", description=__doc__.splitlines()[0])
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--quick", action="store_true", help="small loops (< 30 s per suite), for CI smoke runs")
    common.add_argument("--json", dest="json_path", help="write results and machine facts to this JSON file")
    common.add_argument("-n", type=int, default=None, help="iterations per operation (default 1000; quick 60)")
    common.add_argument("--bits", type=int, default=3072, choices=[2048, 3072, 4096], help="RSA size for L4")
    common.add_argument("--clients", type=int, default=None, help="path/relay: number of clients")
    common.add_argument("--messages", type=int, default=None, help="path/relay: messages per client pair/client")
    common.add_argument("--relays", type=int, default=1, choices=[1, 2],
                        help="path: 2 = two relays on PostgreSQL with Redis fan-out")
    sub = p.add_subparsers(dest="command", required=True)
    helps = {
        "primitives": "the article's per-request, one-time and encrypt/decrypt tables; L4 vs its primitives",
        "recipients": "seal/open against 1..256 recipients for three key-distribution strategies",
        "path": "end-to-end through a real relay at L1-L4, TLS off/on (--relays 2: two relays, PostgreSQL, Redis)",
        "context": "indexed/unindexed queries, rendering 50 items, loopback round trip",
        "peers": "the same rows in Node.js on this machine (node:crypto, WebCrypto)",
        "relay": "relay CPU per message and throughput with 50 clients vs a bare echo app",
        "report": "run every suite (or read --from JSON) and write docs/bench/REPORT.md with PNG charts",
    }
    for name, text in helps.items():
        sp = sub.add_parser(name, parents=[common], help=text, description=text)
        if name == "report":
            sp.add_argument("--from", dest="from_json", help="read results from this JSON instead of running")
            sp.add_argument("--out", default="docs/bench", help="folder for REPORT.md and the PNGs")
            sp.add_argument("--skip", default="", help="comma-separated suites not to run")
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``e2ee-bench``; returns the exit code."""
    args = _parser().parse_args(argv)
    console = Console() if sys.stdout.isatty() else Console(width=200)
    if args.command == "report":
        from . import report

        if args.from_json:
            results = json.loads(Path(args.from_json).read_text())
        else:
            facts = machine.facts()
            console.print(f"[dim]{machine.one_line(facts)}[/]")
            results = {"machine": facts, "quick": args.quick}
            skip = {s for s in args.skip.split(",") if s}
            for name in SUITES:
                if name in skip:
                    continue
                with progress_bar(console, name) as step:
                    results[name] = run_suite(name, suite_params(name, args), step)
                PRINTERS[name](console, results[name])
            results["targets"] = targets_mod.check(results)
        print_targets(console, results["targets"])
        if args.json_path:
            Path(args.json_path).write_text(json.dumps(results, indent=1))
        written = report.write(results, Path(args.out))
        console.print(f"wrote {', '.join(str(w) for w in written)}")
        return 0
    facts = machine.facts()
    console.print(f"[dim]{machine.one_line(facts)}[/]")
    results: dict = {"machine": facts, "quick": args.quick}
    with progress_bar(console, args.command) as step:
        results[args.command] = run_suite(args.command, suite_params(args.command, args), step)
    PRINTERS[args.command](console, results[args.command])
    results["targets"] = [t for t in targets_mod.check(results) if t["met"] is not None]
    if results["targets"]:
        print_targets(console, results["targets"])
    if args.json_path:
        Path(args.json_path).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
