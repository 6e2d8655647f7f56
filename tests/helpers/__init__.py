"""Helpers shared by the tests (fixtures stay in the ``conftest.py`` files; nothing imports a conftest).

- ``config``: test settings (cheap argon2id and keystore KDF, the test password, ``in_ci``).
- ``relays``: relays for one test: ``start_relay`` (a real process), the relay's log and database.
- ``clients``: waiting on what a client emits: ``next_message``, ``Recorder``, ``barrier``, ``wait_until``.
- ``world``: ``World``, the relays and clients of one test, torn down at its end.
- ``ws``: raw websockets and tokens against a relay (exact frames on the wire).
- ``asgi``: the relay app in this process through httpx2.ASGITransport (HTTP only).
- ``tui``: Pilot tests of the app: screen text, buttons, offline clients, hostile strings.
- ``hostile``: ``Hostile``, a relay that is not there: frames handed to a client by the test.
- ``lying``, ``mutators``, ``wiretap``, ``fsfault``, ``writing``, ``scale``, ``cli``, ``names``,
  ``blast``: the security, fuzz, file-system, writer, scale-out and command-line tests' tools.
"""
