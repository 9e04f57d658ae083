"""Opening the database and the idempotent index migration."""

from __future__ import annotations

from typing import Any, Final

from pymongo import ASCENDING, AsyncMongoClient, IndexModel
from pymongo.asynchronous.database import AsyncDatabase

Database = AsyncDatabase[dict[str, Any]]


class Collections:
    USERS: Final = "users"
    WEBHOOKS: Final = "webhooks"
    DESTINATIONS: Final = "destinations"
    TRANSFORMATIONS: Final = "transformations"
    EVENTS: Final = "events"
    EVENT_BODIES: Final = "event_bodies"
    EVENT_PAGES: Final = "event_pages"
    EVENT_BOOKS: Final = "event_books"
    EVENT_COUNTERS: Final = "event_counters"
    ATTEMPTS: Final = "attempts"
    API_TOKENS: Final = "api_tokens"
    SESSIONS: Final = "sessions"
    STATS_MINUTES: Final = "stats_minutes"
    STATS_HOURS: Final = "stats_hours"
    REPLAY_JOBS: Final = "replay_jobs"
    LOCKS: Final = "locks"
    MIGRATIONS: Final = "migrations"
    HELD_DELIVERIES: Final = "held_deliveries"
    HELD_LANES: Final = "held_lanes"
    ISSUES: Final = "issues"
    ALERT_CHANNELS: Final = "alert_channels"
    DESTINATION_FAILURES: Final = "destination_failures"


INDEXES: Final[dict[str, list[IndexModel]]] = {
    Collections.WEBHOOKS: [
        IndexModel([("username", ASCENDING), ("name", ASCENDING)], unique=True, name="owner_name"),
    ],
    Collections.DESTINATIONS: [
        IndexModel([("username", ASCENDING), ("name", ASCENDING)], unique=True, name="owner_name"),
    ],
    Collections.TRANSFORMATIONS: [
        IndexModel([("username", ASCENDING), ("name", ASCENDING)], unique=True, name="owner_name"),
    ],
    Collections.API_TOKENS: [
        IndexModel([("token_hash", ASCENDING)], unique=True, name="token_hash"),
        IndexModel([("username", ASCENDING)], name="owner"),
    ],
    Collections.SESSIONS: [
        IndexModel([("username", ASCENDING)], name="owner"),
    ],
    Collections.EVENTS: [
        IndexModel([("request_id", ASCENDING)], unique=True, name="request_id"),
        IndexModel(
            [("webhook_id", ASCENDING), ("page", ASCENDING), ("status", ASCENDING)],
            name="webhook_page_status",
        ),
        # live streams: a webhook's heads by the page their latest change is on
        IndexModel([("webhook_id", ASCENDING), ("change_page", ASCENDING)], name="webhook_change"),
        IndexModel([("username", ASCENDING)], name="owner"),
    ],
    Collections.EVENT_BODIES: [
        IndexModel([("webhook_id", ASCENDING), ("page", ASCENDING)], name="webhook_page"),
        IndexModel([("username", ASCENDING)], name="owner"),
    ],
    Collections.EVENT_PAGES: [
        IndexModel([("webhook_id", ASCENDING), ("page", ASCENDING)], name="webhook_page"),
        IndexModel([("username", ASCENDING)], name="owner"),
    ],
    Collections.EVENT_BOOKS: [
        IndexModel([("webhook_id", ASCENDING), ("book", ASCENDING)], name="webhook_book"),
        IndexModel([("username", ASCENDING)], name="owner"),
    ],
    Collections.EVENT_COUNTERS: [
        IndexModel([("username", ASCENDING)], name="owner"),
    ],
    Collections.ATTEMPTS: [
        IndexModel([("event_id", ASCENDING), ("started_at", ASCENDING)], name="event_started"),
        IndexModel([("webhook_id", ASCENDING), ("event_page", ASCENDING)], name="webhook_page"),
        IndexModel([("username", ASCENDING)], name="owner"),
    ],
    Collections.STATS_MINUTES: [
        IndexModel([("username", ASCENDING), ("day", ASCENDING)], name="owner_day"),
        IndexModel([("webhook_id", ASCENDING), ("day", ASCENDING)], name="webhook_day"),
    ],
    Collections.STATS_HOURS: [
        IndexModel([("username", ASCENDING), ("day", ASCENDING)], name="owner_day"),
        IndexModel([("webhook_id", ASCENDING), ("day", ASCENDING)], name="webhook_day"),
    ],
    Collections.REPLAY_JOBS: [
        IndexModel([("status", ASCENDING), ("lease_until", ASCENDING)], name="status_lease"),
        IndexModel([("webhook_id", ASCENDING), ("status", ASCENDING)], name="webhook_status"),
    ],
    Collections.HELD_DELIVERIES: [
        IndexModel(
            [("destination", ASCENDING), ("seq", ASCENDING)], unique=True, name="destination_seq"
        ),
        IndexModel([("destination", ASCENDING), ("page", ASCENDING)], name="destination_page"),
    ],
    Collections.HELD_LANES: [
        IndexModel([("held", ASCENDING)], name="held"),
    ],
    Collections.ISSUES: [
        IndexModel([("username", ASCENDING), ("key", ASCENDING)], unique=True, name="owner_key"),
        IndexModel([("username", ASCENDING), ("status", ASCENDING)], name="owner_status"),
    ],
    Collections.ALERT_CHANNELS: [
        IndexModel([("username", ASCENDING)], name="owner"),
    ],
}


OBSOLETE_INDEXES: Final[dict[str, tuple[str, ...]]] = {
    Collections.EVENTS: ("webhook_created", "webhook_status_created", "owner_created"),
}
"""Indexes of earlier layouts, dropped by ``migrate``: every write would still maintain them."""


MAX_POOL_SIZE: Final = 16
"""Connections per client. Small on purpose: every FerretDB connection holds one of its
PostgreSQL pool's connections, and FerretDB v1.24 can deadlock when that pool runs dry while a
collection is being created (docs/ferretdb-backends.md). A ``maxPoolSize`` in the URL wins."""


def connect(
    mongo_url: str, *, timeout_ms: int = 5000, socket_timeout_ms: int | None = None
) -> AsyncMongoClient[dict[str, Any]]:
    """A client for ``mongo_url``; connects lazily. Datetimes come back timezone-aware (UTC).
    ``socket_timeout_ms``: how long one operation may wait for its answer (default: for ever);
    background writers set it, since a restarted FerretDB may leave a request unanswered."""
    options: dict[str, Any] = {}
    if socket_timeout_ms is not None:
        options["socketTimeoutMS"] = socket_timeout_ms
    if "maxpoolsize=" not in mongo_url.lower():
        options["maxPoolSize"] = MAX_POOL_SIZE
    return AsyncMongoClient(
        mongo_url,
        **options,
        tz_aware=True,
        serverSelectionTimeoutMS=timeout_ms,
        connectTimeoutMS=timeout_ms,
        appname="hookbay",
    )


def database(client: AsyncMongoClient[dict[str, Any]]) -> Database:
    """The database named in the URL's path, ``hookbay`` when it names none."""
    return client.get_default_database(default="hookbay")


async def migrate(db: Database) -> None:
    """Create every collection's missing indexes; safe to run any number of times, concurrently too.

    One index per ``createIndexes`` call: FerretDB v1.24 drops the connection (a server-side panic)
    when one call names several indexes that already exist.
    """
    for collection, indexes in INDEXES.items():
        existing = {info["name"] async for info in await db[collection].list_indexes()}
        for index in indexes:
            if index.document["name"] not in existing:
                await db[collection].create_indexes([index])
        for name in OBSOLETE_INDEXES.get(collection, ()):
            if name in existing:
                await db[collection].drop_index(name)
