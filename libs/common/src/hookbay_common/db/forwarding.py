"""A webhook's ``forward_url`` as what it is shorthand for: one unfiltered route, named
``forward_url`` and first in the webhook's list, to a destination of its own named
``<webhook>.forward_url`` (``docs/decisions.md``, "forward_url is a route").

Both names use characters an owner's names cannot hold (``_`` and ``.``), so they never meet an
owner's own route or destination. The webhook's ``forward_url`` field stays the one place its
URL is set; the destination's other controls (rate, concurrency, pause, headers, retries) are
the owner's to change like any destination's. ``keep_forward_route`` is the one writer: the
dashboard calls it when ``forward_url`` changes and ``hookbay-admin migrate`` for webhooks
stored before forward_url was a route. Publishing the result is the caller's."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from hookbay_common.clock import utcnow
from hookbay_common.db.destinations import DestinationRepository
from hookbay_common.db.webhooks import WebhookRepository
from hookbay_common.errors import ConcurrentChange, DestinationAlreadyExists
from hookbay_common.ids import IdPrefix, new_id
from hookbay_common.models import Destination, Route, Webhook

FORWARD_ROUTE: Final = "forward_url"
"""The route a ``forward_url`` stands for."""
FORWARD_SUFFIX: Final = ".forward_url"
WRITE_ATTEMPTS: Final = 5


def forward_destination(webhook_name: str) -> str:
    """The name of the destination webhook ``webhook_name``'s ``forward_url`` delivers to."""
    return f"{webhook_name}{FORWARD_SUFFIX}"


def forward_webhook(destination_name: str) -> str | None:
    """The webhook whose ``forward_url`` destination ``destination_name`` is, else ``None``."""
    if destination_name.endswith(FORWARD_SUFFIX):
        return destination_name.removesuffix(FORWARD_SUFFIX)
    return None


def in_step(webhook: Webhook) -> bool:
    """Whether the webhook's routes say what its ``forward_url`` says: a route named
    ``forward_url`` exactly when it has one (its destination's URL is checked by the writer).
    Where it stands is the owner's: it is put first when made, and other routes may be moved
    above it."""
    forward = webhook.route(FORWARD_ROUTE)
    if webhook.forward_url is None:
        return forward is None
    return forward is not None and _in_step_route(forward, forward_destination(webhook.name))


@dataclass(frozen=True)
class ForwardChange:
    """What ``keep_forward_route`` wrote, for the caller to publish."""

    webhook: Webhook
    destination: Destination | None
    """The destination created or changed; ``None`` when none was."""
    deleted: str | None
    """The name of the destination deleted; ``None`` when none was."""
    changed: bool


async def keep_forward_route(
    webhooks: WebhookRepository,
    destinations: DestinationRepository,
    webhook: Webhook,
    forward_url: str | None,
) -> ForwardChange:
    """Make ``webhook``'s ``forward_url`` ``forward_url`` (checked by the caller) and its
    route and destination follow: the destination is created or its URL set first, then the
    webhook's ``forward_url`` and routes are written together (only if the webhook is still
    as read; read again and apply when another write came between), and a destination no
    longer needed is deleted last. Idempotent; a run stopped half-way is finished by the next
    (the dashboard's next change, or ``hookbay-admin migrate``)."""
    name = forward_destination(webhook.name)
    destination: Destination | None = None
    if forward_url is not None:
        destination = await _destination_at(destinations, webhook, name, forward_url)
    for _ in range(WRITE_ATTEMPTS):
        if webhook.forward_url == forward_url and in_step(webhook):
            written: Webhook | None = webhook
            break
        written = await webhooks.replace_routes(
            webhook, _routes(webhook, forward_url, name), forward_url=forward_url
        )
        if written is not None:
            break
        webhook = await webhooks.require(webhook.username, webhook.name)
    else:
        raise ConcurrentChange(
            f"webhook {webhook.name!r} kept changing while its forward_url was written; send again"
        )
    assert written is not None
    changed = written is not webhook or destination is not None
    deleted = None
    if forward_url is None and await destinations.get(webhook.username, name) is not None:
        await destinations.delete(webhook.username, name)
        deleted, changed = name, True
    return ForwardChange(written, destination, deleted, changed)


async def _destination_at(
    destinations: DestinationRepository, webhook: Webhook, name: str, url: str
) -> Destination | None:
    """The forward destination with URL ``url``, created when missing; ``None`` when it was
    already so (nothing to publish)."""
    current = await destinations.get(webhook.username, name)
    if current is not None:
        if current.url == url:
            return None
        return await destinations.update(webhook.username, name, {"url": url})
    now = utcnow()
    made = Destination(
        id=new_id(IdPrefix.DESTINATION), username=webhook.username, name=name, url=url,
        created_at=now, updated_at=now,
    )  # fmt: skip
    try:
        return await destinations.create(made)
    except DestinationAlreadyExists:  # another writer made it a moment ago
        return await destinations.update(webhook.username, name, {"url": url})


def _routes(webhook: Webhook, forward_url: str | None, name: str) -> list[Route]:
    """The webhook's routes with the forward route (made first; one already there keeps its
    place and its id, so the ids of deliveries made over it stay), or without it."""
    if forward_url is None:
        return [route for route in webhook.routes if route.name != FORWARD_ROUTE]
    current = webhook.route(FORWARD_ROUTE)
    now = utcnow()
    if current is None:
        made = Route(
            id=new_id(IdPrefix.ROUTE), name=FORWARD_ROUTE, destination=name,
            created_at=now, updated_at=now,
        )  # fmt: skip
        return [made, *webhook.routes]
    fixed = current.model_copy(
        update={"destination": name, "enabled": True, "filter": None, "updated_at": now}
    )
    return [fixed if route is current else route for route in webhook.routes]


def _in_step_route(route: Route, destination: str) -> bool:
    return route.enabled and route.filter is None and route.destination == destination


async def route_forward_urls(
    webhooks: WebhookRepository, destinations: DestinationRepository
) -> int:
    """Give every stored webhook's ``forward_url`` its route and destination (the upgrade of
    webhooks stored before ``forward_url`` was a route, and the end of any write stopped
    half-way); how many webhooks changed. Idempotent."""
    changed = 0
    for webhook in await webhooks.list_all():
        if webhook.forward_url is None and webhook.route(FORWARD_ROUTE) is None:
            continue
        change = await keep_forward_route(webhooks, destinations, webhook, webhook.forward_url)
        changed += change.changed
    return changed
