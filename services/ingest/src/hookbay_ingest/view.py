"""The configuration view: every user and webhook (with its routes) in memory, kept current by
the change log.

How a request finds its user and webhook (``user()``, ``webhook()``):

1. **The view.** Loaded from MongoDB at start-up and kept current by the configuration change log
   (``Topics.config``, ``hookbay_common.configlog``, read with ``hookbay_common.changelog``),
   which every writer publishes to after its MongoDB write. A change is applied the moment the
   consumer receives it (milliseconds).
2. **Read-through on a miss.** A name the view does not hold is looked up in MongoDB: one query per
   key at a time (concurrent misses for one key share it), at most ``read_through_rate`` per second
   per replica (a token bucket holding ``read_through_burst``). A record found joins the view; an
   absence is remembered for ``negative_ttl`` (until then, or until the change log brings the key,
   the name is answered as absent without a query). Over the bound, a miss is answered as absent
   without a query: a flood of random names costs MongoDB at most the bound.
3. **Reconciliation.** Every ``reconcile_interval`` the view is compared with MongoDB and repaired:
   the safety net for a publication that was lost (a writer that died between its two writes).

Hence a webhook or user created a moment ago is answered as existing on every replica (by the
read-through), and every other change is live on every replica once the change log delivers it.

Races: the change log is authoritative for a key from the moment it touches the key. A
read-through or a reconciliation that read MongoDB before the change log applied a change to the
same key leaves that key alone (``_touched``); a change older than the record held (``at`` before
its ``updated_at``) is ignored.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pymongo.errors import PyMongoError

from hookbay_common.changelog import RECONNECT_INTERVAL, ChangeLog
from hookbay_common.configlog import (
    ConfigChange,
    ConfigKey,
    Entity,
    normalized_user,
    user_key,
    webhook_key,
)
from hookbay_common.db import UserRepository, WebhookRepository
from hookbay_common.logs import get_logger
from hookbay_common.models import User, Webhook
from hookbay_ingest.errors import ConfigUnavailable
from hookbay_ingest.metrics import ViewMetrics

log = get_logger("hookbay.ingest.view")
Record = User | Webhook
_HELD = frozenset({Entity.USER.value, Entity.WEBHOOK.value})
"""The change log's entities a request needs; the others are skipped."""


@dataclass(frozen=True)
class ViewSettings:
    reconcile_interval: float = 60.0
    negative_ttl: float = 1.0
    read_through_rate: float = 20.0
    read_through_burst: int = 40


class TokenBucket:
    """``rate`` tokens per second, at most ``burst`` held; ``take`` never waits."""

    def __init__(self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic):
        self._rate = rate
        self._burst = float(burst)
        self._tokens = float(burst)
        self._clock = clock
        self._last = clock()

    def take(self) -> bool:
        now = self._clock()
        self._tokens = min(self._burst, self._tokens + (now - self._last) * self._rate)
        self._last = now
        if self._tokens < 1:
            return False
        self._tokens -= 1
        return True


class ConfigView:
    def __init__(
        self,
        users: UserRepository,
        webhooks: WebhookRepository,
        changes: ChangeLog,
        metrics: ViewMetrics,
        settings: ViewSettings,
    ) -> None:
        self._users_repo = users
        self._webhooks_repo = webhooks
        self._changes = changes
        self._metrics = metrics
        self._settings = settings
        self._users: dict[str, User] = {}
        self._webhooks: dict[tuple[str, str], Webhook] = {}
        self._absent: dict[ConfigKey, float] = {}  # key -> monotonic expiry
        self._inflight: dict[ConfigKey, asyncio.Task[Record | None]] = {}
        self._generation = 0
        self._touched: dict[ConfigKey, int] = {}  # key -> generation of its last change
        self._budget = TokenBucket(settings.read_through_rate, settings.read_through_burst)
        self._tasks: list[asyncio.Task[None]] = []
        self._current_since = time.monotonic()
        self.loaded = False
        self.following = asyncio.Event()
        """Set once the change log is followed and MongoDB was loaded after its end was taken."""
        metrics.age.set_function(self.age)

    # --- lookups (the request path) ------------------------------------------------------------

    async def user(self, username: str) -> User | None:
        user = self._users.get(username)
        if user is not None:
            return user
        found = await self._read_through(user_key(username))
        return found if isinstance(found, User) else None

    async def webhook(self, username: str, name: str) -> Webhook | None:
        webhook = self._webhooks.get((username, name))
        if webhook is not None:
            return webhook
        found = await self._read_through(webhook_key(username, name))
        return found if isinstance(found, Webhook) else None

    async def _read_through(self, key: ConfigKey) -> Record | None:
        if self._absent.get(key, 0.0) > time.monotonic():
            found = await self._after_sync(key)
            if found is not None or self._absent.get(key, 0.0) > time.monotonic():
                if found is None:
                    self._metrics.negative_hits.inc()
                return found
        task = self._inflight.get(key)
        if task is None:
            if not self._budget.take():
                found = await self._after_sync(key)
                if found is None:
                    self._metrics.read_throughs.labels("refused").inc()
                return found
            task = asyncio.create_task(self._fetch(key), name="config-read-through")
            self._inflight[key] = task
        return await asyncio.shield(task)  # a caller that goes away leaves the query to the rest

    async def _after_sync(self, key: ConfigKey) -> Record | None:
        """The view's entry once every change published before this call is applied: an
        answer "absent" given without MongoDB is never older than what writers published."""
        await self._changes.sync()
        return self._get(key)

    async def _fetch(self, key: ConfigKey) -> Record | None:
        started = self._generation
        try:
            record = await self._read(key)
        finally:
            del self._inflight[key]
        self._metrics.read_throughs.labels("found" if record else "absent").inc()
        if self._touched.get(key, 0) > started:  # the change log knows better by now
            return self._get(key)
        if record is None:
            self._absent[key] = time.monotonic() + self._settings.negative_ttl
            self._sweep_absent()
        else:
            self._put(key, record)
        return record

    async def _read(self, key: ConfigKey) -> Record | None:
        try:
            if key[0] == Entity.USER:
                user = await self._users_repo.get(key[1])
                return normalized_user(user) if user else None
            return await self._webhooks_repo.get(key[1], key[2])
        except PyMongoError:
            log.warning("config_read_through_failed", entity=key[0])
            raise ConfigUnavailable() from None

    def _sweep_absent(self) -> None:
        """Drop expired absences once there are many (a flood of random names)."""
        if len(self._absent) > 4 * self._settings.read_through_burst + 1000:
            now = time.monotonic()
            self._absent = {k: t for k, t in self._absent.items() if t > now}

    # --- the view's entries --------------------------------------------------------------------

    def _get(self, key: ConfigKey) -> Record | None:
        if key[0] == Entity.USER:
            return self._users.get(key[1])
        return self._webhooks.get((key[1], key[2]))

    def _put(self, key: ConfigKey, record: Record | None) -> None:
        if isinstance(record, User):
            self._users[key[1]] = record
        elif isinstance(record, Webhook):
            self._webhooks[(key[1], key[2])] = record
        elif key[0] == Entity.USER:
            self._users.pop(key[1], None)
        else:
            self._webhooks.pop((key[1], key[2]), None)

    def apply(self, change: ConfigChange) -> None:
        """Apply one change-log record (see the module docstring for ordering). Records of
        entities the view does not hold (destinations: the delivery side's) are skipped."""
        if change.key[0] not in _HELD:
            return
        self._generation += 1
        self._touched[change.key] = self._generation
        current = self._get(change.key)
        if current is not None and current.updated_at > change.at:
            return  # an older change published late: the view holds something newer
        record = change.user or change.webhook
        self._put(change.key, record)
        if record is None:
            self._absent[change.key] = time.monotonic() + self._settings.negative_ttl
        else:
            self._absent.pop(change.key, None)
        self._metrics.changes_applied.inc()

    # --- reconciliation ------------------------------------------------------------------------

    async def reconcile(self) -> int:
        """Make the view equal to MongoDB, except for keys the change log touched meanwhile;
        return how many entries were repaired (a first load repairs nothing)."""
        started = self._generation
        users = {u.username: normalized_user(u) for u in await self._users_repo.list_all()}
        webhooks = {(w.username, w.name): w for w in await self._webhooks_repo.list_all()}
        repairs = 0
        snapshot: dict[ConfigKey, Record] = {user_key(n): u for n, u in users.items()}
        snapshot.update({webhook_key(*k): w for k, w in webhooks.items()})
        held: list[ConfigKey] = [user_key(n) for n in self._users]
        held += [webhook_key(*k) for k in self._webhooks]
        for key in {*snapshot, *held}:
            if self._touched.get(key, 0) > started:
                continue
            stored = snapshot.get(key)
            if self._get(key) != stored:
                self._put(key, stored)
                if stored is not None:
                    self._absent.pop(key, None)
                repairs += 1
        if self.loaded and repairs:
            self._metrics.reconcile_repairs.inc(repairs)
            log.warning("config_view_repaired", repairs=repairs)
        self._forget_touched(started)
        self._current_since = time.monotonic()
        self.loaded = True
        return repairs

    def _forget_touched(self, before: int) -> None:
        """Generations at or below ``before`` can no longer matter once no read-through that
        started earlier is in flight."""
        if not self._inflight:
            self._touched = {k: g for k, g in self._touched.items() if g > before}

    # --- life cycle ----------------------------------------------------------------------------

    @property
    def caught_up(self) -> bool:
        """Following the change log, with everything committed before its end was taken loaded
        (ingest's readiness)."""
        return self.following.is_set()

    def age(self) -> float:
        """Seconds since the view was last known current (change log at its end, or a
        reconciliation); grows while the change log cannot be read."""
        if self._changes.at_end:
            self._current_since = time.monotonic()
        return time.monotonic() - self._current_since

    async def start(self) -> None:
        """Load everything once (fails if MongoDB is unreachable); then follow the change log
        (connecting in the background, so ingest starts while Kafka is away) and reconcile."""
        await self.reconcile()
        self._tasks = [
            asyncio.create_task(self._follow(), name="config-changelog"),
            asyncio.create_task(self._reconcile_forever(), name="config-reconcile"),
        ]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self._changes.stop()

    async def _follow(self) -> None:
        await self._changes.connect()
        # changes committed before the change log's end was taken may have been published
        # before it too: one more load covers them (the initial load may be older than that)
        await self._retrying(self.reconcile)
        self.following.set()
        log.info("config_view_following")
        async for change in self._changes.follow(self._metrics):
            self.apply(change)

    async def _reconcile_forever(self) -> None:
        while True:
            await asyncio.sleep(self._settings.reconcile_interval)
            await self._retrying(self.reconcile)

    @staticmethod
    async def _retrying(work: Callable[[], Any]) -> None:
        while True:
            try:
                await work()
                return
            except Exception:  # keep serving the last good view; MongoDB may come back
                log.warning("config_view_reconcile_failed", exc_info=True)
                await asyncio.sleep(RECONNECT_INTERVAL)
