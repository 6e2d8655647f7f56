"""Start a real relay process on a free 127.0.0.1 port (for the demo, the bench and tests)."""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_LIVE: set[RelayProcess] = set()  # started and not yet stopped: stopped at the latest when Python exits


@atexit.register
def stop_all() -> None:
    """Stop every relay this process started and has not stopped (SIGTERM, then SIGKILL)."""
    for relay in list(_LIVE):
        relay.stop()


@contextlib.contextmanager
def sigint_deferred() -> Iterator[None]:
    """Hold back Ctrl+C (SIGINT) for the block and deliver it after: a child started or stopped inside
    is then always recorded or reaped. Outside the main thread (no signal handlers there) it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: pending.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if pending:
            if callable(previous):
                previous(signal.SIGINT, None)
            elif previous == signal.SIG_DFL:
                os.kill(os.getpid(), signal.SIGINT)


class RelayProcess:
    """``python -m server`` as a child process with its own data folder.

    Args:
        data_dir: the relay's data folder (SQLite file, JWT secret, relay.log).
        port: TCP port; a free one by default.
        extra_args: more ``e2ee-relay`` flags.
        env: extra environment variables (``E2EE_*`` settings).
    """

    def __init__(
        self,
        data_dir: Path,
        port: int | None = None,
        extra_args: list[str] | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.port = port or free_port()
        self.extra_args = extra_args or []
        self.env = env or {}
        self.proc: subprocess.Popen | None = None
        self.tls_cert = (
            Path(self.extra_args[self.extra_args.index("--ssl-certfile") + 1])
            if "--ssl-certfile" in self.extra_args
            else None
        )

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``, or ``https://`` when started with ``--ssl-certfile``."""
        return f"{'https' if self.tls_cert else 'http'}://127.0.0.1:{self.port}"

    @property
    def operator_headers(self) -> dict[str, str]:
        """``Authorization`` for ``GET /v1/metrics``: the operator token this relay was given
        (``E2EE_OPERATOR_TOKEN``) or generated into its data folder."""
        token = self.env.get("E2EE_OPERATOR_TOKEN") or (self.data_dir / "operator.token").read_text().strip()
        return {"Authorization": f"Bearer {token}"}

    def ssl_context(self) -> ssl.SSLContext | None:
        """A client context trusting this relay's certificate (None without TLS)."""
        return ssl.create_default_context(cafile=str(self.tls_cert)) if self.tls_cert else None

    def start(self, timeout: float = 30) -> RelayProcess:
        """Start the relay and wait until ``/healthz`` answers.

        The child is bound to this object from the moment it exists: Ctrl+C is held back while it is
        spawned, any exception while waiting for it (KeyboardInterrupt included) stops it, and a
        relay still running when Python exits is stopped then (``atexit``).

        Raises:
            RuntimeError: the process exited or did not answer within ``timeout`` seconds.
        """
        self.data_dir.mkdir(parents=True, exist_ok=True)
        try:
            self._spawn()
            self._wait_ready(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _spawn(self) -> None:
        with sigint_deferred(), open(self.data_dir / "relay.stdout", "ab") as out:  # the child keeps its copy
            _LIVE.add(self)
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "server",
                    "serve",
                    "--data-dir",
                    str(self.data_dir),
                    "--port",
                    str(self.port),
                    *self.extra_args,
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**os.environ, **self.env},
            )

    def _wait_ready(self, timeout: float) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"relay exited with {self.proc.returncode}; see {self.data_dir / 'relay.stdout'}")
            try:
                if httpx2.get(self.url + "/healthz", timeout=1, verify=self.ssl_context() or True).status_code == 200:
                    return
            except httpx2.HTTPError:
                pass
            time.sleep(0.05)
        raise RuntimeError(f"relay did not answer on {self.url} within {timeout} s")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 10) -> int | None:
        """Stop the relay (SIGTERM: graceful; SIGKILL: crash) and return its exit code (None if it was
        not running). A relay not gone ``timeout`` seconds after ``sig`` is killed. Ctrl+C during the
        stop is held back until the relay has been reaped."""
        with sigint_deferred():
            _LIVE.discard(self)
            proc, self.proc = self.proc, None
            if proc is None:
                return None
            try:
                if proc.poll() is None:
                    proc.send_signal(sig)
                    proc.wait(timeout)
            except subprocess.TimeoutExpired:
                pass
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
            return proc.returncode

    def __enter__(self) -> RelayProcess:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
