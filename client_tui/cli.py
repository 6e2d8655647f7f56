"""``e2ee-chat``: the terminal client.

    e2ee-chat --server http://127.0.0.1:8765 --user alice --register --with bob
    e2ee-chat --server http://127.0.0.1:8765 --user bob

Passwords and passphrases are asked for on the terminal (or read from ``E2EE_PASSWORD`` and
``E2EE_PASSPHRASE`` for scripts). Without ``--with`` or ``--conversation`` the client opens the
newest conversation the user belongs to.
"""

from __future__ import annotations

import argparse
import getpass
import os
import sys

from .core import ChatClient, ClientError


def _secret(env: str, prompt: str) -> str:
    return os.environ.get(env) or getpass.getpass(prompt)


def _startup(args, password: str, passphrase: str):
    """The account and conversation steps, run inside the app's event loop by its session worker."""

    async def startup(client: ChatClient) -> str:
        if args.register:
            await client.register(password, passphrase, bits=args.bits)
        else:
            await client.login(password, passphrase)
        convs = await client.refresh_conversations()
        if args.conversation:
            return args.conversation
        if args.with_:
            title = args.title or ", ".join([client.username, *args.with_])
            return await client.create_conversation(title, args.with_)
        if convs:
            return list(convs)[-1]
        raise ClientError("no conversation yet: start one with --with USER[,USER…]", code="no_conversation")

    return startup


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="e2ee-chat", description="End-to-end encrypted terminal chat.")
    p.add_argument("--server", default=os.environ.get("E2EE_SERVER", "http://127.0.0.1:8765"))
    p.add_argument("--user", required=True)
    p.add_argument("--register", action="store_true", help="create the account and its keys first")
    p.add_argument("--bits", type=int, default=3072, choices=[2048, 3072, 4096], help="RSA wrap key size")
    p.add_argument("--with", dest="with_", type=lambda s: [u for u in s.split(",") if u], default=None,
                   help="start a conversation with these users (comma-separated)")
    p.add_argument("--title", help="title of the new conversation")
    p.add_argument("--conversation", help="open this conversation id")
    args = p.parse_args(argv)
    password = _secret("E2EE_PASSWORD", f"relay password for {args.user}: ")
    passphrase = _secret("E2EE_PASSPHRASE", "keystore passphrase: ")

    from .app import ChatApp

    ChatApp(ChatClient(args.server, args.user), startup=_startup(args, password, passphrase)).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
