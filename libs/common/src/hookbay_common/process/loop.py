"""What the event loop reports on its own: one JSON line naming the failure, never a traceback.

asyncio reports an exception nobody retrieved (a task that failed after everyone stopped
waiting for it) through the loop's exception handler, whose default logs the traceback. The
known source is a library's background work, such as aiokafka's offset commit: it is shielded,
so when a commit outlives its deadline the caller moves on and the commit later fails alone
(``NotCoordinatorForGroupError`` while the broker is away). That is a broker blip the consumer
already rides out, not a crash; a Kafka error is logged as a warning, anything else as an
error, each with the exception's type and the coroutine it came from.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiokafka.errors import KafkaError

from hookbay_common.logs import get_logger

log = get_logger("hookbay.loop")


def report_loop_errors(loop: asyncio.AbstractEventLoop | None = None) -> None:
    """Route the loop's unhandled errors through ``loop_error`` (default: the running loop)."""
    (loop or asyncio.get_running_loop()).set_exception_handler(loop_error)


def loop_error(_: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """The loop's exception handler: one structured line, no traceback."""
    exc = context.get("exception")
    fields: dict[str, Any] = {"message": context.get("message", "")}
    if exc is not None:
        fields["error"] = type(exc).__name__
    future = context.get("future") or context.get("task")
    coro = getattr(future, "get_coro", lambda: None)()
    if coro is not None:
        fields["where"] = getattr(coro, "__qualname__", type(coro).__name__)
    if isinstance(exc, KafkaError):
        log.warning("kafka_background_error", **fields)
    else:
        log.error("loop_error", **fields)
