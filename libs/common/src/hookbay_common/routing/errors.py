"""The error a filter specification is refused with."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hookbay_common.httperrors import InvalidRequest


class FilterError(InvalidRequest):
    """A filter specification that cannot be compiled: an unknown operator or key, an operand of
    the wrong type, or a specification over the size limits. ``pointer`` is the RFC 6901 JSON
    pointer into the specification (``""`` for the whole of it, ``"/body/amount/$gt"``) and
    ``message`` says what is wrong there in an owner's words. Rendered as a 422 whose ``detail``
    holds ``to_detail()``."""

    status_code = 422

    def __init__(self, pointer: str, message: str) -> None:
        super().__init__(message)
        self.pointer = pointer

    def __str__(self) -> str:
        return f"filter {self.pointer or '(whole)'}: {self.message}"

    def to_detail(self, loc: Sequence[str | int] = ("body", "filter")) -> dict[str, Any]:
        """One entry of a 422 body's ``detail`` list, in the API's validation shape (``loc``,
        ``msg``, ``type``) plus the ``pointer``. ``loc`` is where the specification sits in the
        request (``("body", "route", "filter")`` for a dry run of an unsaved route); the
        pointer's segments are appended to it."""
        return {
            "loc": [*loc, *pointer_segments(self.pointer)],
            "msg": self.message,
            "type": "filter_invalid",
            "pointer": self.pointer,
        }

    def body(self) -> dict[str, Any]:
        return {"error": self.error, "message": str(self), "detail": [self.to_detail()]}


def pointer_to(parent: str, segment: str | int) -> str:
    """``parent`` extended by one segment, escaped as RFC 6901 says (``~`` → ``~0``, ``/`` → ``~1``)."""
    text = str(segment).replace("~", "~0").replace("/", "~1")
    return f"{parent}/{text}"


def pointer_segments(pointer: str) -> list[str]:
    """The unescaped segments of a JSON pointer (``""`` has none)."""
    if not pointer:
        return []
    return [s.replace("~1", "/").replace("~0", "~") for s in pointer[1:].split("/")]
