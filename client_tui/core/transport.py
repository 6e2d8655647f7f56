"""TLS to the relay and what to tell the user when the relay cannot be reached.

The client trusts the system's certificate authorities, plus the certificate file given with
``--cafile`` (or ``E2EE_CAFILE``): ``e2ee-relay dev-cert`` prints the exact command. The same
``ssl.SSLContext`` serves the REST calls (httpx) and the websocket.

:func:`describe_failure` turns a failed connection (httpx, websockets, OS and ``ssl`` errors)
into one sentence that names the cause -- a certificate that is not trusted, TLS spoken to a
plain port or the other way round, nothing listening -- never an exception class name.
"""

from __future__ import annotations

import os
import ssl
from urllib.parse import urlsplit

from shared.errors import InvalidRequest


def cafile_from(cafile: str | os.PathLike | None) -> str | None:
    """The certificate file to trust: ``cafile``, else ``E2EE_CAFILE``, else ``None``."""
    value = cafile or os.environ.get("E2EE_CAFILE") or None
    return str(value) if value else None


def ssl_context(cafile: str | None) -> ssl.SSLContext:
    """A client TLS context: system CAs, plus ``cafile`` (PEM; a self-signed relay certificate).

    Raises:
        InvalidRequest: ``cafile`` cannot be read or holds no certificate.
    """
    ctx = ssl.create_default_context()
    if cafile:
        try:
            ctx.load_verify_locations(cafile=cafile)
        except FileNotFoundError:
            raise InvalidRequest(f"--cafile {cafile}: no such file", field="cafile") from None
        except (ssl.SSLError, OSError, ValueError):
            raise InvalidRequest(f"--cafile {cafile}: not a PEM certificate file", field="cafile") from None
    return ctx


def _chain(exc: BaseException):
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def describe_failure(exc: BaseException, url: str) -> str:
    """Why ``url`` could not be reached, in words: certificate, protocol mismatch, refused,
    timeout, name lookup; the original exception only decides the words."""
    where = urlsplit(url).netloc or url
    tls = url.startswith(("https:", "wss:"))
    chain = list(_chain(exc))
    for e in chain:
        if isinstance(e, ssl.SSLCertVerificationError) or "CERTIFICATE_VERIFY_FAILED" in str(e):
            why = next((c.verify_message for c in chain if getattr(c, "verify_message", "")), "")
            return (
                f"the relay's TLS certificate is not trusted{f' ({why})' if why else ''}: give the client "
                "the relay's certificate with --cafile FILE (or E2EE_CAFILE)"
            )
    for e in chain:
        text = str(e)
        if isinstance(e, ssl.SSLError) and (
            "WRONG_VERSION_NUMBER" in text or "record layer" in text or "packet length too long" in text
        ):
            return f"{where} does not speak TLS: use http:// for this relay, or start it with a certificate"
        if isinstance(e, ConnectionRefusedError) or "Connection refused" in text or "Errno 111" in text:
            return f"nothing answers at {where} (is the relay running?)"
        if isinstance(e, TimeoutError) or type(e).__name__.endswith("Timeout"):
            return f"{where} did not answer in time"
        if "Name or service not known" in text or "nodename nor servname" in text or "getaddrinfo" in text:
            return f"no such host: {urlsplit(url).hostname}"
        if not tls and type(e).__name__ in ("RemoteProtocolError", "InvalidMessage", "ReadError"):
            return f"{where} does not answer plain HTTP: if the relay uses TLS, use https://"
    return f"the relay at {where} cannot be reached"


def tls_label(url: str) -> str:
    """``🔒 TLS`` for an https relay, ``plain`` otherwise (the status bar's words)."""
    return "🔒 TLS" if url.startswith("https:") else "plain"
