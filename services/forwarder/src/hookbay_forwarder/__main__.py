"""``python -m hookbay_forwarder [forwarder|recorder|stats]``: run one of the three processes.

SIGTERM/SIGINT: stop reading, let in-flight attempts finish (``HOOKBAY_SHUTDOWN_GRACE``),
hand back the rest uncommitted, commit what is done, flush the producer, exit 0. Exit 3: the
dead-letter limit tripped; exit 1: a consumer failed; exit 2: invalid configuration.
"""

from __future__ import annotations

import asyncio
import functools
import signal
import sys
from collections.abc import Callable, Sequence

import uvloop
from pydantic import ValidationError

from hookbay_common.logs import configure_logging
from hookbay_forwarder.delivery import Forwarder
from hookbay_forwarder.ops import create_ops_app, create_ops_server
from hookbay_forwarder.process import Process
from hookbay_forwarder.recorder import Recorder
from hookbay_forwarder.settings import ForwarderSettings
from hookbay_forwarder.stats import StatsProcessor

ROLES: dict[str, Callable[[ForwarderSettings], Process]] = {
    "forwarder": Forwarder,
    "recorder": Recorder,
    "stats": StatsProcessor,
}


async def serve(make: Callable[[], Process], host: str, port: int) -> int:
    process = make()  # inside the loop: the Kafka clients bind to the running loop
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, process.request_stop)
    ops_app = create_ops_app(process.checks, process.metrics.registry, process.healthy)
    ops = create_ops_server(ops_app, host, port)
    ops_task = asyncio.create_task(ops.serve())
    try:
        await process.start()
        status = await process.run()
    finally:
        await process.stop()
        ops.should_exit = True
        await ops_task
    return status


def main(argv: Sequence[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv) or ["forwarder"]
    if len(args) != 1 or args[0] not in ROLES:
        print("usage: python -m hookbay_forwarder [forwarder|recorder|stats]", file=sys.stderr)  # noqa: T201
        sys.exit(2)
    role = args[0]
    try:
        settings = ForwarderSettings()  # type: ignore[call-arg]
    except ValidationError as exc:
        print(f"hookbay-{role}: invalid configuration: {exc}", file=sys.stderr)  # noqa: T201
        sys.exit(2)
    configure_logging(settings.log_level, service=role)
    port = {
        "forwarder": settings.forwarder_metrics_port,
        "recorder": settings.recorder_metrics_port,
        "stats": settings.stats_metrics_port,
    }[role]
    make = functools.partial(ROLES[role], settings)
    sys.exit(uvloop.run(serve(make, settings.ops_host, port)))


if __name__ == "__main__":
    main()
