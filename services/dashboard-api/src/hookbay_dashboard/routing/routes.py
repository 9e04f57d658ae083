"""``/webhooks/{name}/routes``: a webhook's ordered routes and their dry run. Another owner's
webhook answers 404 like a missing one, and so does each of its routes."""

from __future__ import annotations

from fastapi import APIRouter, Response, status

from hookbay_common.models import Event, Webhook
from hookbay_dashboard.deps import CurrentUser, RoutesDep
from hookbay_dashboard.routing.schemas import (
    DryRunDedupe,
    DryRunEvent,
    DryRunRequest,
    DryRunResult,
    DryRunTransform,
    RouteCreate,
    RouteRead,
    RouteUpdate,
)
from hookbay_dashboard.routing.service import DryRun
from hookbay_dashboard.transformations.schemas import RequestBody, TestError

router = APIRouter(tags=["routes"])


def _read(webhook: Webhook, position: int) -> RouteRead:
    return RouteRead.of(webhook.routes[position], webhook.name, position)


@router.get("/webhooks/{name}/routes", response_model=list[RouteRead])
async def list_routes(name: str, principal: CurrentUser, routes: RoutesDep) -> list[RouteRead]:
    """In the webhook's order: the order the router evaluates them in."""
    webhook = await routes.webhook(principal.username, name)
    return [_read(webhook, i) for i in range(len(webhook.routes))]


@router.post(
    "/webhooks/{name}/routes", response_model=RouteRead, status_code=status.HTTP_201_CREATED
)
async def create_route(
    name: str, body: RouteCreate, principal: CurrentUser, routes: RoutesDep
) -> RouteRead:
    """Add a route (last, or at ``position``). Its destination must be one of yours, its
    filter valid and its ``delay_s`` within 0..86400 (else 422 naming the field, a filter's
    JSON pointer); at most 20 routes per webhook (409)."""
    return _read(*await routes.create(principal.username, name, body))


@router.get("/webhooks/{name}/routes/{route}", response_model=RouteRead)
async def get_route(name: str, route: str, principal: CurrentUser, routes: RoutesDep) -> RouteRead:
    return _read(*await routes.get(principal.username, name, route))


@router.patch("/webhooks/{name}/routes/{route}", response_model=RouteRead)
async def update_route(
    name: str, route: str, body: RouteUpdate, principal: CurrentUser, routes: RoutesDep
) -> RouteRead:
    """Change the fields sent (refused as on creation: 422 naming the field); ``position``
    moves the route. A new ``delay_s`` applies to events routed from then on."""
    return _read(*await routes.change(principal.username, name, route, body))


@router.delete("/webhooks/{name}/routes/{route}", status_code=status.HTTP_204_NO_CONTENT)
async def delete_route(
    name: str, route: str, principal: CurrentUser, routes: RoutesDep
) -> Response:
    await routes.delete(principal.username, name, route)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post("/webhooks/{name}/routes/{route}/dry-run", response_model=DryRunResult)
async def dry_run_route(
    name: str, route: str, body: DryRunRequest, principal: CurrentUser, routes: RoutesDep
) -> DryRunResult:
    """Judge the saved route (or ``route``, an unsaved one: the path's route then needs not
    exist) against the webhook's ``last`` newest stored events: per event, matched or not and
    why, and for a route with a ``transform``, the request its transformation makes of each
    of the newest 20 matched events (or its error and logs). Nothing is delivered or
    recorded."""
    run = await routes.dry_run(principal.username, name, route, last=body.last, draft=body.route)
    events = [
        DryRunEvent(
            event_id=event.id,
            request_id=event.request_id,
            created_at=event.created_at,
            matched=verdict.matched,
            reason=verdict.reason,
            pointer=verdict.pointer,
            transform=_transformed(run, event.id),
            dedupe=_deduped(run, event, verdict.matched),
        )
        for event, verdict in run.results
    ]
    return DryRunResult(
        webhook=run.webhook.name, route=run.route, saved=run.saved, evaluated=len(events),
        matched=sum(e.matched for e in events), events=events,
    )  # fmt: skip


def _deduped(run: DryRun, event: Event, matched: bool) -> DryRunDedupe | None:
    if run.dedupe is None or not matched:
        return None
    return DryRunDedupe.of(run.dedupe, event)


def _transformed(run: DryRun, event_id: str) -> DryRunTransform | None:
    result = run.transformed.get(event_id)
    if result is None or run.transformation is None:
        return None
    returned = result.request if result.ok else None
    return DryRunTransform(
        transformation=run.transformation.name, version=run.transformation.version,
        request=RequestBody.of(returned) if returned is not None else None,
        logs=list(result.logs),
        error=TestError.of(result.error) if result.error is not None else None,
    )  # fmt: skip
