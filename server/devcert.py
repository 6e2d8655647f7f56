"""``e2ee-relay dev-cert``: a self-signed certificate for 127.0.0.1 and localhost (development only)."""

from __future__ import annotations

import datetime
import errno
import ipaddress
import os
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


def write_dev_cert(folder: Path, days: int = 30, *, force: bool = False) -> tuple[Path, Path]:
    """Write ``cert.pem`` and ``key.pem`` (P-256, 0600) valid ``days`` days for 127.0.0.1 and localhost.

    Clients trust it by pointing at ``cert.pem`` (it is its own CA), so one that exists is replaced
    only with ``force``: every client's ``--cafile`` stops working when it is.
    Returns ``(cert_path, key_path)``.

    Raises:
        FileExistsError: ``cert.pem`` or ``key.pem`` exists in ``folder`` and ``force`` is False
            (``filename``: the first one found); nothing is written.
    """
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    for path in (cert_path, key_path):
        if path.exists() and not force:
            raise FileExistsError(errno.EEXIST, "a dev certificate exists already", str(path))
    folder.mkdir(parents=True, exist_ok=True)
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "e2ee-chat dev relay")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(
            x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
    return cert_path, key_path
