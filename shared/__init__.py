"""e2ee-chat protocol package: envelope format, frames, keys and typed errors.

Pure code, no I/O. Both the relay (``server``) and the client (``client_tui``) import it;
it imports neither. The wire format is documented in ``docs/PROTOCOL.md``.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__: str = version("e2ee-chat")
    """The installed distribution's version (from its metadata, so pyproject.toml is its one source)."""
except PackageNotFoundError:  # run from a source tree that was never installed
    __version__ = "0+unknown"
