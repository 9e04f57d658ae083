"""A route's deduplication rule and the key it reads of an event: pure, no store.

    rule = DedupeRule(window_s=3600, preset="github")      # or fields=["body.id", …]
    key = dedupe_key(rule, subject)    # None: this event is not deduplicated

The claim of a key in a shared store is ``hookbay_common.routing.dedupe_store``. The semantics
are the owner's page, docs/owners/routes.md ("Deduplication"); the reasons, docs/decisions.md
("Deduplication").
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from enum import StrEnum
from typing import Annotated, Final, Self

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

from hookbay_common.routing.subject import Subject
from hookbay_common.routing.values import MISSING

WINDOW_MAX: Final = 7 * 86_400
MAX_FIELDS: Final = 5
MAX_PATH: Final = 256
"""Characters in one field path."""
MAX_SEGMENTS: Final = 16
"""Segments of a ``body.`` path after ``body`` (the filters' nesting limit)."""
SCOPES: Final = ("body", "headers", "query")

_HEADER_NAME: Final = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f]")


class DedupePreset(StrEnum):
    """A provider whose deliveries carry one id per event, kept on the provider's retries."""

    GITHUB = "github"
    STRIPE = "stripe"
    STANDARD_WEBHOOKS = "standard-webhooks"
    SHOPIFY = "shopify"

    @property
    def fields(self) -> tuple[str, ...]:
        return PRESET_FIELDS[self]


PRESET_FIELDS: Final[dict[DedupePreset, tuple[str, ...]]] = {
    DedupePreset.GITHUB: ("headers.x-github-delivery",),
    DedupePreset.STRIPE: ("body.id",),
    DedupePreset.STANDARD_WEBHOOKS: ("headers.webhook-id",),
    DedupePreset.SHOPIFY: ("headers.x-shopify-event-id",),
}


def normal_path(path: str) -> str:
    """``path`` with its header name lowercased; ``ValueError`` saying what is wrong with it.

    ``body.a.b`` reads nested object keys (a key holding a dot cannot be named);
    ``headers.<name>`` and ``query.<name>`` read one name, never split on dots."""
    if len(path) > MAX_PATH:
        raise ValueError(f"the field {path[:40]!r}… is longer than {MAX_PATH} characters")
    scope, dot, rest = path.partition(".")
    if scope not in SCOPES or not dot:
        raise ValueError(
            f"the field {path!r} must start with 'body.', 'headers.' or 'query.' "
            "(such as 'body.id' or 'headers.x-request-id')"
        )
    if not rest:
        raise ValueError(f"the field {path!r} names nothing after {scope!r}")
    if _CONTROL.search(rest):
        raise ValueError(f"the field {path!r} holds a control character")
    if scope == "body":
        segments = rest.split(".")
        if "" in segments:
            raise ValueError(f"the field {path!r} has an empty segment")
        if len(segments) > MAX_SEGMENTS:
            raise ValueError(f"the field {path!r} is more than {MAX_SEGMENTS} levels deep")
        return path
    if scope == "headers":
        if not _HEADER_NAME.fullmatch(rest):
            raise ValueError(f"the field {path!r}: {rest!r} is not an HTTP header name")
        return f"headers.{rest.lower()}"
    return path


FieldPath = Annotated[str, AfterValidator(normal_path)]


class DedupeRule(BaseModel):
    """Deliver an event over the route only if no other event with the same key went over it
    in the last ``window_s`` seconds. The key is read from ``preset``'s field or from
    ``fields`` (exactly one of them): dotted paths into ``body.``, ``headers.`` (names
    stored lowercase) or ``query.``. Invalid rules raise pydantic's ``ValidationError``
    naming the field. Immutable; a plain model (not ``Record``) so that the models can hold it
    without importing one another in a circle."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    window_s: int = Field(strict=True, ge=1, le=WINDOW_MAX)
    preset: DedupePreset | None = None
    fields: tuple[FieldPath, ...] | None = None

    @field_validator("fields", mode="before")
    @classmethod
    def _how_many(cls, fields: object) -> object:
        # counted before the paths are checked, so that the count is one error of its own
        if isinstance(fields, list | tuple) and not 1 <= len(fields) <= MAX_FIELDS:
            raise ValueError(f"1 to {MAX_FIELDS} fields make a key, not {len(fields)}")
        return fields

    @field_validator("fields")
    @classmethod
    def _distinct(cls, fields: tuple[str, ...] | None) -> tuple[str, ...] | None:
        seen: set[str] = set()
        for path in fields or ():
            if path in seen:
                raise ValueError(f"{path!r} is named twice (header names ignore case)")
            seen.add(path)
        return fields

    @model_validator(mode="after")
    def _one_source(self) -> Self:
        if (self.preset is None) == (self.fields is None):
            given = "both" if self.preset is not None else "neither"
            raise ValueError(
                f"give exactly one of preset or fields ({given} given): a preset names its "
                "provider's field, fields name your own"
            )
        return self

    @property
    def paths(self) -> tuple[str, ...]:
        """The fields the key is read from, in order: the preset's or the rule's own."""
        if self.preset is not None:
            return self.preset.fields
        assert self.fields is not None  # the validator makes one of them present
        return self.fields


def field_value(subject: Subject, path: str) -> object:
    """The value at a valid ``path`` in ``subject``, or ``MISSING``. A ``body.`` path reads
    object keys only: one that meets an array, a scalar or a text body leads nowhere."""
    scope, _, rest = path.partition(".")
    if scope == "headers":
        return subject.headers.get(rest, MISSING)
    if scope == "query":
        return subject.query.get(rest, MISSING)
    if not subject.body_is_json:
        return MISSING
    value = subject.body
    for segment in rest.split("."):
        if not isinstance(value, dict):
            return MISSING
        value = value.get(segment, MISSING)
    return value


def key_part(value: object) -> object | None:
    """A field's value as it enters the key, or ``None`` when it cannot identify an event:
    missing, ``null``, a string that is empty or only whitespace, an object or an array (a
    repeated query parameter is one), a number too large for a float. Integral numbers are integers, so ``1`` and ``1.0`` (equal
    to a filter) make one key; a string never equals a number or a boolean."""
    if value is MISSING or value is None:
        return None
    if isinstance(value, str):
        return value if value.strip() else None
    if value.__class__ is bool or value.__class__ is int:
        return value
    if isinstance(value, float):
        if not math.isfinite(value):  # 1e999 parses as infinity, which JSON cannot write
            return None
        return int(value) if value.is_integer() else value
    return None


def dedupe_key(rule: DedupeRule, subject: Subject) -> str | None:
    """The event's key under ``rule``: the SHA-256 (64 hex digits) of the canonical JSON of
    ``[[path, value], …]`` in the rule's order, or ``None`` when any field gives no value
    (``key_part``). ``None`` means "do not deduplicate this event", never "same as every
    other event without it". Never raises for a valid rule."""
    parts: list[list[object]] = []
    for path in rule.paths:
        part = key_part(field_value(subject, path))
        if part is None:
            return None
        parts.append([path, part])
    # ensure_ascii: a lone surrogate in a JSON string still encodes; separators: one spelling
    canonical = json.dumps(parts, ensure_ascii=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()
