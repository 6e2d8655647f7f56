"""The relay's one settings object, fed by defaults, ``E2EE_*`` environment variables and flags."""

from __future__ import annotations

import dataclasses
import importlib
import ipaddress
import os
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from shared.envelope import DEFAULT_MAX_ENVELOPE_BYTES, DEFAULT_MAX_RECIPIENTS

if TYPE_CHECKING:  # cryptography is imported when a key is loaded, not at import
    from cryptography.hazmat.primitives.asymmetric import ed25519, rsa

TOOLING_MODULES = ("bench", "bench.tools", "bench.tools.hostile")


def hostile_tooling() -> ModuleType:
    """The hostile relay's module (``bench.tools.hostile``), imported only when ``--hostile`` asks
    for it: the relay itself never imports the demonstration tooling.

    Raises:
        ValueError: the tooling is not installed (an install without the ``demo`` extra's files).
    """
    try:
        return importlib.import_module("bench.tools.hostile")
    except ModuleNotFoundError as exc:
        if exc.name not in TOOLING_MODULES:
            raise
        raise ValueError(
            "--hostile needs the demonstration tooling (bench/tools/hostile.py), which is not "
            "installed here: install e2ee-chat[demo]"
        ) from exc


def _default_data_dir() -> str:
    import platformdirs  # the server extra's: imported when a relay runs, not for --help

    return platformdirs.user_data_dir("e2ee-relay", appauthor=False)


@dataclass
class Settings:
    """Relay settings. Every field can be set by the flag ``--name-with-dashes`` or the
    environment variable ``E2EE_NAME_IN_CAPS``; flags win over the environment."""

    host: str = field(default="127.0.0.1", metadata={"help": "address to listen on"})
    port: int = field(default=8765, metadata={"help": "TCP port"})
    data_dir: str = field(
        default_factory=_default_data_dir, metadata={"help": "folder for db, secret, log; default the user data folder"}
    )
    database_url: str = field(
        default="", metadata={"help": "SQLAlchemy async URL; default sqlite+aiosqlite in data_dir"}
    )
    broker: str = field(default="", metadata={"help": "redis://host:port for fan-out between relays"})
    broker_channel: str = field(default="e2ee", metadata={"help": "pub/sub channel prefix shared by relays"})
    level: int = field(default=4, metadata={"help": "security level 1-4 (1-3 need --demo-level)"})
    demo_level: bool = field(
        default=False, metadata={"help": "confirm a demonstration setting: a level below 4, or --hostile"}
    )
    hostile: str = field(
        default="",
        metadata={
            "help": "tests and demonstrations only: attack this relay's own clients in MODE "
            "(MODE[:ARG], see bench/tools/hostile.py); needs --demo-level"
        },
    )
    migrate_on_start: bool = field(default=True, metadata={"help": "run Alembic upgrade at start"})
    jwt_secret: str = field(
        default="",
        metadata={
            "help": "HS256 secret as >= 64 hex digits (relays behind one load balancer "
            "share it); default: generated into data_dir/jwt.secret"
        },
    )
    operator_token: str = field(
        default="",
        metadata={
            "help": "bearer token operators present to GET /v1/metrics (>= 32 characters); "
            "default: generated into data_dir/operator.token"
        },
    )
    kt_key_file: str = field(
        default="",
        metadata={
            "help": "Ed25519 PEM that signs the key transparency log's heads; relays sharing a database must share "
            "it; default: generated into data_dir/kt-ed25519.pem"
        },
    )
    jwt_algorithm: str = field(default="HS256", metadata={"help": "HS256 or EdDSA (Ed25519 key in data_dir)"})
    jwt_issuer: str = field(default="e2ee-chat-relay", metadata={"help": "JWT iss"})
    jwt_audience: str = field(default="e2ee-chat", metadata={"help": "JWT aud"})
    token_ttl_s: int = field(default=900, metadata={"help": "access token (JWT) lifetime in seconds (max 900)"})
    session_lifetime_days: float = field(
        default=30.0, metadata={"help": "absolute lifetime of a login session: no refresh outlives it, days"}
    )
    session_idle_days: float = field(
        default=14.0, metadata={"help": "a session not refreshed for this long ends, days"}
    )
    session_cache_s: float = field(
        default=30.0,
        metadata={
            "help": "how long a relay trusts its cached session state (never longer than half "
            "the token lifetime); revocations on another relay also arrive by broker"
        },
    )
    max_sessions_per_user: int = field(
        default=50, metadata={"help": "login sessions per user; a new login past it ends the least recently used"}
    )
    jwt_leeway_s: int = field(default=2, metadata={"help": "clock leeway for exp/nbf, seconds (max 5)"})
    max_envelope_bytes: int = field(
        default=DEFAULT_MAX_ENVELOPE_BYTES, metadata={"help": "largest envelope accepted, bytes"}
    )
    max_recipients: int = field(default=DEFAULT_MAX_RECIPIENTS, metadata={"help": "most recipients"})
    max_members: int = field(default=256, metadata={"help": "most members in a conversation"})
    send_queue_frames: int = field(
        default=1024, metadata={"help": "per-connection send queue bound; a reader past it is dropped"}
    )
    send_queue_bytes: int = field(
        default=8 * 1024 * 1024, metadata={"help": "per-connection send queue bound in bytes"}
    )
    max_inflight_sends: int = field(default=64, metadata={"help": "unacked sends per connection"})
    member_cache_s: float = field(
        default=2.0, metadata={"help": "shared database: how long a relay trusts its cached member list"}
    )
    auth_timeout_s: float = field(default=5.0, metadata={"help": "time to authenticate a websocket"})
    rate_sends_per_s: float = field(default=50.0, metadata={"help": "sends per user per second (0: off)"})
    rate_sends_burst: int = field(default=200, metadata={"help": "burst of sends per user"})
    rate_logins_per_min: float = field(default=20.0, metadata={"help": "login attempts per client address, per minute"})
    rate_registrations_per_min: float = field(default=10.0, metadata={"help": "registrations per IP per minute"})
    rate_key_fetches_per_min: float = field(default=600.0, metadata={"help": "key fetches per user per minute"})
    rate_conversations_per_min: float = field(
        default=10.0, metadata={"help": "conversations a user may create per minute (0: off)"}
    )
    rate_member_changes_per_min: float = field(
        default=30.0, metadata={"help": "member changes a user may make per minute (0: off)"}
    )
    rate_key_updates_per_min: float = field(
        default=1000.0,
        metadata={
            "help": "update statements (a key rotation moving the new keys into each of the user's "
            "conversations) a user may post per minute, apart from member changes (0: off)"
        },
    )
    lockout_failures: int = field(
        default=5,
        metadata={
            "help": "wrong passwords for one username from one address before that pair "
            "waits (one more try every lockout_window_s / lockout_failures s)"
        },
    )
    lockout_window_s: float = field(default=900.0, metadata={"help": "the lockout window, seconds"})
    lockout_user_failures: int = field(
        default=100,
        metadata={
            "help": "wrong passwords for one username from all addresses it never logged "
            "in from, per window; past it only its known addresses may try"
        },
    )
    trusted_proxies: str = field(
        default="",
        metadata={
            "help": "comma-separated addresses or networks (CIDR) of reverse proxies whose "
            "X-Forwarded-For names the client; default none: the peer address counts"
        },
    )
    max_json_body_bytes: int = field(
        default=64 * 1024, metadata={"help": "largest JSON request body, bytes (checked before it is read)"}
    )
    max_blob_bytes: int = field(
        default=25 * 1024 * 1024,
        metadata={"help": "largest attachment blob, bytes (checked from Content-Length, then while it streams in)"},
    )
    blob_quota_bytes: int = field(
        default=250 * 1024 * 1024,
        metadata={
            "help": "attachment blobs one user may have stored at once, bytes, uploads in progress "
            "included (until retention deletes them)"
        },
    )
    max_uploads_per_user: int = field(
        default=4, metadata={"help": "attachment uploads one user may have in progress at once; past it: 429"}
    )
    max_preauth_ws: int = field(default=256, metadata={"help": "websockets not yet authenticated, in total"})
    max_preauth_ws_per_ip: int = field(
        default=8, metadata={"help": "websockets not yet authenticated, per client address"}
    )
    max_password_hashes: int = field(
        default=2, metadata={"help": "argon2id computations at once (each takes argon2_memory_kib)"}
    )
    max_password_queue: int = field(
        default=64, metadata={"help": "logins and registrations waiting for a hash slot; past it: 503 busy"}
    )
    argon2_time_cost: int = field(default=3, metadata={"help": "argon2id passes"})
    argon2_memory_kib: int = field(default=65536, metadata={"help": "argon2id memory, KiB"})
    argon2_parallelism: int = field(default=4, metadata={"help": "argon2id lanes"})
    sqlite_synchronous: str = field(
        default="NORMAL",
        metadata={
            "help": "SQLite synchronous pragma. NORMAL (WAL): an acked message survives a relay crash or "
            "kill; FULL also survives an OS crash or power loss, at one fsync per group commit"
        },
    )
    retention_keep_days: float = field(
        default=0.0,
        metadata={
            "help": "keep envelopes every recipient acknowledged this many days after they were "
            "stored (0: delete them at the next sweep)"
        },
    )
    retention_max_days: float = field(
        default=30.0,
        metadata={
            "help": "delete envelopes this many days after they were stored even if a recipient "
            "never acknowledged them (0: never)"
        },
    )
    retention_interval_s: float = field(
        default=60.0, metadata={"help": "seconds between retention sweeps (0: no sweeps)"}
    )
    retention_batch: int = field(default=500, metadata={"help": "envelopes deleted per transaction"})
    ssl_certfile: str = field(default="", metadata={"help": "TLS certificate (PEM); serves https/wss"})
    ssl_keyfile: str = field(default="", metadata={"help": "TLS private key (PEM)"})
    log_format: str = field(default="plain", metadata={"help": "plain or json"})
    log_level: str = field(default="INFO", metadata={"help": "logging level"})

    def __post_init__(self) -> None:
        if self.level not in (1, 2, 3, 4):
            raise ValueError("level must be 1, 2, 3 or 4")
        if self.level < 4 and not self.demo_level:
            raise ValueError("levels 1-3 are demonstrations: add --demo-level to confirm")
        if self.hostile:
            if not self.demo_level:
                raise ValueError(
                    "--hostile makes the relay attack its own clients (tests and demonstrations "
                    "only): add --demo-level to confirm"
                )
            hostile_tooling().check(self.hostile, self.db_url)
        if not 0 < self.token_ttl_s <= 900:
            raise ValueError("token_ttl_s must be in 1..900")
        if not self.session_lifetime_days > 0 or not self.session_idle_days > 0 or self.session_cache_s < 0:
            raise ValueError("session_lifetime_days and session_idle_days must be > 0, session_cache_s >= 0")
        if not 0 <= self.jwt_leeway_s <= 5:
            raise ValueError("jwt_leeway_s must be in 0..5")
        if self.jwt_secret:
            try:
                if len(bytes.fromhex(self.jwt_secret)) < 32:
                    raise ValueError
            except ValueError:
                raise ValueError("jwt_secret must be at least 64 hex digits (32 bytes)") from None
        if self.operator_token and len(self.operator_token) < 32:
            raise ValueError("operator_token must have at least 32 characters")
        if self.jwt_algorithm not in ("HS256", "EdDSA"):
            raise ValueError("jwt_algorithm must be HS256 or EdDSA")
        if self.sqlite_synchronous.upper() not in ("NORMAL", "FULL", "EXTRA"):
            raise ValueError("sqlite_synchronous must be NORMAL, FULL or EXTRA")
        self.sqlite_synchronous = self.sqlite_synchronous.upper()
        if self.retention_keep_days < 0 or self.retention_max_days < 0 or self.retention_interval_s < 0:
            raise ValueError("retention_keep_days, retention_max_days and retention_interval_s must be >= 0")
        if self.retention_max_days and self.retention_max_days < self.retention_keep_days:
            raise ValueError("retention_max_days must be 0 (never) or at least retention_keep_days")
        self.trusted_proxy_list()  # raises on a bad entry
        for name in (
            "retention_batch",
            "max_sessions_per_user",
            "max_json_body_bytes",
            "max_blob_bytes",
            "blob_quota_bytes",
            "max_uploads_per_user",
            "max_preauth_ws",
            "max_preauth_ws_per_ip",
            "max_password_hashes",
            "max_password_queue",
            "lockout_failures",
            "lockout_user_failures",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
        if self.log_format not in ("plain", "json"):
            raise ValueError("log_format must be plain or json")

    def trusted_proxy_list(self) -> list[str]:
        """``trusted_proxies`` as a list of addresses and networks.

        Raises:
            ValueError: an entry is neither an IP address nor a network.
        """
        out = []
        for item in (i.strip() for i in self.trusted_proxies.split(",")):
            if not item:
                continue
            try:
                ipaddress.ip_network(item, strict=False)
            except ValueError:
                raise ValueError(f"trusted_proxies: {item!r} is not an IP address or network") from None
            out.append(item)
        return out

    @property
    def session_cache_ttl_s(self) -> float:
        """How long a cached session state is trusted: ``session_cache_s``, at most half the
        access token lifetime (so a revocation reaches every relay well within it)."""
        return min(self.session_cache_s, self.token_ttl_s / 2)

    @property
    def data_path(self) -> Path:
        """``data_dir`` as a path."""
        return Path(self.data_dir)

    @property
    def db_url(self) -> str:
        """The database URL in use (SQLite file in ``data_dir`` unless ``database_url`` is set)."""
        return self.database_url or f"sqlite+aiosqlite:///{self.data_path / 'relay.db'}"

    @property
    def max_frame_bytes(self) -> int:
        """Largest websocket frame accepted: an envelope plus 4 KiB of frame fields."""
        return self.max_envelope_bytes + 4096

    def ensure_data_dir(self) -> Path:
        """``data_dir``, created (mode 0700) if missing."""
        self.data_path.mkdir(parents=True, exist_ok=True, mode=0o700)
        return self.data_path

    def resolve_jwt_key(self) -> bytes | ed25519.Ed25519PrivateKey:
        """The JWT signing key, loaded once: for HS256 the ``jwt_secret`` or ``data_dir/jwt.secret``
        (32 random bytes, hex, 0600); for EdDSA an Ed25519 key in ``data_dir/jwt-ed25519.pem`` (0600).
        Both are generated at first start."""
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ed25519

        if self.jwt_algorithm == "HS256" and self.jwt_secret:
            return bytes.fromhex(self.jwt_secret)
        if self.jwt_algorithm == "HS256":
            data = self._private_file("jwt.secret", lambda: secrets.token_bytes(32).hex().encode())
        else:
            data = self._private_file(
                "jwt-ed25519.pem",
                lambda: ed25519.Ed25519PrivateKey.generate().private_bytes(
                    serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
                ),
            )
        if self.jwt_algorithm == "HS256":
            return bytes.fromhex(data.decode().strip())
        key = serialization.load_pem_private_key(data, password=None)
        if not isinstance(key, ed25519.Ed25519PrivateKey):
            raise ValueError("jwt-ed25519.pem does not hold an Ed25519 private key")
        return key

    def resolve_relay_key(self) -> rsa.RSAPrivateKey:
        """Level 3: the relay's RSA-3072 key in ``data_dir/relay-l3-key.pem`` (0600), made at first
        start. Clients wrap their session keys to it and pin it (``GET /v1/relay-key``)."""
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import rsa

        data = self._private_file(
            "relay-l3-key.pem",
            lambda: rsa.generate_private_key(public_exponent=65537, key_size=3072).private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            ),
        )
        key = serialization.load_pem_private_key(data, password=None)
        if not isinstance(key, rsa.RSAPrivateKey):
            raise ValueError("relay-l3-key.pem does not hold an RSA private key")
        return key

    def resolve_kt_key(self) -> ed25519.Ed25519PrivateKey:
        """The key transparency log key (Ed25519) in ``kt_key_file`` or ``data_dir/kt-ed25519.pem``
        (0600), made at first start (created exclusively: relays starting together on one shared
        file keep the first one's). Clients pin its public half (``GET /v1/kt/head``)."""
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ed25519

        def make() -> bytes:
            return ed25519.Ed25519PrivateKey.generate().private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )

        path = Path(self.kt_key_file) if self.kt_key_file else None
        data = self._private_file(path.name if path else "kt-ed25519.pem", make, path.parent if path else None)
        key = serialization.load_pem_private_key(data, password=None)
        if not isinstance(key, ed25519.Ed25519PrivateKey):
            raise ValueError("the key transparency key file does not hold an Ed25519 private key")
        return key

    def resolve_operator_token(self) -> str:
        """The bearer token for ``GET /v1/metrics``: ``operator_token``, or ``data_dir/operator.token``
        (32 random bytes, hex, 0600) made at first start."""
        if self.operator_token:
            return self.operator_token
        return self._private_file("operator.token", lambda: secrets.token_bytes(32).hex().encode()).decode().strip()

    def _private_file(self, name: str, make: Callable[[], bytes], folder: Path | None = None) -> bytes:
        """The bytes of ``data_dir/name`` (or ``folder/name``); at first use ``make()`` is written
        there, mode 0600 (created exclusively: two processes starting together keep the first one's)."""
        path = (folder if folder is not None else self.ensure_data_dir()) / name
        if not path.exists():
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "wb") as f:
                    f.write(make())
            except FileExistsError:
                pass
        return path.read_bytes()

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """Build settings from ``E2EE_*`` variables, then ``overrides`` (non-None values win)."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}  # each converted to its field's type by _convert
        for f in fields(cls):
            raw = env.get(f"E2EE_{f.name.upper()}")
            if raw is not None:
                values[f.name] = _convert(f, raw)
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)


def _convert(f: dataclasses.Field[object], raw: str) -> object:
    kind = f.type if isinstance(f.type, str) else f.type.__name__
    if kind == "bool":
        return raw.strip().lower() in ("1", "true", "yes", "on")
    if kind == "int":
        return int(raw)
    if kind == "float":
        return float(raw)
    return raw
