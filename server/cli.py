"""``e2ee-relay``: run the relay (``serve``, the default) or migrate its database (``migrate``)."""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import socket
import sys
from typing import TYPE_CHECKING, Any

from shared.extras import require

from . import __version__
from .settings import Settings, hostile_tooling

if TYPE_CHECKING:  # uvicorn is imported when a relay is built
    import uvicorn


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="e2ee-relay",
        description="e2ee-chat relay. Every option can also be set as E2EE_<NAME> in the environment.",
    )
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    p.add_argument(
        "command",
        nargs="?",
        default="serve",
        choices=["serve", "migrate", "dev-cert"],
        help="serve (default), migrate the database, or write a self-signed dev certificate",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="dev-cert: replace the certificate that exists (clients trusting it must get the new one)",
    )
    for f in dataclasses.fields(Settings):
        flag = "--" + f.name.replace("_", "-")
        help_text = f"{f.metadata.get('help', '')} (env E2EE_{f.name.upper()}{_shown_default(f)})"
        kind = f.type if isinstance(f.type, str) else f.type.__name__
        if kind == "bool":
            p.add_argument(flag, dest=f.name, action=argparse.BooleanOptionalAction, default=None, help=help_text)
        else:
            conv = {"int": int, "float": float}.get(kind, str)
            p.add_argument(flag, dest=f.name, type=conv, default=None, help=help_text)
    return p


def _shown_default(f: dataclasses.Field[object]) -> str:
    """``Settings``' default for ``--help`` (``; default 8765``, ``; default on``), or ``""`` when it
    is empty or computed at start (the data folder: the platform's user data folder)."""
    if f.default is dataclasses.MISSING or f.default == "":
        return ""
    if isinstance(f.default, bool):
        return f"; default {'on' if f.default else 'off'}"
    return f"; default {f.default}".replace("%", "%%")  # argparse formats help with %


def main(argv: list[str] | None = None) -> int:
    """``e2ee-relay``: parse ``argv`` (``sys.argv[1:]`` if None) and run the command; the exit status."""
    args = vars(_parser().parse_args(argv))
    require("e2ee-relay", "server")  # --help and --version need no extra; everything below does
    command, force = args.pop("command"), args.pop("force")
    try:
        settings = Settings.from_env(**args)
    except ValueError as exc:
        print(f"e2ee-relay: {exc}", file=sys.stderr)
        return 2
    os.umask(0o077)  # database, WAL, logs and keys readable by this user only
    data_dir = settings.ensure_data_dir()
    if command == "dev-cert":
        from .devcert import write_dev_cert

        try:
            cert, key = write_dev_cert(data_dir / "tls", force=force)
        except FileExistsError as exc:
            print(
                f"e2ee-relay: a dev certificate exists already: {exc.filename} (clients trust it with --cafile); "
                "kept. To replace it: e2ee-relay dev-cert --force",
                file=sys.stderr,
            )
            return 1
        port = settings.port
        print(
            f"wrote {cert} and {key}\n"
            f"serve with:   e2ee-relay --ssl-certfile {cert} --ssl-keyfile {key}\n"
            f"connect with: e2ee-chat --server https://127.0.0.1:{port} --cafile {cert}\n"
            f"              (or export E2EE_SERVER=https://127.0.0.1:{port} E2EE_CAFILE={cert})"
        )
        return 0

    from . import logs, migrate
    from .datalock import DataDirLocked, lock_data_dir

    try:
        data_lock = lock_data_dir(data_dir)  # held until this process exits
    except DataDirLocked as exc:
        print(f"e2ee-relay: {exc}", file=sys.stderr)
        return 1
    log_config = logs.setup(data_dir, settings.log_format, settings.log_level)
    try:  # Alembic runs its own event loop: before the server's starts
        if command == "migrate" or settings.migrate_on_start:
            migrate.check(settings.db_url, before_upgrade=True)
            migrate.upgrade(settings.db_url)
        migrate.check(settings.db_url)
    except migrate.SchemaMismatch as exc:
        print(f"e2ee-relay: {exc}", file=sys.stderr)
        return 1
    if command == "migrate":
        return 0
    from sqlalchemy.engine import make_url

    logging.getLogger("e2ee.relay").info(
        "data folder %s, database %s, level %d",
        data_dir,
        make_url(settings.db_url).render_as_string(hide_password=True),
        settings.level,
    )

    server = relay_server(settings, log_config)
    try:
        server.run()
    except KeyboardInterrupt:  # uvicorn shut down cleanly, then re-raised the Ctrl+C it captured
        return 130
    finally:
        data_lock.close()
    return 0


def relay_server(settings: Settings, log_config: dict[str, Any] | None = None) -> uvicorn.Server:
    """The relay app (with ``--hostile``'s wrapper when set) in a ``uvicorn.Server`` configured as
    ``e2ee-relay serve`` runs it: websockets closed by the relay with 1001 before uvicorn's own
    shutdown, no per-message deflate, no proxy headers except through ``trusted_proxies``.

    ``log_config``: uvicorn's (``server.logs.setup`` returns it); None leaves logging as it is
    (a relay inside another program, such as the tests). The database must already be migrated.
    """
    import uvicorn

    from .app import create_app

    app = create_app(settings)
    asgi = app
    if settings.hostile:  # tests and demonstrations only: a relay that lies to its clients
        asgi = hostile_tooling().HostileRelay(settings, app)

    class RelayServer(uvicorn.Server):
        """uvicorn, but websockets are closed by the relay with 1001 before uvicorn's own shutdown."""

        async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
            state = getattr(app.state, "e2ee", None)
            if state is not None:
                await state.relay.shutdown()
            await super().shutdown(sockets)

    config = uvicorn.Config(
        asgi,
        host=settings.host,
        port=settings.port,
        log_config=log_config,
        ws_max_size=settings.max_frame_bytes,
        ws_per_message_deflate=False,
        proxy_headers=False,  # X-Forwarded-For only from --trusted-proxies (server.app.middleware)
        timeout_graceful_shutdown=5,
        lifespan="on",
        ssl_certfile=settings.ssl_certfile or None,
        ssl_keyfile=settings.ssl_keyfile or None,
    )
    return RelayServer(config)


if __name__ == "__main__":
    sys.exit(main())
