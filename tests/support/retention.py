"""Retention tests' world: a database of their own (a run prunes every owner of its database, so
it must not meet other tests' data), owners with events of given ages, and a stand-in
Pushgateway that keeps what is pushed to it."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from pymongo import AsyncMongoClient, MongoClient

from hookbay_common.db import AttemptRepository, EventRepository, LockRepository, UserRepository
from hookbay_common.db import client as db_client
from hookbay_common.db.client import Collections, Database
from hookbay_common.models import Attempt, Event
from tests.support.factories import create_attempt, create_event, create_user, unique_name

EMPTIED = (
    Collections.USERS, Collections.WEBHOOKS, Collections.EVENTS, Collections.ATTEMPTS,
    Collections.SESSIONS, Collections.LOCKS,
)  # fmt: skip


@pytest.fixture(scope="session")
def retention_url(mongo_url: str) -> Iterator[str]:
    """A database for retention tests only, dropped after the session."""
    url = f"{mongo_url}_ret"
    yield url
    server, _, name = url.rpartition("/")
    with MongoClient[dict[str, Any]](server, serverSelectionTimeoutMS=5000) as client:
        client.drop_database(name)


@pytest.fixture(scope="session")
async def retention_db_session(retention_url: str) -> AsyncIterator[Database]:
    mongo: AsyncMongoClient[dict[str, Any]] = db_client.connect(retention_url)
    database = db_client.database(mongo)
    await db_client.migrate(database)
    await LockRepository(database).ensure_collection()
    yield database
    await mongo.close()


@pytest.fixture
async def rdb(retention_db_session: Database) -> Database:
    """The retention database, emptied: each test sees its own owners only."""
    for name in EMPTIED:
        await retention_db_session[name].delete_many({})
    return retention_db_session


@pytest.fixture
def retention_env(env: dict[str, str], retention_url: str) -> dict[str, str]:
    return {**env, "HOOKBAY_MONGO_URL": retention_url}


@dataclass
class Owner:
    """A user with events of chosen ages, each with ``attempts_each`` attempts."""

    username: str
    plan: str
    events: list[Event] = field(default_factory=list)
    attempts: list[Attempt] = field(default_factory=list)

    def ids(self) -> set[str]:
        return {e.id for e in self.events}

    def attempt_ids(self, event_ids: set[str] | None = None) -> set[str]:
        return {a.id for a in self.attempts if event_ids is None or a.event_id in event_ids}


async def create_owner(
    db: Database, plan: str, created: list[datetime], *, attempts_each: int = 1
) -> Owner:
    username = unique_name("u")
    await UserRepository(db).create(create_user(username=username, plan=plan))
    owner = Owner(username, plan)
    webhook_id = unique_name("wh_")
    owner.events = [
        create_event(username=username, webhook_id=webhook_id, created_at=at) for at in created
    ]
    owner.attempts = [
        create_attempt(event, number=n + 1, started_at=event.created_at + timedelta(seconds=n))
        for event in owner.events
        for n in range(attempts_each)
    ]
    await EventRepository(db).upsert_many(owner.events)
    await AttemptRepository(db).upsert_many(owner.attempts)
    return owner


async def stored_ids(db: Database, collection: str) -> set[str]:
    return {doc["_id"] async for doc in db[collection].find({}, {"_id": 1})}


async def orphaned_attempts(db: Database) -> set[str]:
    """Attempts whose event is gone: retention must never leave one behind."""
    events = await stored_ids(db, Collections.EVENTS)
    cursor = db[Collections.ATTEMPTS].find({}, {"event_id": 1})
    return {doc["_id"] async for doc in cursor if doc["event_id"] not in events}


def days_ago(now: datetime, days: float, *, ms: int = 0) -> datetime:
    return now - timedelta(days=days) + timedelta(milliseconds=ms)


@dataclass
class Pushed:
    method: str
    path: str
    body: bytes


class Pushgateway:
    """A local HTTP server answering 200 to every push, keeping each request."""

    def __init__(self) -> None:
        self.received: list[Pushed] = []
        received = self.received

        class Handler(BaseHTTPRequestHandler):
            def _keep(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                received.append(Pushed(self.command, self.path, self.rfile.read(length)))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_PUT = do_POST = _keep

            def log_message(self, format: str, *args: Any) -> None:
                return None

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    @contextlib.contextmanager
    def serving(self) -> Iterator[Pushgateway]:
        thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._server.shutdown()
            self._server.server_close()


@pytest.fixture
def pushgateway() -> Iterator[Pushgateway]:
    with Pushgateway().serving() as gateway:
        yield gateway
