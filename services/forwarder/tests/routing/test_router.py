"""The router's decisions, with an in-memory configuration and a writer that keeps what it is
given: one delivery per enabled route, in order, filtered with the filter's reason, held for a
paused destination, failed for a destination gone; a task per delivery to deliver, keyed by the
destination's id. (End to end: services/dashboard-api/tests/test_routed_delivery.py.)"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from hookbay_common.clock import utcnow
from hookbay_common.models import (
    AttemptTrigger,
    Delivery,
    DeliveryStatus,
    Destination,
    DestinationState,
    StateReason,
    Webhook,
)
from hookbay_common.topics import Topics
from hookbay_common.wire import decode_delivery, decode_destination_task
from hookbay_forwarder.delivery.consumer import NOT_BEFORE_HEADER
from hookbay_forwarder.routing.router import NO_ROUTE, Router
from hookbay_forwarder.writes import Message
from tests.support.factories import create_destination, create_event, create_route, create_webhook

TOPICS = Topics("unit")


class Config:
    def __init__(self, webhook: Webhook | None, *destinations: Destination) -> None:
        self.hook = webhook
        self.destinations = {d.name: d for d in destinations}

    async def webhook(self, username: str, name: str) -> Webhook | None:
        return self.hook

    async def destination(self, username: str, name: str) -> Destination | None:
        return self.destinations.get(name)


class Written:
    def __init__(self) -> None:
        self.messages: list[Message] = []

    async def __call__(self, messages: Sequence[Message]) -> None:
        self.messages.extend(messages)

    def deliveries(self) -> list[Delivery]:
        return [decode_delivery(m.value) for m in self.messages if m.topic == TOPICS.attempts]

    def tasks(self) -> list[Message]:
        return [m for m in self.messages if m.topic == TOPICS.deliveries]


def setup(*routes: dict[str, object], paused: bool = False) -> tuple[Router, Written, Config]:
    billing = create_destination(name="billing", username="alice")
    if paused:
        billing = billing.model_copy(
            update={"state": DestinationState.PAUSED, "state_reason": StateReason.MANUAL}
        )
    analytics = create_destination(name="analytics", username="alice")
    hook = create_webhook(username="alice", name="orders",
                          routes=tuple(create_route(**r) for r in routes))  # fmt: skip
    config = Config(hook, billing, analytics)
    written = Written()
    return Router(config, written, TOPICS), written, config


class TestRouter:
    async def test_fan_out_in_route_order_with_a_filtered_route(self) -> None:
        router, written, config = setup(
            {"name": "a", "destination": "billing"},
            {"name": "b", "destination": "analytics", "filter": {"body": {"ok": False}}},
            {"name": "c", "destination": "analytics"},
            {"name": "off", "destination": "billing", "enabled": False},
        )
        event = create_event(routed=True)
        deliveries = await router.route(event)
        assert [(d.route, d.status) for d in deliveries] == [
            ("a", DeliveryStatus.SCHEDULED), ("b", DeliveryStatus.FILTERED),
            ("c", DeliveryStatus.SCHEDULED),
        ]  # fmt: skip
        assert deliveries[1].reason is not None
        assert "/body/ok" in deliveries[1].reason
        assert written.deliveries() == deliveries
        tasks = written.tasks()
        ids = [config.destinations["billing"].id, config.destinations["analytics"].id]
        assert [m.key for m in tasks] == [i.encode() for i in ids]
        first = decode_destination_task(tasks[0].value)
        assert (first.attempt, first.trigger, first.route) == (1, AttemptTrigger.INITIAL, "a")
        assert first.event == event
        assert first.delivery_id == deliveries[0].id

    async def test_the_same_event_routed_again_gives_the_same_deliveries(self) -> None:
        router, _, _ = setup({"name": "a", "destination": "billing"})
        event = create_event(routed=True)
        once = await router.route(event)
        again = await router.route(event)
        assert [d.id for d in once] == [d.id for d in again]
        replay = await router.route(event, trigger=AttemptTrigger.REPLAY, source_id="chn_x_y")
        assert replay[0].id != once[0].id

    async def test_a_paused_destination_holds_with_its_reason(self) -> None:
        router, written, _ = setup({"name": "a", "destination": "billing"}, paused=True)
        (delivery,) = await router.route(create_event(routed=True))
        assert (delivery.status, delivery.reason) == (DeliveryStatus.HELD, "paused: manual")
        assert len(written.tasks()) == 1  # held by the lane, never discarded

    async def test_a_missing_destination_fails_the_delivery(self) -> None:
        router, written, _ = setup({"name": "a", "destination": "deleted"})
        (delivery,) = await router.route(create_event(routed=True))
        assert delivery.status is DeliveryStatus.FAILED
        assert delivery.reason == "destination 'deleted' no longer exists"
        assert written.tasks() == []

    async def test_a_webhook_without_enabled_routes_settles_its_event(self) -> None:
        router, written, _ = setup({"name": "off", "destination": "billing", "enabled": False})
        (delivery,) = await router.route(create_event(routed=True))
        assert (delivery.route, delivery.status) == (NO_ROUTE, DeliveryStatus.FILTERED)
        assert written.tasks() == []

    async def test_query_and_headers_reach_the_filter(self) -> None:
        router, _, _ = setup({
            "name": "a", "destination": "billing",
            "filter": {"query": {"src": "a"}, "headers": {"x-kind": "order"}},
        })  # fmt: skip
        headers = {"content-type": "application/json", "x-kind": "order"}
        ok = create_event(routed=True, query="src=a&flag", request_headers=headers)
        no = create_event(routed=True, query="src=b", request_headers=headers)
        assert (await router.route(ok))[0].status is DeliveryStatus.SCHEDULED
        assert (await router.route(no))[0].status is DeliveryStatus.FILTERED


class TestDelayedRoute:
    async def test_its_first_task_waits_in_a_delay_tier_and_the_other_routes_do_not(
        self,
    ) -> None:
        router, written, config = setup(
            {"name": "later", "destination": "billing", "delay_s": 5400},
            {"name": "now", "destination": "analytics"},
        )
        event = create_event(routed=True)
        before = _ms(utcnow())
        later, now = await router.route(event)
        due = event.created_at + timedelta(seconds=5400)
        assert (later.status, later.at) == (DeliveryStatus.SCHEDULED, event.created_at)
        assert (
            later.reason == f"delayed by the route until {due.isoformat(timespec='milliseconds')}"
        )
        assert (now.status, now.reason) == (DeliveryStatus.SCHEDULED, None)
        assert written.deliveries() == [later, now]
        waiting, straight = [m for m in written.messages if m.topic != TOPICS.attempts]
        assert (waiting.topic, waiting.key) == (
            TOPICS.retry(3600.0), config.destinations["billing"].id.encode(),
        )  # fmt: skip
        ((name, value),) = waiting.headers or ()
        assert name == NOT_BEFORE_HEADER
        assert before + 3_600_000 <= int(value) <= _ms(utcnow()) + 3_600_000  # the tier's time
        task = decode_destination_task(waiting.value)
        assert (task.not_before, task.attempt, task.delivery_id) == (due, 1, later.id)
        assert straight.topic == TOPICS.deliveries
        assert decode_destination_task(straight.value).not_before == event.created_at

    async def test_a_paused_destination_is_scheduled_first_and_held_when_due(self) -> None:
        router, written, _ = setup(  # 90 s: still the 1 min tier once a millisecond has passed
            {"name": "later", "destination": "billing", "delay_s": 90}, paused=True
        )
        (delivery,) = await router.route(create_event(routed=True))
        assert delivery.status is DeliveryStatus.SCHEDULED
        assert [m.topic for m in written.messages if m.topic != TOPICS.attempts] == [
            TOPICS.retry(60.0)
        ]

    async def test_a_replay_waits_the_delay_again_from_its_own_time(self) -> None:
        router, written, _ = setup({"name": "later", "destination": "billing", "delay_s": 30})
        event = create_event(routed=True, created_at=utcnow() - timedelta(days=2))
        before = utcnow()
        (delivery,) = await router.route(event, trigger=AttemptTrigger.REPLAY, source_id="chn_x_y")
        assert delivery.status is DeliveryStatus.SCHEDULED
        assert delivery.at >= before  # the replay's routing time, not the event's
        (message,) = [m for m in written.messages if m.topic != TOPICS.attempts]
        task = decode_destination_task(message.value)
        assert task.trigger is AttemptTrigger.REPLAY
        assert task.not_before >= before + timedelta(seconds=30)
        assert message.topic == TOPICS.retry(10.0)

    async def test_a_delay_of_zero_is_no_delay(self) -> None:
        router, written, _ = setup({"name": "now", "destination": "billing", "delay_s": 0})
        (delivery,) = await router.route(create_event(routed=True))
        assert delivery.reason is None
        assert [m.topic for m in written.tasks()] == [TOPICS.deliveries]


def _ms(when: datetime) -> int:
    return int(when.timestamp() * 1000)
