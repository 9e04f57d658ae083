"""``hookbay listen`` as a process through a loopback proxy this test breaks, while events are
recorded at a steady rate: a black hole (no byte moves, the connection stays open), the
dashboard API restarted (on another port, the proxy following), the listener stopped (SIGSTOP)
and continued. Every event arrives once, byte-exact, in order. The long version, with the
whole stack and ingest, is the chaos suite's ``listen`` scenario."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import signal
import sys
from collections.abc import AsyncIterator

from hookbay_common.db import EventRepository
from hookbay_common.db.client import Database
from hookbay_common.models import Event, Webhook
from hookbay_dashboard.settings import DashboardSettings
from tests.support.dashboard import Dashboard, serve_dashboard
from tests.support.factories import create_event, create_webhook
from tests.support.proxy import BreakableProxy, serve_proxy
from tests.support.receiver import Receiver
from tests.support.waiting import until

HOOKBAY = os.path.join(os.path.dirname(sys.executable), "hookbay")
INTERVAL = 0.05


@contextlib.asynccontextmanager
async def steady(events: EventRepository, webhook: Webhook) -> AsyncIterator[list[Event]]:
    """Record an event every ``INTERVAL`` seconds (as the recorder does) until the block ends."""
    made: list[Event] = []

    async def record() -> None:
        while True:
            event = create_event(
                webhook_id=webhook.id, username=webhook.username, webhook_name=webhook.name,
                body=os.urandom(64) + b"\r\n", request_headers={"x-n": str(len(made))},
            )  # fmt: skip
            await events.upsert(event)
            made.append(event)
            await asyncio.sleep(INTERVAL)

    task = asyncio.create_task(record())
    try:
        yield made
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def restart(
    dashboard: contextlib.AbstractAsyncContextManager[Dashboard],
    settings: DashboardSettings,
    proxy: BreakableProxy,
) -> contextlib.AbstractAsyncContextManager[Dashboard]:
    """Stop ``dashboard`` and serve another (a new port: the proxy follows it)."""
    await dashboard.__aexit__(None, None, None)
    proxy.cut()
    replacement = serve_dashboard(settings)
    served = await replacement.__aenter__()
    proxy.upstream_port = int(served.url.rsplit(":", 1)[1])
    return replacement


class TestListenThroughFaults:
    async def test_every_event_once_byte_exact_in_order(
        self, cli_dashboard_settings: DashboardSettings, db: Database, receiver: Receiver
    ) -> None:
        served: contextlib.AbstractAsyncContextManager[Dashboard]
        served = serve_dashboard(cli_dashboard_settings)
        first = await served.__aenter__()
        try:
            owner = await first.owner()
            webhook = await first.runtime.webhooks.create(
                create_webhook(username=owner.username, name="orders")
            )
            url = receiver.url()
            async with serve_proxy(int(first.url.rsplit(":", 1)[1])) as proxy:
                env = {
                    **os.environ, "HOOKBAY_SERVER": proxy.url, "HOOKBAY_TOKEN": owner.token,
                    "XDG_CONFIG_HOME": "/nonexistent",
                }  # fmt: skip
                listener = await asyncio.create_subprocess_exec(
                    HOOKBAY, "listen", "orders", "--forward-to", url, "--format", "jsonl",
                    "--stall-timeout", "1", "--backoff-min", "0.05", "--backoff-max", "1", env=env,
                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                )  # fmt: skip
                assert listener.stderr is not None
                assert b"Ready!" in await asyncio.wait_for(listener.stderr.readline(), 15)
                async with steady(EventRepository(db), webhook) as made:
                    await until(lambda: len(receiver.received(url)) >= 5, 15, what="flowing")
                    proxy.black_hole()
                    await until(lambda: len(made) >= 60, 15, what="3 s of events in the hole")
                    proxy.restore()
                    served = await restart(served, cli_dashboard_settings, proxy)
                    listener.send_signal(signal.SIGSTOP)
                    await until(lambda: len(made) >= 100, 15, what="2 s of events while stopped")
                    listener.send_signal(signal.SIGCONT)
                    await until(lambda: len(made) >= 120, 15, what="1 s more")
                try:
                    await until(lambda: len(receiver.received(url)) >= len(made), 30, what="all")
                except AssertionError as exc:
                    arrived = len(receiver.received(url))
                    raise AssertionError(f"{exc}: {arrived} of {len(made)} arrived") from None
                listener.send_signal(signal.SIGINT)
                _, err = await asyncio.wait_for(listener.communicate(), 15)
                assert listener.returncode == 0, err.decode()
        finally:
            await served.__aexit__(None, None, None)
        got = receiver.received(url)
        ids = [r.header("x-hookbay-event-id") for r in got]
        assert ids == [e.id for e in sorted(made, key=lambda e: (e.created_at, e.id))]
        sent = {e.id: hashlib.sha256(e.body).hexdigest() for e in made}
        assert all(sent[r.header("x-hookbay-event-id") or ""] == hashlib.sha256(r.body).hexdigest()
                   for r in got)  # fmt: skip
        assert b"reconnecting" in err  # the black hole and the restart were noticed
