"""``python -m hookbay_forwarder [forwarder|recorder|stats]``: run one of the three processes.

SIGTERM/SIGINT: stop reading, let in-flight attempts finish (``HOOKBAY_SHUTDOWN_GRACE``),
hand back the rest uncommitted, commit what is done, flush the producer, exit 0. Exit 3: the
dead-letter limit tripped; exit 1: a consumer failed; exit 2: invalid configuration.
"""

from __future__ import annotations

import functools
import importlib
import sys
from collections.abc import Callable, Sequence

import uvloop
from pydantic import ValidationError

from hookbay_common.logs import InvalidLogFormat, configure_logging
from hookbay_common.process import (
    create_ops_app,
    heap,
    report_loop_errors,
    serving,
    stop_on_signals,
)
from hookbay_forwarder.process import Process
from hookbay_forwarder.settings import ForwarderSettings

ROLES: dict[str, tuple[str, str]] = {
    "forwarder": ("hookbay_forwarder.delivery", "Forwarder"),
    "recorder": ("hookbay_forwarder.recorder", "Recorder"),
    "stats": ("hookbay_forwarder.stats", "StatsProcessor"),
}
"""Each role's process class, imported only for its role: a recorder never loads the HTTP
client stack, a forwarder never loads faust (a third of a process's start-up CPU)."""


def process_of(role: str) -> Callable[[ForwarderSettings], Process]:
    module, name = ROLES[role]
    made: Callable[[ForwarderSettings], Process] = getattr(importlib.import_module(module), name)
    return made


async def serve(make: Callable[[], Process], host: str, port: int) -> int:
    report_loop_errors()
    process = make()  # inside the loop: the Kafka clients bind to the running loop
    ops_app = create_ops_app(process.checks, process.metrics.registry, process.healthy)
    with stop_on_signals(process.request_stop):
        async with serving(ops_app, host, port):  # probes answer until the stop is complete
            try:
                await process.start()
                heap.settle()
                return await process.run()
            finally:
                await process.stop()


def main(argv: Sequence[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv) or ["forwarder"]
    if len(args) != 1 or args[0] not in ROLES:
        print("usage: python -m hookbay_forwarder [forwarder|recorder|stats]", file=sys.stderr)  # noqa: T201
        sys.exit(2)
    role = args[0]
    try:
        settings = ForwarderSettings()  # type: ignore[call-arg]
        configure_logging(settings.log_level, service=role)
    except (ValidationError, InvalidLogFormat) as exc:
        print(f"hookbay-{role}: invalid configuration: {exc}", file=sys.stderr)  # noqa: T201
        sys.exit(2)
    port = {
        "forwarder": settings.forwarder_metrics_port,
        "recorder": settings.recorder_metrics_port,
        "stats": settings.stats_metrics_port,
    }[role]
    make = functools.partial(process_of(role), settings)
    sys.exit(uvloop.run(serve(make, settings.ops_host, port)))


if __name__ == "__main__":
    main()
