"""``browser``: the WebCrypto rows in headless Chromium (Debian's ``chromium``), driven by
Playwright for Python with ``executable_path`` pointed at the system browser (no browser download).

A loopback HTTP server (:class:`IsolatedServer`) serves ``bench/web/`` with COOP ``same-origin``
and COEP ``require-corp``, so the page is cross-origin isolated and ``performance.now()`` steps by
5 µs instead of 100 µs; the suite refuses to report figures from a page that is not isolated.
The page (``bench/web/rows.js``) times every row per call and in batches and says which figure it
reports (see there). Rows: L3 seal + open at 100 B / 1 KB / 10 KB, AES-256-GCM encrypt and
decrypt at 1 KB, L3/L4 seal and open at 1 KB, L4 seal + open to 2 recipients, the bare RSA-OAEP and
Ed25519 operations, and seal/open against 1..128 recipients. Then the page seals one envelope to a
Python identity and ``shared.envelope.open`` must open it (the timed code writes the product's
format). Chromium runs with the flags this machine needs (no outbound connections: they are
refused here) and a fresh ``--user-data-dir``.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import importlib.metadata
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

WEB_DIR = Path(__file__).with_name("web")
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ISOLATION_HEADERS = {
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Embedder-Policy": "require-corp",
    "Cross-Origin-Resource-Policy": "same-origin",
    "Cache-Control": "no-store",
}
TYPES = {".js": "text/javascript", ".mjs": "text/javascript", ".json": "application/json", ".html": "text/html"}


def chromium_path() -> str | None:
    """The browser to drive: ``$E2EE_CHROMIUM``, else ``chromium`` (Debian) on PATH, else None."""
    return os.environ.get("E2EE_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")


def unavailable() -> str | None:
    """Why the browser suite cannot run here (None when it can)."""
    if chromium_path() is None:
        return "chromium is not on PATH (Debian: apt-get install chromium; .ci/run installs it)"
    try:
        importlib.metadata.version("playwright")
    except importlib.metadata.PackageNotFoundError:
        return "the playwright package is not installed (pip install -e '.[dev]')"
    return None


class _Handler(http.server.BaseHTTPRequestHandler):
    routes: dict[str, Path] = {}
    files: dict[str, bytes] = {}

    def do_GET(self) -> None:  # the stdlib's name
        path = self.path.split("?", 1)[0]
        body = self.files.get(path)
        if body is None:
            for prefix, folder in self.routes.items():
                if path.startswith(prefix):
                    target = (folder / path[len(prefix) :]).resolve()
                    if target.is_relative_to(folder.resolve()) and target.is_file():
                        body = target.read_bytes()
                    break
        if body is None:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", TYPES.get(Path(path).suffix, "application/octet-stream"))
        self.send_header("Content-Length", str(len(body)))
        for k, v in ISOLATION_HEADERS.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args) -> None:  # the stdlib's signature
        pass


class IsolatedServer:
    """A static HTTP server on 127.0.0.1 (a free port, its own thread) whose every response carries
    the cross-origin isolation headers.

    Args:
        routes: URL prefix (e.g. ``"/bench/"``) -> folder served under it.
        files: exact URL path -> bytes (generated files, e.g. a vector set made by a test).
    """

    def __init__(self, routes: dict[str, Path], files: dict[str, bytes] | None = None) -> None:
        handler = type("Handler", (_Handler,), {"routes": dict(routes), "files": dict(files or {})})
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="isolated-http", daemon=True)

    def __enter__(self) -> IsolatedServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@contextlib.contextmanager
def chromium_page(routes: dict[str, Path], files: dict[str, bytes] | None = None) -> Iterator[tuple]:
    """Serve ``routes`` (see :class:`IsolatedServer`) and open headless Chromium on a fresh
    profile; yields ``(page, base_url, facts)`` where facts has the browser's ``version``
    ("HeadlessChrome/156.0..."), ``user_agent`` and ``driver``. Raises RuntimeError when Chromium
    or Playwright is missing."""
    why = unavailable()
    if why:
        raise RuntimeError(why)
    from playwright.sync_api import sync_playwright

    with (
        IsolatedServer(routes, files) as server,
        tempfile.TemporaryDirectory(prefix="e2ee-chromium-") as profile,
        sync_playwright() as pw,
    ):
        context = pw.chromium.launch_persistent_context(
            profile, executable_path=chromium_path(), headless=True, args=CHROMIUM_FLAGS
        )
        try:
            page = context.pages[0] if context.pages else context.new_page()
            version = context.new_cdp_session(page).send("Browser.getVersion")
            facts = {
                "version": version["product"],
                "user_agent": version["userAgent"],
                "driver": f"Playwright for Python {importlib.metadata.version('playwright')}",
                "executable": chromium_path(),
            }
            yield page, server.url, facts
        finally:
            context.close()


def _open_check(page, bits: int) -> dict:
    """The page seals a 1 KB envelope to a fresh Python identity; ``shared.envelope.open`` opens it."""
    from cryptography.hazmat.primitives.asymmetric import ed25519

    from shared import envelope
    from shared.b64 import b64u_decode, b64u_encode
    from shared.keys import Identity, spki_der

    from .primitives import text_of

    me = Identity.generate("reader", bits)
    text = text_of(1024)
    got = page.evaluate(
        "p => window.bench.sealFor(p)",
        {"spki": b64u_encode(spki_der(me.public.wrap_key)), "kid": me.wrap_kid, "text": text},
    )
    key = ed25519.Ed25519PublicKey.from_public_bytes(b64u_decode(got["sign_public_raw"]))
    try:
        opened = envelope.open(got["envelope"].encode(), me, key)
    except Exception as exc:  # reported in the results, not fatal to the figures
        return {"opened": False, "error": f"{type(exc).__name__}: {exc}"}
    return {"opened": opened.text == text, "error": None if opened.text == text else "text differs"}


def run(n: int = 1000, bits: int = 3072, pool: int = 4, most: int = 128, progress=None) -> dict:
    """The browser suite; see the module doc. Returns JSON (times in ms; every row has ``median_ms``,
    ``p95_ms``, ``p99_ms``, ``per_call_median_ms``, ``batch_ms`` and which of the two is the
    median), or ``{"skipped": reason}`` when Chromium or Playwright is missing."""
    step = progress or (lambda _label: None)
    why = unavailable()
    if why:
        return {"skipped": why}
    counts = [c for c in (1, 2, 4, 8, 16, 32, 64, 128) if c <= most]
    with chromium_page({"/": WEB_DIR}) as (page, url, facts):
        step(f"{facts['version']}: generating RSA-{bits} keys in the page")
        page.goto(f"{url}/index.html")
        page.wait_for_function("window.benchReady === true")
        from shared import envelope
        from shared.b64 import b64u_encode

        setup = page.evaluate(
            "p => window.bench.setup(p)",
            {"bits": bits, "pool": pool, "version": envelope.VERSION, "head": b64u_encode(bytes(32))},
        )
        if not setup["cross_origin_isolated"]:
            raise RuntimeError("the bench page is not cross-origin isolated: its timer steps by 0.1 ms")
        out: dict = {
            **facts,
            **setup,
            "params": {"n": n, "bits": bits, "pool": pool, "counts": counts, "envelope_version": envelope.VERSION},
        }
        call = functools.partial(page.evaluate)
        step("L3 and L4 at 100 B, 1 KB, 10 KB")
        out["per_request"] = call("p => window.bench.perRequest(p)", {"n": n, "bits": bits})
        step("encrypt-only / decrypt-only at 1 KB")
        out["enc_dec_1kb"] = call("p => window.bench.encDec1kb(p)", {"n": n})
        step("RSA-OAEP and Ed25519 operations")
        out["l4"] = call("p => window.bench.l4Parts(p)", {"n": n})
        step(f"recipients 1..{counts[-1]}")
        out["recipients"] = call("p => window.bench.recipients(p)", {"n": n, "counts": counts, "pool": pool})
        step("Python opens an envelope the page sealed")
        out["format_check"] = _open_check(page, bits)
    out["batch_check"] = batch_check(out)
    return out


def _rows(result: dict) -> Iterator[tuple[str, dict]]:
    for payload, rows in result.get("per_request", {}).items():
        for k, s in rows.items():
            yield f"{k} {payload}", s
    for part in ("enc_dec_1kb", "l4"):
        yield from result.get(part, {}).items()
    for count, r in result.get("recipients", {}).items():
        yield f"seal N={count}", r["seal"]
        yield f"open N={count}", r["open"]


def batch_check(result: dict, low: float = 0.8, high: float = 1.25) -> dict:
    """Batch timing against the per-call median, for every row the timer resolves (per-call median
    at least 20 timer steps): ``{"checked", "agree", "worst": {row, ratio}, "outside": [rows]}``
    with ratio = batch / per-call median; agreement is ``low <= ratio <= high``."""
    checked = [
        (name, s["batch_ms"] / s["per_call_median_ms"])
        for name, s in _rows(result)
        if s.get("resolvable") and s["per_call_median_ms"] > 0
    ]
    outside = [name for name, r in checked if not low <= r <= high]
    worst = max(checked, key=lambda x: abs(x[1] - 1), default=None)
    return {
        "checked": len(checked),
        "agree": len(checked) - len(outside),
        "bounds": [low, high],
        "worst": {"row": worst[0], "ratio": worst[1]} if worst else None,
        "outside": outside,
    }
