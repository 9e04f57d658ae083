"""``python -m hookbay_ingest``: serve the receiving endpoint with uvicorn (uvloop + httptools).

SIGTERM: with ``HOOKBAY_DRAIN_DELAY`` set, ingest first keeps serving that long with ``/readyz``
503 (``draining``, logged as ``ingest_draining``), so the load balancer stops sending to it; then
uvicorn stops accepting, finishes in-flight requests, and the lifespan flushes the Kafka producer
(logged as ``ingest_stopped``); nothing is answered 200 that Kafka did not acknowledge. uvicorn
then re-raises the signal, so the exit status is that of SIGTERM. A second SIGTERM, or SIGINT,
skips what is left of the delay.

The HTTP protocol is ``hookbay_ingest.server``'s (uvicorn's httptools one answering in hookbay's
JSON error shape, bounding request heads); no protocol upgrade is ever performed (``ws="none"``).
"""

from __future__ import annotations

import contextlib
import sys

import uvicorn
from pydantic import ValidationError
from uvicorn.config import STARTUP_FAILURE

from hookbay_common.errors import HookbayError
from hookbay_common.logs import InvalidLogFormat, configure_logging, get_logger
from hookbay_common.process import DrainingServer
from hookbay_ingest.app import Ingest, create_app
from hookbay_ingest.server import protocol_for
from hookbay_ingest.settings import IngestSettings

log = get_logger("hookbay.ingest")


def main() -> None:
    try:
        settings = IngestSettings()  # type: ignore[call-arg]
        configure_logging(settings.log_level, service="ingest")
        app = create_app(settings)
        ingest: Ingest = app.state.ingest
    except (ValidationError, InvalidLogFormat, HookbayError) as exc:
        print(f"hookbay-ingest: invalid configuration: {exc}", file=sys.stderr)  # noqa: T201
        sys.exit(2)
    config = uvicorn.Config(
        app,
        host=settings.ingest_host,
        port=settings.ingest_port,
        loop="uvloop",
        http=protocol_for(settings, ingest.metrics),
        ws="none",
        # the client's address is ingest's to decide (HOOKBAY_TRUSTED_PROXIES): uvicorn's own
        # X-Forwarded-For handling would believe any loopback peer before ingest looks
        proxy_headers=False,
        access_log=False,
        log_config=None,
        timeout_graceful_shutdown=30,
        timeout_keep_alive=int(settings.keepalive_timeout),
    )

    def drain() -> None:
        ingest.draining = True
        log.info("ingest_draining", seconds=settings.drain_delay)

    server = DrainingServer(config, settings.drain_delay, drain)
    with contextlib.suppress(KeyboardInterrupt):
        server.run()
    if not server.started:
        sys.exit(STARTUP_FAILURE)  # as uvicorn.run: the port taken, the app failing to start


if __name__ == "__main__":
    main()
