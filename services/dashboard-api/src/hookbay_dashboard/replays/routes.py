"""``POST /events/{event_id}/replay`` and the bulk replay of a webhook's failed events."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter(tags=["replays"])
