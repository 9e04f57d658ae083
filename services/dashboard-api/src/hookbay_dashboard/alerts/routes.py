"""``/alert-channels``: where the caller's issue notifications go. Another owner's channel
answers 404 like a missing one."""

from __future__ import annotations

from fastapi import APIRouter, Response, status

from hookbay_dashboard.alerts.schemas import (
    AlertChannelCreate,
    AlertChannelRead,
    AlertChannelTestResult,
)
from hookbay_dashboard.deps import AlertChannelsDep, CurrentUser

router = APIRouter(tags=["alert-channels"])


@router.get("/alert-channels", response_model=list[AlertChannelRead])
async def list_alert_channels(
    principal: CurrentUser, channels: AlertChannelsDep
) -> list[AlertChannelRead]:
    return [AlertChannelRead.of(c) for c in await channels.list_for_owner(principal.username)]


@router.post(
    "/alert-channels", response_model=AlertChannelRead, status_code=status.HTTP_201_CREATED
)
async def create_alert_channel(
    body: AlertChannelCreate, principal: CurrentUser, channels: AlertChannelsDep
) -> AlertChannelRead:
    """Every issue of yours that opens, reopens or resolves is told here once. A field its
    type lacks or does not take, a URL the SSRF guard refuses, a malformed secret: 422 naming
    it."""
    return AlertChannelRead.of(await channels.create(principal.username, body))


@router.get("/alert-channels/{channel_id}", response_model=AlertChannelRead)
async def get_alert_channel(
    channel_id: str, principal: CurrentUser, channels: AlertChannelsDep
) -> AlertChannelRead:
    return AlertChannelRead.of(await channels.get(principal.username, channel_id))


@router.delete("/alert-channels/{channel_id}", status_code=status.HTTP_204_NO_CONTENT)
async def delete_alert_channel(
    channel_id: str, principal: CurrentUser, channels: AlertChannelsDep
) -> Response:
    await channels.delete(principal.username, channel_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post("/alert-channels/{channel_id}/test", response_model=AlertChannelTestResult)
async def test_alert_channel(
    channel_id: str, principal: CurrentUser, channels: AlertChannelsDep
) -> AlertChannelTestResult:
    """Send a test notification now and say whether the channel took it (a failure also
    marks the channel)."""
    error = await channels.test(principal.username, channel_id)
    return AlertChannelTestResult(sent=error is None, error=error)
