"""Small display helpers shared by the demo and the inspector (no Textual, no I/O)."""

from __future__ import annotations


def shorten(obj, width: int):
    """``obj`` (JSON-like) with every string longer than ``width`` characters cut to ``width``
    and marked with its full length, e.g. ``"eyJh… (538 chars)"``."""
    if isinstance(obj, str) and len(obj) > width:
        return f"{obj[:width]}… ({len(obj)} chars)"
    if isinstance(obj, dict):
        return {k: shorten(v, width) for k, v in obj.items()}
    if isinstance(obj, list):
        return [shorten(v, width) for v in obj]
    return obj
