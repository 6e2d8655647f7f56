"""Independent implementation 1 again, in headless Chromium (Debian's ``chromium``, driven by
Playwright): ``webcrypto_interop.mjs`` runs unchanged in a cross-origin-isolated page served from
127.0.0.1, its two Node imports mapped to small shims (``browser/``).

Both directions, live: the page opens positive L4 vectors that Python seals in this test run
(``make_vectors.l4_vectors``: fresh RSA-OAEP wraps through ``shared.envelope``) and every other
committed vector; Python opens the L4 envelope and accepts the L3 handshake + message that
Chromium sealed. The checks are Node's (imported from ``test_node_webcrypto``), so the two
runtimes are held to one standard. Skips only when chromium or playwright is missing and ``CI``
is unset; in CI it fails instead.
"""

from __future__ import annotations

import inspect
import json
import os
from pathlib import Path

import pytest

from bench import browser
from shared.b64 import b64u_encode
from tests.interop import test_node_webcrypto as node_tests
from tests.vectors import vectorlib

pytestmark = pytest.mark.process  # Chromium runs the WebCrypto side

HERE = Path(__file__).resolve().parent


def _fresh_l4() -> dict:
    """l4.json as make_vectors.py writes it, sealed now (make_vectors imports vectorlib as a
    top-level module: it is a script run from its folder)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(vectorlib.VECTORS_DIR))
        import make_vectors

        return make_vectors.l4_vectors(make_vectors.identities())


@pytest.fixture(scope="module")
def node_run() -> dict:
    """The implementation's output from Chromium, in the shape Node's run gives (the reused tests
    read it under this name), plus the fresh vectors it was given."""
    why = browser.unavailable()
    if why:
        if os.environ.get("CI"):
            pytest.fail(f"the browser interop check must run in CI: {why}")
        pytest.skip(f"{why} (set CI=1 to make this a failure)")
    fresh = _fresh_l4()
    files = {f"/vectors/{p.name}": p.read_bytes() for p in vectorlib.VECTORS_DIR.glob("*.json")}
    files["/vectors/l4.json"] = json.dumps(fresh).encode()
    files["/vectors/index.json"] = json.dumps(sorted(p.rsplit("/", 1)[1] for p in files)).encode()
    challenge = os.urandom(16)
    with browser.chromium_page({"/interop/": HERE, "/shim/": HERE / "browser"}, files) as (page, url, facts):
        page.goto(f"{url}/shim/interop.html")
        page.wait_for_function("window.interopReady === true")
        out = json.loads(page.evaluate("c => window.runInterop(c)", b64u_encode(challenge)))
    return {**out, "challenge": challenge, "fresh_l4": fresh, "browser": facts}


# Every check of Node's run applies to Chromium's, except Node's own version: collected here under
# "chromium" names, whatever Node's module adds or renames.
for _name, _test in list(vars(node_tests).items()):
    if (
        _name.startswith("test_")
        and "node_run" in inspect.signature(_test).parameters
        and _name != "test_node_is_recent_enough"
    ):
        globals()[_name.replace("node", "chromium")] = _test
REUSED = sorted(n for n in globals() if n.startswith("test_") and "chromium" in n)


def test_node_checks_are_reused():
    assert len(REUSED) >= 3, REUSED


def test_chromium_opened_what_python_sealed_in_this_run(node_run):
    fresh, committed = node_run["fresh_l4"]["vectors"], vectorlib.load("l4.json")["vectors"]
    assert fresh and len(fresh) == len(committed)
    keys = lambda vs: {r["encrypted_key"] for v in vs for r in json.loads(v["envelope"])["recipients"]}  # noqa: E731
    assert not keys(fresh) & keys(committed), "the wraps must be new, not the committed ones"
    checks = {c["name"]: c for c in node_run["checks"]}
    for v in fresh:
        for r in v["recipients"]:
            assert checks[f"L4 {v['name']} opened by {r}"]["ok"], checks[f"L4 {v['name']} opened by {r}"]


def test_it_ran_in_chromium(node_run):
    assert "HeadlessChrome" in node_run["node"]  # the page's navigator.userAgent, as process.version
    assert node_run["browser"]["version"].startswith(("Chrome/", "HeadlessChrome/"))
