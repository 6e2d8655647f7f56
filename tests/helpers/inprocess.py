"""The relay served by uvicorn in a thread of the test process: what ``e2ee-relay serve`` runs
(``server.cli.relay_server``), on a free 127.0.0.1 port, over a SQLite file copied from a template
database that is migrated once per test session (DESIGN §11: Alembic is half of a relay's start).

It answers to the same calls as ``bench.tools.relayproc.RelayProcess`` (``url``, ``port``,
``data_dir``, ``operator_headers``, ``ssl_context()``, ``start()``, ``stop()``), so a test moves
between the two by one argument of ``tests.helpers.relays.start_relay``. What it cannot do is what
only a process can: be killed (SIGKILL, a hostile ``crash``), exit with a code, have its own
memory to read, or hold its data folder's lock against a second relay: such tests keep a real
process and carry ``@pytest.mark.process``.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import contextvars
import dataclasses
import logging
import shutil
import signal
import socket
import ssl
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from server import logs, migrate
from server.cli import relay_server
from server.settings import Settings
from tests.helpers.config import FAST_RELAY_ENV

_template: Path | None = None
_template_lock = threading.Lock()
_current: contextvars.ContextVar[InProcessRelay | None] = contextvars.ContextVar("e2ee_test_relay", default=None)


def template_db() -> Path:
    """A SQLite relay database at the schema's head, migrated once per test session (in a thread:
    Alembic runs its own event loop, and the caller may be inside one)."""
    global _template
    with _template_lock:
        if _template is None:
            folder = Path(tempfile.mkdtemp(prefix="e2ee-template-"))
            atexit.register(shutil.rmtree, folder, True)
            path = folder / "relay.db"
            with ThreadPoolExecutor(1) as pool:
                pool.submit(migrate.upgrade, f"sqlite+aiosqlite:///{path}").result()
            _template = path
    return _template


def settings_from(data_dir: Path, port: int, args: list[str], env: dict[str, str]) -> Settings:
    """Settings as ``e2ee-relay serve --data-dir DATA_DIR --port PORT ARGS`` builds them from
    ``E2EE_*`` variables ``env`` (the test process's own environment is not read) and flags."""
    kinds = {f.name: (f.type if isinstance(f.type, str) else f.type.__name__) for f in dataclasses.fields(Settings)}
    flags: dict[str, object] = {"data_dir": str(data_dir), "port": port}
    rest = list(args)
    while rest:
        flag = rest.pop(0)
        name = flag.removeprefix("--").replace("-", "_")
        if kinds.get(name.removeprefix("no_")) == "bool":
            flags[name.removeprefix("no_")] = not name.startswith("no_")
        elif name in kinds and rest:
            raw = rest.pop(0)
            flags[name] = {"int": int, "float": float}.get(kinds[name], str)(raw)
        else:
            raise ValueError(f"not an e2ee-relay setting (or no value given): {flag}")
    return Settings.from_env(environ={**FAST_RELAY_ENV, **env}, **flags)


_root_level = logging.getLogger().level


def _levels() -> None:
    """The root logger's level: the lowest of the running relays' (records below it are never
    made), back to what it was once none runs."""
    relays = [h.level for h in logging.getLogger().handlers if any(isinstance(f, _OwnRecords) for f in h.filters)]
    logging.getLogger().setLevel(min(relays) if relays else _root_level)


class _OwnRecords(logging.Filter):
    """Records of one relay: logged in its thread or in a task or thread started from its loop."""

    def __init__(self, relay: InProcessRelay) -> None:
        super().__init__()
        self.relay = relay

    def filter(self, record: logging.LogRecord) -> bool:
        return _current.get() is self.relay or record.thread == self.relay.thread_id


class InProcessRelay:
    """A relay in this process (see the module docstring).

    Args:
        data_dir: its data folder (``relay.db`` copied from the template at first start, the JWT
            secret and operator token it generates, ``relay.log``).
        args: ``e2ee-relay`` flags (``"--level", "3", "--demo-level"``).
        env: ``E2EE_*`` variables, over the fast test defaults.
        port: TCP port; a free one by default, kept across restarts.
    """

    def __init__(
        self, data_dir: Path, args: list[str] | None = None, env: dict[str, str] | None = None, port: int | None = None
    ) -> None:
        self.data_dir = Path(data_dir)
        self.args = list(args or [])
        self.env = dict(env or {})
        self.port = port or 0
        self.settings: Settings | None = None
        self.server = None
        self.thread: threading.Thread | None = None
        self.thread_id: int | None = None
        self._handler: logging.Handler | None = None

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``, or ``https://`` when started with ``--ssl-certfile``."""
        return f"{'https' if '--ssl-certfile' in self.args else 'http'}://127.0.0.1:{self.port}"

    @property
    def tls_cert(self) -> Path | None:
        return Path(self.args[self.args.index("--ssl-certfile") + 1]) if "--ssl-certfile" in self.args else None

    @property
    def operator_headers(self) -> dict[str, str]:
        """``Authorization`` for ``GET /v1/metrics``: the relay's operator token."""
        token = self.env.get("E2EE_OPERATOR_TOKEN") or (self.data_dir / "operator.token").read_text().strip()
        return {"Authorization": f"Bearer {token}"}

    @property
    def running(self) -> bool:
        """The server started and is serving (not stopped, not failed)."""
        return self.thread is not None and self.thread.is_alive() and bool(self.server and self.server.started)

    def ssl_context(self) -> ssl.SSLContext | None:
        """A client context trusting this relay's certificate (None without TLS)."""
        return ssl.create_default_context(cafile=str(self.tls_cert)) if self.tls_cert else None

    def start(self, timeout: float = 30) -> InProcessRelay:
        """Start serving and return once the server listens (as a relay process is started).

        Raises:
            RuntimeError: the app did not start (its lifespan failed; see ``relay.log``).
        """
        self.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self.port))
        self.port = sock.getsockname()[1]
        settings = self.settings = settings_from(self.data_dir, self.port, self.args, self.env)
        if settings.hostile.split(":")[0] == "crash":
            sock.close()
            raise ValueError("a hostile 'crash' relay SIGKILLs its process: start it with process=True")
        db = self.data_dir / "relay.db"
        if not settings.database_url and not db.exists():
            shutil.copy(template_db(), db)
        self._log_to_file(settings)
        context = contextvars.copy_context()  # the relay's records are told apart by it (see _OwnRecords)
        context.run(_current.set, self)
        self.server = context.run(relay_server, settings)  # the hostile wrapper logs as it is made
        self.server.main_loop = self._main_loop
        ready = threading.Event()
        self.thread = threading.Thread(
            target=self._run, args=(self.server, sock, ready, context), name=f"relay-{self.port}", daemon=True
        )
        self.thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"in-process relay did not start on {self.url}; see {self.data_dir / 'relay.log'}")
            ready.wait(0.01)
        return self

    def _run(self, server, sock: socket.socket, ready: threading.Event, context: contextvars.Context) -> None:
        self.thread_id = threading.get_ident()

        def serve() -> None:
            try:
                if self.settings.database_url:  # PostgreSQL: migrate it as the relay's start does
                    migrate.upgrade(self.settings.database_url)
                asyncio.run(server.serve(sockets=[sock]))
            finally:
                sock.close()
                ready.set()

        context.run(serve)

    async def _main_loop(self) -> None:
        """uvicorn's main loop (a tick every 0.1 s until it should exit), woken at once by stop()."""
        self._loop, self._wake = asyncio.get_running_loop(), asyncio.Event()
        counter = 0
        while not await self.server.on_tick(counter):
            counter = (counter + 1) % 864000
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), 0.1)

    def _log_to_file(self, settings: Settings) -> None:
        """``relay.log`` as the relay process writes it (format, level, redaction), from this
        relay's records only; the root logger lets them through while it runs."""
        handler = logging.FileHandler(self.data_dir / "relay.log")
        handler.setFormatter(
            logs.JsonFormatter()
            if settings.log_format == "json"
            else logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
        )
        handler.setLevel(settings.log_level)
        handler.addFilter(_OwnRecords(self))
        handler.addFilter(logs.Redact())
        root = logging.getLogger()
        root.addHandler(handler)
        self._handler = handler
        _levels()

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 10) -> None:
        """Stop as SIGTERM stops the relay process: websockets closed with 1001, the app's
        shutdown run, the database engine disposed.

        Raises:
            NotImplementedError: ``sig`` is not SIGTERM or SIGINT (a crash needs a process).
        """
        if sig not in (signal.SIGTERM, signal.SIGINT):
            raise NotImplementedError(
                "an in-process relay cannot be killed: start it with process=True "
                "and mark the test @pytest.mark.process"
            )
        if self.thread is not None:
            self.server.should_exit = True
            with contextlib.suppress(AttributeError, RuntimeError):  # not yet in its loop, or the loop closed
                self._loop.call_soon_threadsafe(self._wake.set)
            self.thread.join(timeout)
            if self.thread.is_alive():
                self.server.force_exit = True
                self.thread.join(timeout)
            self.thread = None
        if self._handler is not None:
            logging.getLogger().removeHandler(self._handler)
            self._handler.close()
            self._handler = None
            _levels()

    def __enter__(self) -> InProcessRelay:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
