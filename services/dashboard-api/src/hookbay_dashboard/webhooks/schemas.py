"""Bodies of ``/webhooks``. Secrets are write-only: a set secret always reads as a mask."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from hookbay_common.models import (
    HmacScheme,
    VerificationMode,
    VerificationType,
    Webhook,
    WebhookVerification,
)
from hookbay_common.names import WEBHOOK_NAME_MAX
from hookbay_common.netguard import MAX_URL_LENGTH
from hookbay_dashboard.schemas import Timestamp

SECRET_MASK = "********"  # noqa: S105 - what a set secret reads as
MAX_SECRET_LENGTH = 4096
MAX_KEEP_PREVIOUS_S = 30 * 86400

_WRITE_ONLY = (
    f"Write-only (reads as {SECRET_MASK!r}); on PATCH of the same type, omitted or sent as "
    f"{SECRET_MASK!r} it keeps the stored value."
)


def _secret_field(description: str = _WRITE_ONLY) -> Any:
    return Field(default=None, min_length=1, max_length=MAX_SECRET_LENGTH, description=description)


def _no_surrounding_spaces(value: str | None) -> str | None:
    if value is not None and value != value.strip():
        raise ValueError("must not start or end with spaces")
    return value


FORWARD_URL = (
    "Where the webhook's events go: shorthand for the route `forward_url` (unfiltered, first) "
    "to the destination `<webhook>.forward_url`, both kept in step with it (docs/owners/"
    "routes.md#forward_url); null removes them."
)


class BasicWrite(BaseModel):
    model_config = ConfigDict(extra="forbid")

    username: str = Field(min_length=1, max_length=256)
    password: str | None = _secret_field()

    _check = field_validator("password")(_no_surrounding_spaces)


class ApiKeyWrite(BaseModel):
    model_config = ConfigDict(extra="forbid")

    header: str = Field(min_length=1, max_length=256, description="The request header to read.")
    value: str | None = _secret_field()

    _check = field_validator("value")(_no_surrounding_spaces)


class VerificationWrite(BaseModel):
    """How the webhook's requests are verified (``docs/owners/verification.md``). On PATCH with
    the stored type, it is merged into the stored verification: fields not sent, and secrets
    sent as the mask, keep their value; a field sent as null is cleared. Another type (or
    POST) starts afresh. Each type's required fields are checked after the merge (a missing
    one: 422 naming it)."""

    model_config = ConfigDict(extra="forbid")

    type: VerificationType
    mode: VerificationMode = Field(
        default=VerificationMode.ENFORCE,
        description="enforce (the default): a failing request is answered 401; record: "
        "accepted, the verdict recorded on the event.",
    )
    secret: str | None = _secret_field()
    keep_previous_for_s: int | None = Field(
        default=None, ge=0, le=MAX_KEEP_PREVIOUS_S,
        description="On PATCH with a new secret: the replaced secret stays valid for this many "
        "seconds (omitted or 0: replaced at once). Not stored; the read shows previous.expires_at.",
    )  # fmt: skip
    tolerance_s: int | None = Field(
        default=None, ge=0,
        description="For types that sign a timestamp: the largest distance from now accepted "
        "(null: the type's default; 0: not checked).",
    )  # fmt: skip
    public_url: str | None = Field(
        default=None, min_length=1, max_length=MAX_URL_LENGTH,
        description="twilio, square: the URL the sender signs (as configured at the sender).",
    )  # fmt: skip
    verify_token: str | None = _secret_field(f"meta: the GET handshake's token. {_WRITE_ONLY}")
    public_key: str | None = Field(
        default=None, min_length=1, max_length=MAX_SECRET_LENGTH,
        description="sendgrid: the ECDSA public key, base64 DER.",
    )  # fmt: skip
    hmac: HmacScheme | None = Field(default=None, description="hmac: the generic scheme.")
    basic: BasicWrite | None = Field(default=None, description="basic: HTTP Basic credentials.")
    api_key: ApiKeyWrite | None = Field(default=None, description="api-key: a header and value.")

    _check = field_validator("secret", "verify_token")(_no_surrounding_spaces)


class PreviousSecretRead(BaseModel):
    secret: str = Field(description=f"Always {SECRET_MASK!r}.")
    expires_at: Timestamp = Field(description="When the replaced secret stops being accepted.")


class BasicRead(BaseModel):
    username: str
    password: str = Field(description=f"Always {SECRET_MASK!r}.")


class ApiKeyRead(BaseModel):
    header: str
    value: str = Field(description=f"Always {SECRET_MASK!r}.")


class VerificationRead(BaseModel):
    """A webhook's verification with every secret masked."""

    type: VerificationType
    mode: VerificationMode
    secret: str | None = Field(description=f"{SECRET_MASK!r} when set, else null.")
    previous: PreviousSecretRead | None = Field(
        description="The secret a rotation replaced, still accepted until expires_at."
    )
    tolerance_s: int | None
    public_url: str | None
    verify_token: str | None = Field(description=f"{SECRET_MASK!r} when set, else null.")
    public_key: str | None
    hmac: HmacScheme | None
    basic: BasicRead | None
    api_key: ApiKeyRead | None

    @classmethod
    def of(cls, verification: WebhookVerification) -> VerificationRead:
        v = verification
        previous = v.previous
        return cls(
            type=v.type, mode=v.mode, secret=_mask(v.secret),
            previous=PreviousSecretRead(secret=SECRET_MASK, expires_at=previous.expires_at)
            if previous else None,
            tolerance_s=v.tolerance_s, public_url=v.public_url,
            verify_token=_mask(v.verify_token), public_key=v.public_key, hmac=v.hmac,
            basic=BasicRead(username=v.basic.username, password=SECRET_MASK) if v.basic else None,
            api_key=ApiKeyRead(header=v.api_key.header, value=SECRET_MASK) if v.api_key else None,
        )  # fmt: skip


def _mask(value: object | None) -> str | None:
    return SECRET_MASK if value is not None else None


class WebhookRead(BaseModel):
    id: str
    username: str
    name: str
    url: str = Field(description="The receiving URL senders POST to.")
    active: bool
    secret: str | None = Field(
        description=f"{SECRET_MASK!r} when a plain secret (verification type hookbay) is set, "
        "else null."
    )
    verification: VerificationRead | None = Field(
        default=None, description="How requests are verified; null: by the plain secret, if any."
    )
    forward_url: str | None
    created_at: Timestamp
    updated_at: Timestamp

    @classmethod
    def of(cls, webhook: Webhook, public_url: str) -> WebhookRead:
        return cls(
            id=webhook.id, username=webhook.username, name=webhook.name,
            url=f"{public_url.rstrip('/')}/w/{webhook.username}/{webhook.name}",
            active=webhook.active, secret=SECRET_MASK if webhook.secret else None,
            verification=VerificationRead.of(webhook.verification)
            if webhook.verification else None,
            forward_url=webhook.forward_url, created_at=webhook.created_at,
            updated_at=webhook.updated_at,
        )  # fmt: skip

    def view(self) -> dict[str, Any]:
        return self.model_dump(mode="python")


class WebhookWritten(WebhookRead):
    generated_secret: str | None = Field(
        default=None,
        description="The secret generated by this request (generate_secret); shown this once.",
    )


class _SecretChoice(BaseModel):
    model_config = ConfigDict(extra="forbid")

    secret: str | None = Field(
        default=None, min_length=8, max_length=256,
        description="A plain secret: verification type hookbay (X-Service-Signature).",
    )  # fmt: skip
    generate_secret: bool = Field(
        default=False, description="Generate a random secret and return it once."
    )
    verification: VerificationWrite | None = Field(
        default=None,
        description="How requests are verified; replaces a plain secret. On PATCH, null "
        "removes it. Not together with secret or generate_secret (422).",
    )

    @model_validator(mode="after")
    def _one_secret(self) -> _SecretChoice:
        if self.generate_secret and self.secret is not None:
            raise ValueError("give either secret or generate_secret, not both")
        if self.verification is not None and (self.secret is not None or self.generate_secret):
            raise ValueError(
                "give either verification or secret / generate_secret, not both (a plain "
                "secret is verification type hookbay)"
            )
        return self


class WebhookCreate(_SecretChoice):
    name: str = Field(min_length=1, max_length=WEBHOOK_NAME_MAX)
    forward_url: str | None = Field(
        default=None, min_length=1, max_length=MAX_URL_LENGTH, description=FORWARD_URL
    )


class WebhookUpdate(_SecretChoice):
    """Only the fields sent change: ``"secret": null`` removes the plain secret,
    ``"verification": null`` the verification, ``"forward_url": null`` stops forwarding;
    ``generate_secret`` rotates to a generated secret. Setting a plain secret removes the
    verification and setting a verification removes the plain secret (one of them is in use)."""

    forward_url: str | None = Field(
        default=None, min_length=1, max_length=MAX_URL_LENGTH, description=FORWARD_URL
    )
