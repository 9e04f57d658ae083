"""The configuration view: every user and webhook in memory, kept fresh by polling MongoDB.

Ingest answers from this view alone, so a request costs no database round trip and a flood of
requests to unknown users or webhooks costs nothing either (the view is complete: absent means
absent). Every ``refresh_interval`` the view fetches users and webhooks whose ``updated_at`` moved
(with an overlap that tolerates writers' clock skew and late commits) and compares the sets of
ids; a difference (a deletion, also one hidden by a creation in the same interval) triggers a
full reload. A change made anywhere is
therefore live on every replica within ``refresh_interval`` plus one query (< 2 s by default).
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from datetime import datetime, timedelta

from hookbay_common.db import UserRepository, WebhookRepository
from hookbay_common.logs import get_logger
from hookbay_common.models import User, Webhook

OVERLAP = timedelta(seconds=10)
log = get_logger("hookbay.ingest.view")


@dataclass(frozen=True)
class Snapshot:
    users: dict[str, User]
    webhooks: dict[tuple[str, str], Webhook]


class ConfigView:
    def __init__(
        self, users: UserRepository, webhooks: WebhookRepository, *, refresh_interval: float
    ) -> None:
        self._users_repo = users
        self._webhooks_repo = webhooks
        self._interval = refresh_interval
        self._users: dict[str, User] = {}
        self._webhooks: dict[tuple[str, str], Webhook] = {}
        self._watermark: datetime | None = None
        self._task: asyncio.Task[None] | None = None
        self.loaded = False

    def user(self, username: str) -> User | None:
        return self._users.get(username)

    def webhook(self, username: str, name: str) -> Webhook | None:
        return self._webhooks.get((username, name))

    async def start(self) -> None:
        """Load everything once (fails if MongoDB is unreachable), then keep refreshing."""
        await self.reload()
        self._task = asyncio.create_task(self._refresh_forever(), name="config-view")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def reload(self) -> None:
        users = await self._users_repo.list_all()
        webhooks = await self._webhooks_repo.list_all()
        self._users = {u.username: u for u in users}
        self._webhooks = {(w.username, w.name): w for w in webhooks}
        self._watermark = _newest(users, webhooks)
        self.loaded = True

    async def refresh(self) -> None:
        """Apply what changed since the last look; reload all when something was deleted."""
        since = (self._watermark - OVERLAP) if self._watermark else datetime.min
        users = await self._users_repo.changed_since(since)
        webhooks = await self._webhooks_repo.changed_since(since)
        for user in users:
            self._users[user.username] = user
        for hook in webhooks:
            self._webhooks[(hook.username, hook.name)] = hook
        newest = _newest(users, webhooks)
        if newest and (self._watermark is None or newest > self._watermark):
            self._watermark = newest
        user_ids = await self._users_repo.ids()
        webhook_ids = await self._webhooks_repo.ids()
        if user_ids != set(self._users) or webhook_ids != {w.id for w in self._webhooks.values()}:
            await self.reload()

    async def _refresh_forever(self) -> None:
        while True:
            await asyncio.sleep(self._interval)
            try:
                await self.refresh()
            except Exception:  # keep serving the last good view; MongoDB may come back
                log.warning("config_view_refresh_failed", exc_info=True)


def _newest(users: list[User], webhooks: list[Webhook]) -> datetime | None:
    moments = [u.updated_at for u in users] + [w.updated_at for w in webhooks]
    return max(moments, default=None)
