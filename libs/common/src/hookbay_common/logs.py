"""Logs on stderr for every process, with context bound per request or message: JSON lines, or
readable lines for a person at a terminal.

The format: ``HOOKBAY_LOG_FORMAT`` (``json`` or ``console``) when set; otherwise ``console``
when stderr is a terminal and ``json`` when it is not (a container, a pipe, a file). The images
set ``json`` explicitly, so what a log collector reads never depends on a terminal.

Bind context with ``structlog.contextvars.bound_contextvars(request_id=...)``; every line logged
inside carries it, including lines from libraries that log through the standard ``logging`` module.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping
from typing import Final, Literal, TextIO

import structlog

LogFormat = Literal["json", "console"]
FORMAT_VARIABLE: Final = "HOOKBAY_LOG_FORMAT"

_CONTEXT: list[structlog.types.Processor] = [
    structlog.contextvars.merge_contextvars,
    structlog.stdlib.add_log_level,
    structlog.stdlib.add_logger_name,
    structlog.processors.TimeStamper(fmt="iso", utc=True),
]


class InvalidLogFormat(ValueError):
    """``HOOKBAY_LOG_FORMAT`` is set to something other than ``json`` or ``console``."""


def choose_format(environ: Mapping[str, str], stream: TextIO) -> LogFormat:
    """``HOOKBAY_LOG_FORMAT`` from ``environ`` when set (case-insensitive; ``InvalidLogFormat``
    for another value), else ``console`` when ``stream`` is a terminal, else ``json``."""
    chosen = environ.get(FORMAT_VARIABLE, "").strip().lower()
    if not chosen:
        return "console" if _is_terminal(stream) else "json"
    if chosen == "json":
        return "json"
    if chosen == "console":
        return "console"
    raise InvalidLogFormat(
        f"{FORMAT_VARIABLE} must be json or console, not {environ[FORMAT_VARIABLE]!r}"
    )


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # no isatty, or closed
        return False


def configure_logging(
    level: str = "INFO", *, service: str, log_format: LogFormat | None = None
) -> None:
    """Route structlog and standard-library logging to one renderer on stderr: ``log_format``,
    or the one ``choose_format`` picks from the environment and stderr
    (``InvalidLogFormat`` for an unknown ``HOOKBAY_LOG_FORMAT``)."""
    stream = sys.stderr
    chosen = log_format or choose_format(os.environ, stream)
    shared: list[structlog.types.Processor]
    renderer: structlog.types.Processor
    if chosen == "json":
        # the traceback as a string field of the line, not lines of its own
        shared = [*_CONTEXT, structlog.processors.format_exc_info]
        renderer = structlog.processors.JSONRenderer()
    else:
        shared = _CONTEXT  # the console renderer lays out tracebacks itself
        renderer = structlog.dev.ConsoleRenderer(colors=_is_terminal(stream))
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(stream)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=shared,
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                _add_service(service),
                renderer,
            ],
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for noisy in ("aiokafka", "pymongo"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))


def _add_service(service: str) -> structlog.types.Processor:
    def add(_: object, __: str, event: structlog.types.EventDict) -> structlog.types.EventDict:
        event.setdefault("service", service)
        return event

    return add


def get_logger(name: str) -> structlog.stdlib.BoundLogger:
    logger: structlog.stdlib.BoundLogger = structlog.stdlib.get_logger(name)
    return logger
