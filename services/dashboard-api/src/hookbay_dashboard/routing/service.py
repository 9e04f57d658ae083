"""A webhook's routes: where its events go, in order, and a dry run of a route over the
webhook's newest stored events.

Routes live in their webhook's document, so every change rewrites the webhook's route list
and publishes the webhook (routes included) to the configuration change log: each ingest
replica knows the routes in force when an event arrives. A change reads the webhook and
writes the new list only if the webhook is still as read (``WebhookRepository.replace_routes``),
trying again up to ``WRITE_ATTEMPTS`` times when another write came between."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from hookbay_common.clock import utcnow
from hookbay_common.configlog import ConfigPublisher
from hookbay_common.db import (
    DestinationRepository,
    EventRepository,
    TransformationRepository,
    WebhookRepository,
)
from hookbay_common.db.forwarding import FORWARD_ROUTE, forward_webhook
from hookbay_common.errors import (
    ConcurrentChange,
    ForwardUrlManaged,
    InvalidField,
    RouteAlreadyExists,
    RouteLimitReached,
    RouteNotFound,
)
from hookbay_common.httperrors import InvalidRequest
from hookbay_common.ids import IdPrefix, new_id
from hookbay_common.models import Event, Route, Transformation, Webhook
from hookbay_common.routing.dedupe import DedupeRule
from hookbay_common.routing.filters import MATCHED, FilterError, Verdict, compile_filter
from hookbay_common.routing.subject import event_subject
from hookbay_dashboard.destinations.service import check_resource_name
from hookbay_dashboard.routing.schemas import (
    DRY_RUN_TRANSFORM_MAX,
    RouteCreate,
    RouteDraft,
    RouteUpdate,
)
from hookbay_dashboard.transformations.sandbox import Sandbox
from hookbay_sandbox import TransformResult, request_of_event

MAX_ROUTES: Final = 20
"""Routes per webhook."""
MAX_FILTER_BYTES: Final = 16 * 1024
"""A filter's size as JSON text: twenty of them keep a webhook's record far below Kafka's
message limit."""
WRITE_ATTEMPTS: Final = 5


class FilterRefused(InvalidRequest):
    """A filter the engine refuses, as a 422 whose ``detail`` names the JSON pointer."""

    status_code = 422

    def __init__(self, exc: FilterError, loc: tuple[str, ...]) -> None:
        super().__init__(str(exc), detail=[exc.to_detail(("body", *loc))])


@dataclass(frozen=True)
class DryRun:
    """``transformed``: by event id, what the route's transformation made of the matched
    events it ran on."""

    webhook: Webhook
    route: str | None
    saved: bool
    results: list[tuple[Event, Verdict]]
    transformation: Transformation | None = None
    transformed: dict[str, TransformResult] = field(default_factory=dict)
    dedupe: DedupeRule | None = None
    """The route's deduplication rule: the dry run shows each matched event's key."""


def checked_filter(spec: dict[str, Any] | None, loc: tuple[str, ...] = ("filter",)) -> None:
    """A 422 naming where ``spec`` is refused: by the engine (``FilterRefused``, with the JSON
    pointer) or for its size (``InvalidField``)."""
    evaluator(spec, loc)


def evaluator(
    spec: dict[str, Any] | None, loc: tuple[str, ...] = ("filter",)
) -> Callable[[Event], Verdict]:
    """How a route with filter ``spec`` judges a stored event (refusals as in
    ``checked_filter``)."""
    if spec is not None and len(json.dumps(spec)) > MAX_FILTER_BYTES:
        raise InvalidField(loc, f"a filter may hold at most {MAX_FILTER_BYTES} bytes of JSON")
    try:
        compiled = compile_filter(spec)
    except FilterError as exc:
        raise FilterRefused(exc, loc) from None
    if compiled is None:
        return lambda _event: MATCHED

    def judge(event: Event) -> Verdict:
        return compiled.evaluate(event_subject(event))

    return judge


class RouteService:
    def __init__(
        self,
        webhooks: WebhookRepository,
        destinations: DestinationRepository,
        events: EventRepository,
        transformations: TransformationRepository,
        *,
        publisher: ConfigPublisher | None = None,
        sandbox: Sandbox | None = None,
    ) -> None:
        """``sandbox`` runs a dry run's transformation; without one (the operator's CLI) a dry
        run shows the filter's verdicts only."""
        self._webhooks = webhooks
        self._destinations = destinations
        self._events = events
        self._transformations = transformations
        self._publisher = publisher
        self._sandbox = sandbox

    async def webhook(self, username: str, webhook_name: str) -> Webhook:
        """The webhook, whose ``routes`` are in order (another owner's: ``WebhookNotFound``)."""
        return await self._webhooks.require(username, webhook_name)

    async def get(self, username: str, webhook_name: str, name: str) -> tuple[Webhook, int]:
        """The webhook and the route's position in it."""
        webhook = await self._webhooks.require(username, webhook_name)
        return webhook, _position(webhook, name)

    async def create(
        self, username: str, webhook_name: str, write: RouteCreate
    ) -> tuple[Webhook, int]:
        """Add a route; another owner's webhook is a 404 before the fields are looked at."""
        await self._webhooks.require(username, webhook_name)
        check_resource_name(write.name)
        await self._check_destination(username, write.destination)
        checked_filter(write.filter)
        if write.transform is not None:
            await self._check_transformation(username, write.transform)

        def add(webhook: Webhook) -> list[Route]:
            routes = list(webhook.routes)
            if webhook.route(write.name) is not None:
                raise RouteAlreadyExists(webhook_name, write.name)
            if len(routes) >= MAX_ROUTES:
                raise RouteLimitReached(webhook_name, MAX_ROUTES)
            position = len(routes) if write.position is None else write.position
            if position > len(routes):
                raise InvalidField(("position",), f"at most {len(routes)} (the end of the list)")
            now = utcnow()
            route = Route(
                id=new_id(IdPrefix.ROUTE), name=write.name, destination=write.destination,
                enabled=write.enabled, filter=write.filter, transform=write.transform,
                dedupe=write.dedupe, delay_s=write.delay_s or None, created_at=now,
                updated_at=now,
            )  # fmt: skip
            routes.insert(position, route)
            return routes

        webhook = await self._rewrite(username, webhook_name, add)
        return webhook, _position(webhook, write.name)

    async def change(
        self, username: str, webhook_name: str, name: str, write: RouteUpdate
    ) -> tuple[Webhook, int]:
        """Change the fields sent; nothing sent reads the route. The route ``forward_url``
        is its webhook's ``forward_url``'s: only its ``position`` moves (``ForwardUrlManaged``)."""
        await self.get(username, webhook_name, name)  # 404s before the fields
        sent = write.model_fields_set & {
            "destination", "enabled", "filter", "transform", "position", "dedupe", "delay_s",
        }  # fmt: skip
        if name == FORWARD_ROUTE and sent - {"position"}:
            raise ForwardUrlManaged(webhook_name, f"route {name!r}")
        if "destination" in sent and write.destination is not None:
            await self._check_destination(username, write.destination)
        if "filter" in sent:
            checked_filter(write.filter)
        if "transform" in sent and write.transform is not None:
            await self._check_transformation(username, write.transform)
        if not sent:
            return await self.get(username, webhook_name, name)

        def edit(webhook: Webhook) -> list[Route]:
            routes = list(webhook.routes)
            index = _position(webhook, name)
            route = routes.pop(index)
            fields = {f: getattr(write, f) for f in sent - {"position"}}
            if "delay_s" in fields:
                fields["delay_s"] = fields["delay_s"] or None  # 0: no delay, stored as none
            routes_at = index
            if write.position is not None:
                if write.position > len(routes):
                    raise InvalidField(("position",), f"at most {len(routes)} (the last place)")
                routes_at = write.position
            routes.insert(routes_at, route.model_copy(update={**fields, "updated_at": utcnow()}))
            return routes

        webhook = await self._rewrite(username, webhook_name, edit)
        return webhook, _position(webhook, name)

    async def delete(self, username: str, webhook_name: str, name: str) -> None:
        if name == FORWARD_ROUTE:
            await self.get(username, webhook_name, name)  # 404s first
            raise ForwardUrlManaged(webhook_name, f"route {name!r}")

        def remove(webhook: Webhook) -> list[Route]:
            index = _position(webhook, name)
            return [r for i, r in enumerate(webhook.routes) if i != index]

        await self._rewrite(username, webhook_name, remove)

    async def dry_run(
        self, username: str, webhook_name: str, name: str, *, last: int,
        draft: RouteDraft | None = None,
    ) -> DryRun:  # fmt: skip
        """The route ``name`` (or ``draft``, unsaved) judged against the webhook's ``last``
        newest stored events, newest first; nothing is delivered or recorded. A route with a
        ``transform`` runs it (with the sandbox, when there is one) on the newest
        ``DRY_RUN_TRANSFORM_MAX`` matched events, as their deliveries would."""
        webhook = await self._webhooks.require(username, webhook_name)
        if draft is None:
            route = webhook.routes[_position(webhook, name)]
            spec, enabled, label = route.filter, route.enabled, route.name
            transform, dedupe = route.transform, route.dedupe
        else:
            spec, enabled, label = draft.filter, draft.enabled, draft.name or name
            transform, dedupe = draft.transform, draft.dedupe
        judge = evaluator(spec, ("filter",) if draft is None else ("route", "filter"))
        transformation = None
        if transform is not None:
            loc = ("transform",) if draft is None else ("route", "transform")
            transformation = await self._check_transformation(username, transform, loc)
        results = []
        for event in await self._events.newest_events(webhook.id, last):
            results.append((event, _dry_verdict(event, enabled, judge)))
        run = DryRun(webhook, label, draft is None, results, transformation, dedupe=dedupe)
        if transformation is not None and self._sandbox is not None:
            matched = [event for event, verdict in results if verdict.matched]
            env = {k: v.get_secret_value() for k, v in transformation.env.items()}
            for event in matched[:DRY_RUN_TRANSFORM_MAX]:
                run.transformed[event.id] = await self._sandbox.run(
                    username, transformation.code, request_of_event(event), env
                )
        return run

    async def _check_transformation(
        self, username: str, name: str, loc: tuple[str, ...] = ("transform",)
    ) -> Transformation:
        """One of the owner's transformations (another owner's is unknown, as a missing one):
        else a 422 naming ``transform``."""
        found = await self._transformations.get(username, name)
        if found is None:
            raise InvalidField(
                loc, f"you have no transformation named {name!r}", "transformation_missing"
            )
        return found

    async def _check_destination(self, username: str, name: str) -> None:
        """An owner's destination, and not a ``forward_url``'s (its route is the only one)."""
        if await self._destinations.get(username, name) is None:
            raise InvalidField(
                ("destination",), f"you have no destination named {name!r}", "destination_missing"
            )
        if (webhook := forward_webhook(name)) is not None:
            raise InvalidField(
                ("destination",),
                f"{name!r} is webhook {webhook!r}'s forward_url: only its route delivers to it",
                "destination_forward_url",
            )

    async def _rewrite(
        self, username: str, webhook_name: str, change: Callable[[Webhook], list[Route]]
    ) -> Webhook:
        """Apply ``change`` to the webhook's routes as stored, write them if nothing changed
        the webhook meanwhile (else read and apply again), publish the webhook."""
        for _ in range(WRITE_ATTEMPTS):
            webhook = await self._webhooks.require(username, webhook_name)
            written = await self._webhooks.replace_routes(webhook, change(webhook))
            if written is not None:
                if self._publisher is not None:
                    await self._publisher.webhook_changed(written)
                return written
        raise ConcurrentChange(
            f"webhook {webhook_name!r} kept changing while its routes were written; send again"
        )


def _position(webhook: Webhook, name: str) -> int:
    for index, route in enumerate(webhook.routes):
        if route.name == name:
            return index
    raise RouteNotFound(webhook.name, name)


def _dry_verdict(event: Event, enabled: bool, judge: Callable[[Event], Verdict]) -> Verdict:
    """What routing would decide: events refused at intake or answered as handshakes are never
    routed; a disabled route takes nothing; else the filter decides."""
    if event.rejected_reason is not None:
        return Verdict(
            False, f"the event was rejected ({event.rejected_reason.value}): never routed"
        )
    if event.handshake is not None:
        return Verdict(False, "the event is a sender's handshake: never routed")
    if not enabled:
        return Verdict(False, "the route is disabled")
    return judge(event)
