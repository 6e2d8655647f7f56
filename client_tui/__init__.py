"""e2ee-chat client: a headless asyncio core (``core``) and a Textual terminal app (``app``)."""

from shared import __version__ as __version__
