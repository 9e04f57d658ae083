"""Bodies of ``/webhooks/{name}/routes``: a webhook's ordered routes and their dry run."""

from __future__ import annotations

from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field, field_validator

from hookbay_common.models import ROUTE_DELAY_MAX, Event, Route
from hookbay_common.names import WEBHOOK_NAME_MAX
from hookbay_common.routing.dedupe import DedupeRule, dedupe_key, field_value, key_part
from hookbay_common.routing.subject import event_subject
from hookbay_dashboard.schemas import Timestamp
from hookbay_dashboard.transformations.schemas import RequestBody, TestError

DRY_RUN_DEFAULT: Final = 50
DRY_RUN_MAX: Final = 100
DRY_RUN_TRANSFORM_MAX: Final = 20
"""Matched events of one dry run whose transformation runs (each up to 1 s of CPU in the
dashboard's two-worker sandbox); the rest show their verdict only."""

_FILTER_DOC = (
    'Which events the route takes: {"body": …, "headers": …, "query": …}, each optional, '
    "in the filter syntax of docs/owners/filters.md; null: every event. A filter the engine "
    "refuses is a 422 naming its JSON pointer."
)
_TRANSFORM_DOC = (
    "The name of one of your transformations, run on each delivery before it is sent "
    "(docs/owners/transformations.md); null: none. A name you have no transformation of is a "
    "422 naming transform."
)
_DELAY_DOC = (
    f"Seconds (0..{ROUTE_DELAY_MAX}, 24 h) to wait after an event arrived before its delivery "
    "over this route starts; the other routes deliver at once (docs/owners/routes.md#delay). "
    "null or 0: no delay. Out of range: a 422 naming delay_s."
)
_DEDUPE_DOC = (
    'Deliver only the first event with a given key within a window: {"window_s": 1..604800, '
    '"preset": "github"|"stripe"|"standard-webhooks"|"shopify"} or {"window_s": …, "fields": '
    '["body.id", "headers.x-request-id", …]} (docs/owners/routes.md, "Deduplication"); null: '
    "none. A refused rule is a 422 naming its field."
)


class _RouteRules(BaseModel):
    model_config = ConfigDict(extra="forbid")

    filter: dict[str, Any] | None = Field(default=None, description=_FILTER_DOC)
    transform: str | None = Field(
        default=None, min_length=1, max_length=WEBHOOK_NAME_MAX, description=_TRANSFORM_DOC
    )
    dedupe: DedupeRule | None = Field(default=None, description=_DEDUPE_DOC)
    delay_s: int | None = Field(default=None, ge=0, le=ROUTE_DELAY_MAX, description=_DELAY_DOC)


class RouteCreate(_RouteRules):
    name: str = Field(
        min_length=1, max_length=WEBHOOK_NAME_MAX,
        description="Lowercase words of a-z and 0-9 joined by single hyphens; unique per webhook.",
    )  # fmt: skip
    destination: str = Field(
        min_length=1, max_length=WEBHOOK_NAME_MAX, description="One of your destinations' names."
    )
    enabled: bool = Field(default=True, description="false: the route takes no event.")
    position: int | None = Field(
        default=None, ge=0,
        description="Where in the webhook's order (0: first); omitted: last.",
    )  # fmt: skip


class RouteUpdate(_RouteRules):
    """Only the fields sent change: ``"filter": null`` removes the filter, ``"transform":
    null`` the transformation, ``"delay_s": null`` the delay, ``position`` moves
    the route (0: first). ``destination`` and ``enabled`` cannot be null; the name stays."""

    destination: str | None = Field(default=None, min_length=1, max_length=WEBHOOK_NAME_MAX)
    enabled: bool | None = None
    position: int | None = Field(default=None, ge=0)

    @field_validator("destination", "enabled", "position")
    @classmethod
    def _not_null(cls, value: Any) -> Any:
        if value is None:
            raise ValueError("may not be null")
        return value


class RouteDraft(_RouteRules):
    """An unsaved route to try: its filter and ``enabled`` decide; its ``transform`` (one of
    your transformations) runs on each matched event; its destination, if given, is not
    looked up."""

    name: str | None = Field(default=None, max_length=WEBHOOK_NAME_MAX)
    destination: str | None = Field(default=None, max_length=WEBHOOK_NAME_MAX)
    enabled: bool = True


class RouteRead(BaseModel):
    id: str
    name: str
    webhook: str
    position: int = Field(description="Place in the webhook's order, 0 first.")
    destination: str
    enabled: bool
    filter: dict[str, Any] | None
    transform: str | None = Field(description="The transformation the route runs, or null.")
    dedupe: DedupeRule | None = Field(
        default=None, description="The route's deduplication rule, or null."
    )
    delay_s: int | None = Field(description="Seconds its deliveries wait first, or null.")
    created_at: Timestamp
    updated_at: Timestamp

    @classmethod
    def of(cls, route: Route, webhook: str, position: int) -> RouteRead:
        return cls(
            id=route.id, name=route.name, webhook=webhook, position=position,
            destination=route.destination, enabled=route.enabled, filter=route.filter,
            transform=route.transform, dedupe=route.dedupe, delay_s=route.delay_s,
            created_at=route.created_at, updated_at=route.updated_at,
        )  # fmt: skip

    def view(self) -> dict[str, Any]:
        return self.model_dump(mode="python")


class DryRunRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    last: int = Field(
        default=DRY_RUN_DEFAULT, ge=1, le=DRY_RUN_MAX,
        description="How many of the webhook's newest stored events to try.",
    )  # fmt: skip
    route: RouteDraft | None = Field(
        default=None, description="An unsaved route to try instead of the saved one."
    )


class DryRunTransform(BaseModel):
    """What the route's transformation made of one matched event, as its delivery would
    send it (nothing is sent)."""

    transformation: str
    version: int
    request: RequestBody | None = Field(
        description="The request the destination would receive; null when the code failed."
    )
    logs: list[str] = Field(description="What the code printed (100 lines, 8 KiB at most).")
    error: TestError | None = Field(
        description="Why the code failed (its kind, message, line and column); null when it "
        "returned a request. The delivery would be transform_failed."
    )


class DryRunDedupe(BaseModel):
    """The route's deduplication key for one matched event (nothing is claimed)."""

    key: str | None = Field(
        description="The key (SHA-256 hex of the fields' values); null: no key, the event "
        "would be delivered without deduplication."
    )
    fields: dict[str, Any] = Field(
        description="The rule's fields found in the event, with their values, in order."
    )
    missing: list[str] = Field(
        description="The rule's fields that give no value (missing, null, empty, an object or "
        "an array): any of them means no key."
    )

    @classmethod
    def of(cls, rule: DedupeRule, event: Event) -> DryRunDedupe:
        subject = event_subject(event)
        found: dict[str, Any] = {}
        missing: list[str] = []
        for path in rule.paths:
            part = key_part(field_value(subject, path))
            if part is None:
                missing.append(path)
            else:
                found[path] = part
        return cls(key=dedupe_key(rule, subject), fields=found, missing=missing)


class DryRunEvent(BaseModel):
    event_id: str
    request_id: str
    created_at: Timestamp
    matched: bool
    reason: str | None = Field(description="Why it did not match (null when it matched).")
    pointer: str | None = Field(
        default=None,
        description="The failing condition's place in the filter (JSON pointer), when a "
        "filter condition failed.",
    )
    transform: DryRunTransform | None = Field(
        default=None,
        description="The route's transformation run on the event (a matched event of a route "
        "with a transform only; the newest 20 such events).",
    )
    dedupe: DryRunDedupe | None = Field(
        default=None,
        description="The deduplication key the event would claim (a matched event of a route "
        "with a dedupe rule only). Whether it would be a duplicate is not known: the dry run "
        "claims nothing.",
    )


class DryRunResult(BaseModel):
    webhook: str
    route: str | None = Field(description="The route tried (null: an unsaved one, unnamed).")
    saved: bool = Field(description="true: the saved route; false: the one sent.")
    evaluated: int
    matched: int
    events: list[DryRunEvent] = Field(description="Newest first. Nothing is delivered.")
