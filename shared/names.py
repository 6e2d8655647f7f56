"""Canonical usernames and normalised secrets: the one rule the relay and the client share.

* A **username** is NFKC-normalised and case-folded, then must be 3-32 characters of
  ``[a-z0-9_.-]`` starting with a letter or digit. ``Bob``, ``BOB`` and ``ｂｏｂ`` (fullwidth)
  are all ``bob``. The relay stores, signs tokens for and answers key fetches under this form;
  the client applies the same function to every name a user types (CLI arguments, the TUI) and
  to its own profile folder, and refuses a relay answer that names someone else.
* A **password or passphrase** is prepared with the PRECIS OpaqueString profile (RFC 8265 §4.2,
  via the ``precis-i18n`` library): non-ASCII spaces become U+0020, the result is NFC, and
  control characters or an empty string are refused. So ``café`` typed as ``e`` + U+0301 and as
  U+00E9 derive the same key and match the same hash. Secrets stored before this rule existed
  were hashed or derived from the raw text: :func:`secret_candidates` lists the normalised form
  first and the raw form second, for one legacy attempt that is then upgraded (re-hashed or
  re-saved) to the normalised form.
"""

from __future__ import annotations

import re
import unicodedata

import precis_i18n

from .errors import InvalidRequest

__all__ = ["USERNAME_RE", "canonical_username", "is_canonical_username", "normalise_secret", "secret_candidates"]

USERNAME_RE = re.compile(r"[a-z0-9][a-z0-9_.-]{2,31}")
"""A canonical username: 3-32 of ``[a-z0-9_.-]``, starting with a letter or digit."""

_OPAQUE = precis_i18n.get_profile("OpaqueString")


def canonical_username(raw: str) -> str:
    """The canonical form of a username: NFKC (UAX #15), then case-folded.

    Args:
        raw: a username as typed or received (any case, any Unicode width).

    Returns:
        3-32 characters of ``[a-z0-9_.-]``, starting with a letter or digit.

    Raises:
        InvalidRequest: ``raw`` is not a string, or its canonical form is not an acceptable
            username (``field`` "username").
    """
    if not isinstance(raw, str):
        raise InvalidRequest("username must be a string", field="username")
    name = unicodedata.normalize("NFKC", raw).casefold()
    if not USERNAME_RE.fullmatch(name):
        raise InvalidRequest(
            "username: 3-32 characters from a-z 0-9 _ . - starting with a letter or digit",
            field="username",
        )
    return name


def is_canonical_username(name: object) -> bool:
    """True if ``name`` is already a canonical username (a string the relay could have issued)."""
    return isinstance(name, str) and USERNAME_RE.fullmatch(name) is not None


def normalise_secret(raw: str, field: str = "password") -> str:
    """Prepare a password or passphrase with PRECIS OpaqueString (RFC 8265 §4.2): non-ASCII
    spaces mapped to U+0020, Unicode NFC; refused if empty or holding control or other
    disallowed code points (RFC 8264 FreeformClass).

    Costs ~15 µs for a 30-character secret (pure Python). Idempotent.

    Raises:
        InvalidRequest: not a string, empty, or a disallowed character (``field`` names it).
    """
    if not isinstance(raw, str):
        raise InvalidRequest(f"{field} must be a string", field=field)
    try:
        return _OPAQUE.enforce(raw)
    except UnicodeEncodeError as exc:
        what = (
            "is empty"
            if exc.reason.endswith("empty")
            else "contains a character that is not allowed (control characters and unassigned code points are refused)"
        )
        raise InvalidRequest(f"{field} {what}", field=field) from None


def secret_candidates(raw: str) -> list[str]:
    """The forms of ``raw`` to try against something stored: the normalised form first, then
    ``raw`` itself when it differs (a hash or keystore made before normalisation), or only
    ``raw`` when it cannot be normalised (it could only have been stored raw)."""
    try:
        norm = normalise_secret(raw)
    except InvalidRequest:
        return [raw] if isinstance(raw, str) and raw else []
    return [norm] if norm == raw else [norm, raw]
