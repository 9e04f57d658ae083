"""``/destinations``: the caller's destinations. Another owner's destination answers 404 like a
missing one."""

from __future__ import annotations

from fastapi import APIRouter, Response, status

from hookbay_dashboard.deps import CurrentUser, DestinationsDep
from hookbay_dashboard.destinations.schemas import (
    DestinationCreate,
    DestinationHealthRead,
    DestinationRead,
    DestinationUpdate,
)

router = APIRouter(tags=["destinations"])


@router.get("/destinations", response_model=list[DestinationRead])
async def list_destinations(
    principal: CurrentUser, destinations: DestinationsDep
) -> list[DestinationRead]:
    found = await destinations.list_for_owner(principal.username)
    return [DestinationRead.of(d) for d in found]


@router.post("/destinations", response_model=DestinationRead, status_code=status.HTTP_201_CREATED)
async def create_destination(
    body: DestinationCreate, principal: CurrentUser, destinations: DestinationsDep
) -> DestinationRead:
    """Create a destination (state ``active``). A field the rules refuse (the name's grammar,
    a URL the SSRF guard refuses, a header hookbay sets itself) is a 422 naming it."""
    return DestinationRead.of(await destinations.create(principal.username, body))


@router.get("/destinations/{dest}", response_model=DestinationRead)
async def get_destination(
    dest: str, principal: CurrentUser, destinations: DestinationsDep
) -> DestinationRead:
    return DestinationRead.of(await destinations.get(principal.username, dest))


@router.get("/destinations/{dest}/health", response_model=DestinationHealthRead)
async def get_destination_health(
    dest: str, principal: CurrentUser, destinations: DestinationsDep
) -> DestinationHealthRead:
    """Deliveries held for it (how many, since when) and its last failed attempts (when, what
    answered, which event), newest first."""
    health = await destinations.health(principal.username, dest)
    return DestinationHealthRead.of(health.hold, health.last_errors)


@router.patch("/destinations/{dest}", response_model=DestinationRead)
async def update_destination(
    dest: str, body: DestinationUpdate, principal: CurrentUser, destinations: DestinationsDep
) -> DestinationRead:
    """Change the fields sent; ``headers`` replaces the stored map (a value sent as
    ``"********"`` keeps the stored value of that name)."""
    return DestinationRead.of(await destinations.change(principal.username, dest, body))


@router.delete("/destinations/{dest}", status_code=status.HTTP_204_NO_CONTENT)
async def delete_destination(
    dest: str, principal: CurrentUser, destinations: DestinationsDep
) -> Response:
    """409 naming the routes (``webhook/route``) that still deliver to it."""
    await destinations.delete(principal.username, dest)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post("/destinations/{dest}/pause", response_model=DestinationRead)
async def pause_destination(
    dest: str, principal: CurrentUser, destinations: DestinationsDep
) -> DestinationRead:
    """``paused`` (reason ``manual``): its deliveries are held, never discarded, until it is
    resumed. A disabled destination stays disabled."""
    return DestinationRead.of(await destinations.pause(principal.username, dest))


@router.post("/destinations/{dest}/resume", response_model=DestinationRead)
async def resume_destination(
    dest: str, principal: CurrentUser, destinations: DestinationsDep
) -> DestinationRead:
    """``active`` again, from paused or disabled; held deliveries go out in order."""
    return DestinationRead.of(await destinations.resume(principal.username, dest))
