"""The root of the tree: :class:`E2EEError`, what every error carries."""

from __future__ import annotations

from typing import ClassVar

from .codes import ErrorCode

__all__ = ["E2EEError"]


class E2EEError(Exception):
    """Root of every error this project raises on purpose.

    Attributes:
        code: stable snake_case identifier (:class:`ErrorCode`; docs/PROTOCOL.md §9).
        status: the HTTP status of a REST answer carrying it.
        message: one line for people (no secrets).
        field: name of the offending field, or ``None``.
        detail: machine-readable data for the client (``{"retry_after": 1.5}``), or ``None``.
    """

    code: str = ErrorCode.E2EE_ERROR
    status: ClassVar[int] = 400

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        self.detail: dict[str, object] | None = None

    def as_dict(self) -> dict[str, object]:
        """``{"code", "message", "field"[, "detail"]}`` for an error frame or a JSON body
        (``detail`` only when the error has one)."""
        out: dict[str, object] = {"code": str(self.code), "message": self.message, "field": self.field}
        if self.detail is not None:
            out["detail"] = self.detail
        return out
