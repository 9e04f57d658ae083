"""A destination's newest failed attempts against the real Mongo-wire server (FerretDB locally,
MongoDB in production)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from hookbay_common.clock import utcnow
from hookbay_common.db import (
    AttemptRepository,
    Collections,
    Database,
    DestinationFailureRepository,
    DestinationRepository,
)
from hookbay_common.db.destination_failures import RECENT_FAILURES, failures_key
from hookbay_common.models import Attempt, AttemptTrigger
from hookbay_common.secrets_box import SecretBox
from tests.support.factories import (
    TEST_SECRET_KEY,
    create_attempt,
    create_destination,
    create_event,
    unique_name,
)


def routed(username: str, destination: str, seconds: int, **fields: Any) -> Attempt:
    event = create_event(username=username)
    fields = {"status_code": 503, "destination": destination, "route": "main",
              "delivery_id": f"dlv_{event.id}", **fields}  # fmt: skip
    started = utcnow().replace(microsecond=0) + timedelta(seconds=seconds)
    return create_attempt(event, started_at=started, **fields)


async def stored_and_noted(db: Database, attempts: list[Attempt]) -> None:
    await AttemptRepository(db).upsert_many(attempts)
    await DestinationFailureRepository(db).note(attempts)


class TestDestinationFailures:
    async def test_the_newest_failures_newest_first_with_what_answered(self, db: Database) -> None:
        user = unique_name("u")
        attempts = [routed(user, "billing", n) for n in range(8)]
        attempts[6] = routed(user, "billing", 6, status_code=None, error="timed out")
        await stored_and_noted(db, attempts[:4])
        await stored_and_noted(db, attempts[4:])
        found = await DestinationFailureRepository(db).recent(user, "billing")
        newest = attempts[::-1][:RECENT_FAILURES]
        assert [f.attempt_id for f in found] == [a.id for a in newest]
        assert [f.event_id for f in found] == [a.event_id for a in newest]
        assert [(f.status_code, f.error) for f in found[:2]] == [(503, None), (None, "timed out")]
        assert found[0].at == attempts[7].started_at

    async def test_successes_listens_and_other_destinations_are_not_kept(
        self, db: Database
    ) -> None:
        user = unique_name("u")
        failure = routed(user, "billing", 0, status_code=404)
        others = [
            routed(user, "billing", 1, status_code=200),
            routed(user, "billing", 2, trigger=AttemptTrigger.LISTEN),
            routed(user, "shipping", 3),
            create_attempt(create_event(username=user), status_code=500),  # forward_url path
        ]
        await stored_and_noted(db, [failure, *others])
        found = await DestinationFailureRepository(db).recent(user, "billing")
        assert [(f.attempt_id, f.status_code) for f in found] == [(failure.id, 404)]

    async def test_a_batch_noted_again_and_a_second_writer_change_nothing_twice(
        self, db: Database
    ) -> None:
        """Two recorders (each remembering what it wrote last) keep one list between them."""
        user = unique_name("u")
        first, second = DestinationFailureRepository(db), DestinationFailureRepository(db)
        early = [routed(user, "billing", n) for n in range(3)]
        late = [routed(user, "billing", n) for n in range(3, 6)]
        await AttemptRepository(db).upsert_many(early + late)
        await first.note(early)
        await second.note(late)
        await first.note(early)  # consumed again after a crash: its view is stale
        found = await first.recent(user, "billing")
        assert [f.attempt_id for f in found] == [a.id for a in (early + late)[::-1][:5]]

    async def test_another_owner_and_an_earlier_destination_of_the_name_see_nothing(
        self, db: Database
    ) -> None:
        user, other = unique_name("u"), unique_name("u")
        await stored_and_noted(db, [routed(user, "billing", -60)])
        failures = DestinationFailureRepository(db)
        assert await failures.recent(other, "billing") == []
        assert await failures.recent(user, "billing", since=utcnow()) == []

    async def test_deleting_the_destination_forgets_them(self, db: Database) -> None:
        user = unique_name("u")
        destinations = DestinationRepository(db, SecretBox(TEST_SECRET_KEY))
        await destinations.create(create_destination(username=user, name="billing"))
        await stored_and_noted(db, [routed(user, "billing", 0)])
        await destinations.delete(user, "billing")
        found = await db[Collections.DESTINATION_FAILURES].find_one(
            {"_id": failures_key(user, "billing")}
        )
        assert found is None
