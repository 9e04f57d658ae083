"""``/webhooks/{name}/events...``, ``/events/{event_id}...`` and ``/overview``."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter(tags=["events"])
