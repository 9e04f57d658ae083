"""JSON logs on stderr for every process, with context bound per request or message.

Bind context with ``structlog.contextvars.bound_contextvars(request_id=...)``; every line logged
inside carries it, including lines from libraries that log through the standard ``logging`` module.
"""

from __future__ import annotations

import logging
import sys

import structlog

_SHARED: list[structlog.types.Processor] = [
    structlog.contextvars.merge_contextvars,
    structlog.stdlib.add_log_level,
    structlog.stdlib.add_logger_name,
    structlog.processors.TimeStamper(fmt="iso", utc=True),
    structlog.processors.format_exc_info,
]


def configure_logging(level: str = "INFO", *, service: str, json: bool = True) -> None:
    """Route structlog and standard-library logging to one JSON (or console) renderer on stderr."""
    renderer: structlog.types.Processor = (
        structlog.processors.JSONRenderer() if json else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[*_SHARED, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=_SHARED,
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
