"""Tooling around the product, shipped with the ``demo``/``bench`` extras: never imported by the
relay (``server``) or the client (``client_tui``), which a test checks.

* ``relayproc`` starts a real relay process on a free port (the demo, the bench, the tests);
* ``loadgen`` drives many real L4 clients against a relay (the load tests, the bench);
* ``screenshots`` makes the README's screenshots with the app's own ``save_screenshot``;
* ``demo`` is ``e2ee-demo``; ``attacks`` with ``attacks_membership`` and ``key_attacks`` (and
  ``salamander``, the hostile sender's AES-GCM collision) is ``e2ee-demo --attacks``;
* ``hostile`` with ``hostile_membership`` is the lying relay of ``e2ee-relay --hostile MODE``
  (the relay imports it only when asked for, by that flag).
"""
