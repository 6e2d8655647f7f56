"""e2ee-chat protocol package: envelope format, frames, keys and typed errors.

Pure code, no I/O. Both the relay (``server``) and the client (``client_tui``) import it;
it imports neither. The wire format is documented in ``docs/PROTOCOL.md``.
"""

PROTOCOL_VERSION = 1
