"""``/webhooks``: the caller's webhooks. Another owner's webhook answers 404 like a missing one."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response, status

from hookbay_common.models import Webhook
from hookbay_dashboard.deps import CurrentUser, SettingsDep, WebhooksDep
from hookbay_dashboard.webhooks.schemas import (
    WebhookCreate,
    WebhookRead,
    WebhookUpdate,
    WebhookWritten,
)
from hookbay_dashboard.webhooks.service import UNCHANGED, generate_secret

router = APIRouter(tags=["webhooks"])


def _written(webhook: Webhook, public_url: str, generated: str | None) -> WebhookWritten:
    return WebhookWritten(
        **WebhookRead.of(webhook, public_url).model_dump(), generated_secret=generated
    )


@router.get("/webhooks", response_model=list[WebhookRead])
async def list_webhooks(
    principal: CurrentUser, webhooks: WebhooksDep, settings: SettingsDep
) -> list[WebhookRead]:
    hooks = await webhooks.list_for_owner(principal.username)
    return [WebhookRead.of(h, settings.public_url) for h in hooks]


@router.post("/webhooks", response_model=WebhookWritten, status_code=status.HTTP_201_CREATED)
async def create_webhook(
    body: WebhookCreate, principal: CurrentUser, webhooks: WebhooksDep, settings: SettingsDep
) -> WebhookWritten:
    """Create a webhook; the name is lowercase words joined by single hyphens (at most 64
    characters) and the forward URL follows the SSRF rules. Ingest accepts requests to it
    within 2 s. A verification whose type lacks a
    field it needs is a 422 naming the field."""
    generated = generate_secret() if body.generate_secret else None
    hook = await webhooks.create(
        principal.username, body.name, secret=generated or body.secret,
        forward_url=body.forward_url, verification=body.verification,
    )  # fmt: skip
    return _written(hook, settings.public_url, generated)


@router.get("/webhooks/{name}", response_model=WebhookRead)
async def get_webhook(
    name: str, principal: CurrentUser, webhooks: WebhooksDep, settings: SettingsDep
) -> WebhookRead:
    return WebhookRead.of(await webhooks.get(principal.username, name), settings.public_url)


@router.patch("/webhooks/{name}", response_model=WebhookWritten)
async def update_webhook(
    name: str,
    body: WebhookUpdate,
    principal: CurrentUser,
    webhooks: WebhooksDep,
    settings: SettingsDep,
) -> WebhookWritten:
    """Change the forward URL, set / rotate / remove the secret or the verification (a new
    verification secret with ``keep_previous_for_s`` keeps the old one valid that long).
    Ingest sees it within 2 s."""
    sent = body.model_fields_set
    generated = generate_secret() if body.generate_secret else None
    secret: Any = generated if generated else (body.secret if "secret" in sent else UNCHANGED)
    forward_url: Any = body.forward_url if "forward_url" in sent else UNCHANGED
    verification: Any = body.verification if "verification" in sent else UNCHANGED
    if secret is UNCHANGED and forward_url is UNCHANGED and verification is UNCHANGED:
        hook = await webhooks.get(principal.username, name)
    else:
        hook = await webhooks.change(
            principal.username, name, secret=secret, forward_url=forward_url,
            verification=verification,
        )  # fmt: skip
    return _written(hook, settings.public_url, generated)


@router.delete("/webhooks/{name}", status_code=status.HTTP_204_NO_CONTENT)
async def delete_webhook(name: str, principal: CurrentUser, webhooks: WebhooksDep) -> Response:
    """Delete the webhook and its stats; its events stay until retention removes them
    (reachable by id)."""
    await webhooks.delete(principal.username, name)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post("/webhooks/{name}/activate", response_model=WebhookRead)
async def activate_webhook(
    name: str, principal: CurrentUser, webhooks: WebhooksDep, settings: SettingsDep
) -> WebhookRead:
    hook = await webhooks.set_active(principal.username, name, True)
    return WebhookRead.of(hook, settings.public_url)


@router.post("/webhooks/{name}/deactivate", response_model=WebhookRead)
async def deactivate_webhook(
    name: str, principal: CurrentUser, webhooks: WebhooksDep, settings: SettingsDep
) -> WebhookRead:
    """Senders get 403 "Webhook is not active" within 2 s, until it is activated again."""
    hook = await webhooks.set_active(principal.username, name, False)
    return WebhookRead.of(hook, settings.public_url)
