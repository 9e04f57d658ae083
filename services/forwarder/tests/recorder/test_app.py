"""The recorder on real Kafka and FerretDB: events and attempts land in MongoDB, statuses follow."""

from __future__ import annotations

import math

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.structs import TopicPartition

from hookbay_common.db import AttemptRepository, Database, EventRepository
from hookbay_common.ids import IdPrefix, derived_id
from hookbay_common.models import (
    Attempt,
    Delivery,
    DeliveryStatus,
    Event,
    EventStatus,
    RejectedReason,
)
from hookbay_common.settings import Settings
from hookbay_common.wire import encode_attempt, encode_delivery, encode_event
from hookbay_forwarder.recorder import Recorder
from hookbay_forwarder.recorder.hold import EventHold
from hookbay_forwarder.settings import ForwarderSettings
from tests.support.factories import create_attempt, create_delivery, create_event, unique_name
from tests.support.forwarder import forwarder_namespace, running
from tests.support.waiting import until


async def stored(db: Database, event: Event, status: EventStatus) -> Event:
    """The event once MongoDB holds it with ``status``."""
    events = EventRepository(db)

    async def recorded() -> bool:
        found = await events.get(event.id)
        return found is not None and found.status is status

    await until(recorded, 20, what=f"event {event.id} {status}")
    found = await events.get(event.id)
    assert found is not None
    return found


async def produce(
    producer: AIOKafkaProducer, fs: ForwarderSettings, *records: Event | Attempt | Delivery
) -> None:
    for record in records:
        if isinstance(record, Event):
            await producer.send_and_wait(
                fs.topics.events, encode_event(record), key=record.username.encode()
            )
        elif isinstance(record, Delivery):
            await producer.send_and_wait(
                fs.topics.attempts, encode_delivery(record), key=record.event_id.encode()
            )
        else:
            await producer.send_and_wait(
                fs.topics.attempts, encode_attempt(record), key=record.event_id.encode()
            )


@pytest.mark.usefixtures("recorder")
class TestRecorder:
    async def test_event_without_destination_is_a_success_with_no_attempts(
        self, db: Database, producer: AIOKafkaProducer, rec_settings: ForwarderSettings
    ) -> None:
        event = create_event(username=unique_name("u"), forward_url=None, body=b"\xff\x00 binary")
        await produce(producer, rec_settings, event)
        found = await stored(db, event, EventStatus.SUCCESS)
        assert found == event.model_copy(update={"status": EventStatus.SUCCESS})
        assert await AttemptRepository(db).list_for_event(event.id) == []

    async def test_rejected_event_is_failed(
        self, db: Database, producer: AIOKafkaProducer, rec_settings: ForwarderSettings
    ) -> None:
        event = create_event(
            username=unique_name("u"), signature_valid=False, status=EventStatus.FAILED,
            rejected_reason=RejectedReason.INVALID_SIGNATURE,
        )  # fmt: skip
        await produce(producer, rec_settings, event)
        found = await stored(db, event, EventStatus.FAILED)
        assert found.rejected_reason is RejectedReason.INVALID_SIGNATURE

    async def test_status_follows_the_attempts(
        self, db: Database, producer: AIOKafkaProducer, rec_settings: ForwarderSettings
    ) -> None:
        event = create_event(username=unique_name("u"))
        chain = derived_id(IdPrefix.CHAIN, event.id)
        first = create_attempt(event, chain_id=chain, status_code=503, will_retry=True)
        second = create_attempt(event, chain_id=chain, number=2, status_code=201)
        await produce(producer, rec_settings, event)
        await stored(db, event, EventStatus.PENDING)
        await produce(producer, rec_settings, first)
        await produce(producer, rec_settings, second, first)  # a stale repeat changes nothing
        await stored(db, event, EventStatus.SUCCESS)
        assert [a.id for a in await AttemptRepository(db).list_for_event(event.id)] == [
            first.id,
            second.id,
        ]

    async def test_attempt_before_its_event(
        self, db: Database, producer: AIOKafkaProducer, rec_settings: ForwarderSettings
    ) -> None:
        event = create_event(username=unique_name("u"))
        await produce(producer, rec_settings, create_attempt(event, status_code=400))
        await produce(producer, rec_settings, event)
        found = await stored(db, event, EventStatus.FAILED)
        assert found.body == event.body

    async def test_status_follows_the_deliveries(
        self, db: Database, producer: AIOKafkaProducer, rec_settings: ForwarderSettings
    ) -> None:
        """Delivery records on the attempts topic, with an attempt of one of them: stored in
        the event's head, the event's status derived from them."""
        event = create_event(username=unique_name("u"), forward_url=None)
        billing = create_delivery(event, route="billing", status=DeliveryStatus.DELIVERING)
        ignored = create_delivery(
            event, route="audit", status=DeliveryStatus.FILTERED, reason="/body/type: $eq"
        )
        await produce(producer, rec_settings, event, billing, ignored)
        await stored(db, event, EventStatus.PENDING)
        attempt = create_attempt(
            event, delivery_id=billing.id, route="billing", destination="billing-api",
            status_code=200, started_at=billing.at,
        )  # fmt: skip
        await produce(producer, rec_settings, attempt, billing)  # a late repeat changes nothing
        await stored(db, event, EventStatus.SUCCESS)
        found = await EventRepository(db).get_with_deliveries(event.id)
        assert found is not None
        assert {d.route: d.status for d in found[1]} == {
            "audit": DeliveryStatus.FILTERED,
            "billing": DeliveryStatus.SUCCESS,
        }

    async def test_unreadable_record_is_skipped(
        self, db: Database, producer: AIOKafkaProducer, rec_settings: ForwarderSettings
    ) -> None:
        await producer.send_and_wait(rec_settings.topics.events, b"garbage", key=b"u")
        event = create_event(username=unique_name("u"))
        await produce(producer, rec_settings, event)
        await stored(db, event, EventStatus.PENDING)


class TestHeldEvents:
    async def test_an_event_is_stored_with_its_attempt_and_committed_only_then(
        self, settings: Settings, db: Database, producer: AIOKafkaProducer
    ) -> None:
        """A deliverable event is kept back until its attempt is read (with no time limit here):
        an event behind it on its partition is stored, the held one is not, and the offsets
        are committed up to it, not past it; once its attempt comes, it is stored with the
        attempt's status and committed."""
        fs = await forwarder_namespace(settings)
        username = unique_name("u")
        held = create_event(username=username)
        behind = create_event(username=username, forward_url=None)  # nothing to deliver
        process = Recorder(fs)
        process.loop.hold = EventHold(math.inf)
        async with running(process):
            at = await producer.send_and_wait(
                fs.topics.events, encode_event(held), key=username.encode()
            )
            await produce(producer, fs, behind)
            await stored(db, behind, EventStatus.SUCCESS)
            assert await EventRepository(db).get(held.id) is None
            partition = TopicPartition(at.topic, at.partition)
            await until(
                lambda: process.loop.committed.get(partition) == at.offset,
                what="the commit up to the held event",
            )
            await produce(producer, fs, create_attempt(held, status_code=201))
            await stored(db, held, EventStatus.SUCCESS)
            await until(
                lambda: process.loop.committed.get(partition) == at.offset + 2,
                what="the commit past both events",
            )
