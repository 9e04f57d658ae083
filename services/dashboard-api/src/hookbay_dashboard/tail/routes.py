"""``GET /webhooks/{name}/events/stream``: server-sent events of a webhook's new events."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter(tags=["events"])
