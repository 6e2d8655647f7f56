"""e2ee-chat relay: accounts, key directory, conversations and a websocket relay for envelopes."""
