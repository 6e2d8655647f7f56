"""e2ee-chat relay: accounts, key directory, conversations and a websocket relay for envelopes."""

from shared import __version__ as __version__
