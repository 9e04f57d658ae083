from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest
import structlog

from hookbay_common.logs import configure_logging, get_logger


@pytest.fixture(autouse=True)
def restore_logging() -> Iterator[None]:
    """configure_logging changes process-wide state; put it back for the tests that follow."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    structlog.reset_defaults()


class TestLogging:
    def test_json_lines_with_bound_context(self, capsys: pytest.CaptureFixture[str]) -> None:
        configure_logging("INFO", service="test")
        with structlog.contextvars.bound_contextvars(request_id="req_1"):
            get_logger("hookbay.test").info("event_received", size=12)
            logging.getLogger("thirdparty").warning("plain %s", "stdlib")
        get_logger("hookbay.test").debug("hidden")
        lines = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
        assert len(lines) == 2
        first, second = lines
        assert first["event"] == "event_received"
        assert first["size"] == 12
        assert first["request_id"] == second["request_id"] == "req_1"
        assert first["level"] == "info"
        assert first["service"] == "test"
        assert "timestamp" in first
        assert second["event"] == "plain stdlib"
        assert second["level"] == "warning"

    def test_exceptions_are_rendered_inside_the_json(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        configure_logging("INFO", service="test")
        try:
            raise RuntimeError("kaput")
        except RuntimeError:
            get_logger("hookbay.test").exception("failed")
        line = json.loads(capsys.readouterr().err.strip())
        assert line["event"] == "failed"
        assert "RuntimeError: kaput" in line["exception"]
