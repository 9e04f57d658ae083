"""How a webhook verifies its requests (``WebhookVerification``) and what verification said
about one request (``EventVerification``)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, Final

from pydantic import (
    AwareDatetime,
    ConfigDict,
    Field,
    SecretStr,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from hookbay_common.models.record import Record


class InvalidReason(StrEnum):
    """Why a request's signature was refused."""

    MISSING_SIGNATURE = "missing_signature"
    """The scheme's signature header is absent (or blank)."""
    BAD_SIGNATURE = "bad_signature"
    """A signature is present but matches no secret (or cannot be read)."""
    TIMESTAMP_OUT_OF_TOLERANCE = "timestamp_out_of_tolerance"
    """The signed timestamp is further from the clock than the scheme tolerates (replay)."""
    UNSUPPORTED_VERSION = "unsupported_version"
    """The signature names a scheme version or algorithm the verifier does not implement."""


class MatchedSecret(StrEnum):
    """Which of a webhook's secrets a valid signature was made with."""

    CURRENT = "current"
    PREVIOUS = "previous"


class VerificationResult(StrEnum):
    VALID = "valid"
    INVALID = "invalid"
    SKIPPED = "skipped"
    """Nothing to verify (type ``none``)."""


class VerificationType(StrEnum):
    """How a webhook's requests prove they come from their sender (``docs/owners/verification.md``)."""

    HOOKBAY = "hookbay"
    STANDARD_WEBHOOKS = "standard-webhooks"
    STRIPE = "stripe"
    GITHUB = "github"
    SHOPIFY = "shopify"
    SLACK = "slack"
    TWILIO = "twilio"
    ZOOM = "zoom"
    META = "meta"
    PADDLE = "paddle"
    LINEAR = "linear"
    PAGERDUTY = "pagerduty"
    TYPEFORM = "typeform"
    INTERCOM = "intercom"
    SQUARE = "square"
    GITLAB = "gitlab"
    SENDGRID = "sendgrid"
    MAILGUN = "mailgun"
    X = "x"
    HMAC = "hmac"
    BASIC = "basic"
    API_KEY = "api-key"
    NONE = "none"


class VerificationMode(StrEnum):
    ENFORCE = "enforce"
    """A request that fails verification is answered 401, recorded as rejected, never forwarded."""
    RECORD = "record"
    """Every request is accepted and forwarded; the verdict is recorded on the event."""


class HmacAlgorithm(StrEnum):
    SHA1 = "sha1"
    SHA256 = "sha256"
    SHA512 = "sha512"


class SignatureEncoding(StrEnum):
    HEX = "hex"
    """Compared case-insensitively."""
    BASE64 = "base64"
    """The standard alphabet, padded."""


class HmacScheme(Record):
    """The generic HMAC scheme (type ``hmac``): the MAC of ``payload`` (a template over
    ``{body}``, ``{timestamp}``, ``{id}``, ``{url}``) in header ``header``, after ``prefix``."""

    header: str = Field(min_length=1)
    algorithm: HmacAlgorithm = HmacAlgorithm.SHA256
    encoding: SignatureEncoding = SignatureEncoding.HEX
    prefix: str = ""
    payload: str = "{body}"
    timestamp_header: str | None = None
    """Where ``{timestamp}`` (Unix seconds) comes from; bounded by ``tolerance_s``."""
    id_header: str | None = None
    """Where ``{id}`` comes from."""

    @field_validator("header", "timestamp_header", "id_header")
    @classmethod
    def _lower(cls, value: str | None) -> str | None:
        return value.strip().lower() if value is not None else None

    @model_validator(mode="after")
    def _placeholders(self) -> HmacScheme:
        text = self.payload
        for name in ("body", "timestamp", "id", "url"):
            text = text.replace("{" + name + "}", "")
        if "{" in text or "}" in text:
            raise PydanticCustomError(
                "hmac_payload", "payload may use only {body}, {timestamp}, {id} and {url}"
            )
        if "{body}" not in self.payload:
            raise PydanticCustomError("hmac_payload", "payload must contain {body}")
        if "{timestamp}" in self.payload and self.timestamp_header is None:
            raise PydanticCustomError("hmac_payload", "{timestamp} needs timestamp_header")
        if "{id}" in self.payload and self.id_header is None:
            raise PydanticCustomError("hmac_payload", "{id} needs id_header")
        return self


class BasicCredentials(Record):
    username: str = Field(min_length=1)
    password: SecretStr


class ApiKeyCredentials(Record):
    header: str = Field(min_length=1)
    value: SecretStr

    @field_validator("header")
    @classmethod
    def _lower(cls, value: str) -> str:
        return value.strip().lower()


class PreviousSecret(Record):
    """The secret a rotation replaced, still accepted until ``expires_at``."""

    secret: SecretStr
    expires_at: AwareDatetime


_NEEDS_SECRET: Final = frozenset(VerificationType) - {
    VerificationType.SENDGRID, VerificationType.BASIC, VerificationType.API_KEY,
    VerificationType.NONE,
}  # fmt: skip
REQUIRED_FIELDS: Final[dict[VerificationType, frozenset[str]]] = {
    kind: frozenset(
        ({"secret"} if kind in _NEEDS_SECRET else set())
        | {
            VerificationType.TWILIO: {"public_url"},
            VerificationType.SQUARE: {"public_url"},
            VerificationType.META: {"verify_token"},
            VerificationType.SENDGRID: {"public_key"},
            VerificationType.HMAC: {"hmac"},
            VerificationType.BASIC: {"basic"},
            VerificationType.API_KEY: {"api_key"},
        }.get(kind, set())
    )
    for kind in VerificationType
}
"""The fields each type cannot work without (a missing one is a validation error naming it)."""

SEALED_PATHS: Final = (
    ("secret",), ("previous", "secret"), ("verify_token",), ("basic", "password"),
    ("api_key", "value"),
)  # fmt: skip
"""Where a ``WebhookVerification`` holds secrets: sealed at rest and on the change log."""


class WebhookVerification(Record):
    """How a webhook's requests are verified. Secrets are plaintext in memory only; at rest and
    on the change log they are sealed (``to_document``). Built from owner input, it raises a
    ``pydantic.ValidationError`` whose error ``loc`` names each field the type needs and lacks
    (type ``verification_field_required``)."""

    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True)

    type: VerificationType
    mode: VerificationMode = VerificationMode.ENFORCE
    secret: SecretStr | None = None
    previous: PreviousSecret | None = None
    tolerance_s: int | None = Field(default=None, ge=0)
    """Largest distance between a signed timestamp and now; ``None``: the type's default,
    ``0``: not checked."""
    public_url: str | None = None
    verify_token: SecretStr | None = None
    public_key: str | None = None
    hmac: HmacScheme | None = None
    basic: BasicCredentials | None = None
    api_key: ApiKeyCredentials | None = None

    @field_validator(
        "secret", "public_url", "verify_token", "public_key", "hmac", "basic", "api_key"
    )
    @classmethod
    def _required_by_type(cls, value: Any, info: ValidationInfo) -> Any:
        kind = info.data.get("type")
        if kind is None or info.field_name is None:
            return value  # the type itself failed; its error is reported
        empty = value is None or (isinstance(value, SecretStr | str) and not str(_plain(value)))
        if empty and info.field_name in REQUIRED_FIELDS[kind]:
            raise PydanticCustomError(
                "verification_field_required",
                "{field} is required by verification type {type}",
                {"field": info.field_name, "type": kind.value},
            )
        return value

    def rotated(
        self, secret: SecretStr, *, now: datetime, keep_previous_for_s: int
    ) -> WebhookVerification:
        """This verification with ``secret`` as current; the replaced secret stays accepted for
        ``keep_previous_for_s`` seconds (0: not at all)."""
        previous = self.previous
        replaced = self.secret
        if replaced is not None and replaced.get_secret_value() != secret.get_secret_value():
            previous = None
            if keep_previous_for_s > 0:
                expires = now + timedelta(seconds=keep_previous_for_s)
                previous = PreviousSecret(secret=replaced, expires_at=expires)
        return self.model_copy(update={"secret": secret, "previous": previous})

    def to_document(self, seal: Callable[[str], str]) -> dict[str, Any]:
        """As stored: JSON types, every secret replaced by ``seal(secret)``."""
        doc = self.model_dump(mode="json", exclude_none=True)
        for path in SEALED_PATHS:
            value: Any = self
            for part in path:
                value = getattr(value, part, None) if value is not None else None
            if value is not None:
                _at(doc, path[:-1])[path[-1]] = seal(value.get_secret_value())
        return doc

    @classmethod
    def from_document(
        cls, doc: dict[str, Any], unseal: Callable[[str], str]
    ) -> WebhookVerification:
        """The inverse of ``to_document``."""
        doc = {k: dict(v) if isinstance(v, dict) else v for k, v in doc.items()}
        for path in SEALED_PATHS:
            parent = _at(doc, path[:-1]) if all(p in doc for p in path[:-1]) else None
            if parent is not None and parent.get(path[-1]) is not None:
                parent[path[-1]] = unseal(parent[path[-1]])
        return cls.model_validate(doc)


def _plain(value: SecretStr | str) -> str:
    return value.get_secret_value() if isinstance(value, SecretStr) else value


def _at(doc: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
    for part in path:
        doc = doc[part]
    return doc


class EventVerification(Record):
    """What verification said about one request: ``secret`` is set when ``valid``, ``reason``
    when ``invalid``."""

    type: VerificationType
    result: VerificationResult
    secret: MatchedSecret | None = None
    reason: InvalidReason | None = None
