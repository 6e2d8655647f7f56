"""``e2ee-bench attachments``: attachment throughput next to the AES-256-GCM limit, in one run
(issue 16).

Four rates over the same file size, each the median of ``rounds`` (MB/s = 10^6 plaintext bytes
per second):

* **AES-GCM limit**: ``cryptography``'s ``AESGCM.encrypt`` / ``decrypt`` over the file in 64 KiB
  calls, nothing else: the ceiling any chunked scheme on this machine works under;
* **seal / open a blob** in memory: :mod:`shared.attachment` (STREAM nonces and AADs, the blob's
  SHA-256, the key check), no I/O;
* **encrypt + upload**: :func:`client_tui.core.attachments.upload` of a file on disk to a relay
  process on loopback (read, seal, stream over HTTP, the relay streams it into its SQLite
  database), the whole call timed;
* **download + decrypt**: :func:`client_tui.core.attachments.download` of that blob into a 0600
  file (HTTP stream, every chunk and the blob's SHA-256 checked, written and fsync'd), timed
  until the file is in place.

The shares (each rate / the AES-GCM limit) say how much of the primitive's speed the whole path
keeps. Timed in turns with nothing else of the bench running; the machine is shared, so the
absolute figures are noisy and the shares within one run are the point.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from shared.attachment import DEFAULT_CHUNK, AttachmentDecryptor, AttachmentEncryptor, SealedAttachment

from .relays import start_relay

MB = 1_000_000
PASSWORD = "bench-attachments-password"  # a throwaway account on a throwaway relay
KDF = {"iterations": 1, "memory_kib": 8192, "lanes": 1}


def _rate(size: int, seconds: list[float]) -> float:
    return size / statistics.median(seconds) / MB


def _timed(fn: Callable[[], object], rounds: int) -> list[float]:
    out = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def _in_memory(data: bytes, rounds: int) -> dict[str, list[float]]:
    """Seconds per round: raw AES-GCM both ways, then a blob sealed and opened by shared.attachment."""
    key, nonce, chunk = AESGCM.generate_key(bit_length=256), os.urandom(12), DEFAULT_CHUNK
    aead = AESGCM(key)
    pieces = [data[i : i + chunk] for i in range(0, len(data), chunk)]
    sealed_pieces = [aead.encrypt(nonce, p, None) for p in pieces]

    def seal_blob() -> tuple[bytes, SealedAttachment]:
        enc = AttachmentEncryptor(len(data), chunk)
        blob = b"".join(enc.stream(_reader(data)))
        return blob, enc.finish()

    blob, sealed = seal_blob()

    def open_blob() -> None:
        dec = AttachmentDecryptor(sealed.key, size=sealed.size, sha256=sealed.sha256, chunk=chunk)
        for i in range(0, len(blob), 1024 * 1024):
            dec.update(blob[i : i + 1024 * 1024])
        dec.finish()

    return {
        "aes_gcm_encrypt": _timed(lambda: [aead.encrypt(nonce, p, None) for p in pieces], rounds),
        "aes_gcm_decrypt": _timed(lambda: [aead.decrypt(nonce, p, None) for p in sealed_pieces], rounds),
        "seal_blob": _timed(seal_blob, rounds),
        "open_blob": _timed(open_blob, rounds),
    }


def _reader(data: bytes) -> Callable[[int], bytes]:
    pos = 0

    def read(n: int) -> bytes:
        nonlocal pos
        out = data[pos : pos + n]
        pos += n
        return out

    return read


async def _through_relay(url: str, folder: Path, path: Path, rounds: int, bits: int) -> dict[str, list[float]]:
    """Seconds per round of upload (alice) and download (bob) through the relay at ``url``."""
    from client_tui.core import ChatClient
    from client_tui.core.attachments import download, upload

    alice = ChatClient(url, "alice", folder / "clients", kdf=KDF)
    bob = ChatClient(url, "bob", folder / "clients", kdf=KDF)
    try:
        for c in (alice, bob):
            await c.register(PASSWORD, f"passphrase of {c.username}", bits=bits)
        cid = await alice.create_conversation("files", ["bob"])
        up, down = [], []
        for i in range(rounds):
            t0 = time.perf_counter()
            ref = await upload(alice.rest, cid, path)
            up.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            await download(bob.rest, ref, folder / "out" / f"{i}.bin")
            down.append(time.perf_counter() - t0)
        return {"encrypt_upload": up, "download_decrypt": down}
    finally:
        for c in (alice, bob):
            await c.close()


def run(progress: Callable[[str], None] | None = None, mib: int = 10, rounds: int = 5, bits: int = 2048) -> dict:
    """Attachment throughput and the AES-GCM limit, measured in one run.

    Args:
        mib: file size in MiB.
        rounds: timed rounds of each measurement (the median is reported).
        bits: RSA size of the two accounts' wrap keys (not on the measured path).

    Returns:
        ``{"mib", "bytes", "rounds", "chunk", "seconds": {name: [s per round]}, "mb_s": {name: MB/s},
        "share": {name: rate / AES-GCM rate of the same direction}}``; names ``aes_gcm_encrypt``,
        ``aes_gcm_decrypt``, ``seal_blob``, ``open_blob``, ``encrypt_upload``, ``download_decrypt``.
    """
    size = mib * 1024 * 1024
    data = os.urandom(size)
    if progress:
        progress(f"attachments: AES-GCM and shared.attachment over {mib} MiB, {rounds} rounds")
    seconds = _in_memory(data, rounds)
    with tempfile.TemporaryDirectory(prefix="e2ee-bench-attachments-") as tmp:
        folder = Path(tmp)
        path = folder / "file.bin"
        path.write_bytes(data)
        if progress:
            progress(f"attachments: {rounds} uploads and downloads of {mib} MiB through a relay")
        relay = start_relay(folder / "relay", 4, env={"E2EE_BLOB_QUOTA_BYTES": str(size * (rounds + 2) * 2)})
        try:
            seconds |= asyncio.run(_through_relay(relay.url, folder, path, rounds, bits))
        finally:
            relay.stop()
    mb_s = {name: _rate(size, s) for name, s in seconds.items()}
    limit = {"encrypt": mb_s["aes_gcm_encrypt"], "decrypt": mb_s["aes_gcm_decrypt"]}
    share = {
        "seal_blob": mb_s["seal_blob"] / limit["encrypt"],
        "encrypt_upload": mb_s["encrypt_upload"] / limit["encrypt"],
        "open_blob": mb_s["open_blob"] / limit["decrypt"],
        "download_decrypt": mb_s["download_decrypt"] / limit["decrypt"],
    }
    return {
        "mib": mib,
        "bytes": size,
        "rounds": rounds,
        "chunk": DEFAULT_CHUNK,
        "seconds": seconds,
        "mb_s": mb_s,
        "share": share,
    }


ROWS = (
    ("aes_gcm_encrypt", "AES-256-GCM encrypt, 64 KiB calls (the limit)", None),
    ("seal_blob", "seal a blob in memory (shared.attachment)", "seal_blob"),
    ("encrypt_upload", "encrypt + upload through the relay", "encrypt_upload"),
    ("aes_gcm_decrypt", "AES-256-GCM decrypt, 64 KiB calls (the limit)", None),
    ("open_blob", "open a blob in memory (every check)", "open_blob"),
    ("download_decrypt", "download + decrypt into a 0600 file", "download_decrypt"),
)


def section(result: dict, results: dict) -> str:
    """REPORT.md: the attachment rates next to the AES-GCM limit of the same run."""
    lines = [
        "### Attachments (issue 16)",
        "",
        f"One run: a {result['mib']} MiB file in {result['chunk'] // 1024} KiB chunks, median of "
        f"{result['rounds']} rounds each; MB/s = 10^6 plaintext bytes per second. Upload and download go "
        "through a relay process on loopback (SQLite), from and to files on disk.",
        "",
        "| | MB/s | share of the AES-GCM limit |",
        "|---|---|---|",
    ]
    for key, label, share in ROWS:
        pct = f"{result['share'][share]:.0%}" if share else "-"
        lines.append(f"| {label} | {result['mb_s'][key]:,.0f} | {pct} |")
    return "\n".join(lines)


def print_result(console, result: dict) -> None:
    """One line per direction for the console."""
    m = result["mb_s"]
    console.print(
        f"attachments ({result['mib']} MiB): encrypt+upload {m['encrypt_upload']:,.0f} MB/s, "
        f"download+decrypt {m['download_decrypt']:,.0f} MB/s; AES-GCM limit {m['aes_gcm_encrypt']:,.0f} / "
        f"{m['aes_gcm_decrypt']:,.0f} MB/s (encrypt / decrypt)"
    )
