from __future__ import annotations

import asyncio
import gc
import io
import json
import logging
from collections.abc import Iterator

import pytest
import structlog
from aiokafka.errors import NotCoordinatorForGroupError

from hookbay_common.logs import InvalidLogFormat, choose_format, configure_logging, get_logger
from hookbay_common.process.loop import report_loop_errors


@pytest.fixture(autouse=True)
def no_format_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    """The format follows the terminal unless a test sets ``HOOKBAY_LOG_FORMAT`` itself."""
    monkeypatch.delenv("HOOKBAY_LOG_FORMAT", raising=False)


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


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class TestChooseFormat:
    def test_json_when_not_a_terminal(self) -> None:
        assert choose_format({}, io.StringIO()) == "json"

    def test_console_on_a_terminal(self) -> None:
        assert choose_format({}, Terminal()) == "console"

    def test_the_variable_overrides_the_terminal(self) -> None:
        assert choose_format({"HOOKBAY_LOG_FORMAT": "json"}, Terminal()) == "json"
        assert choose_format({"HOOKBAY_LOG_FORMAT": "console"}, io.StringIO()) == "console"
        assert choose_format({"HOOKBAY_LOG_FORMAT": " Console "}, io.StringIO()) == "console"

    def test_empty_is_unset(self) -> None:
        assert choose_format({"HOOKBAY_LOG_FORMAT": ""}, Terminal()) == "console"

    def test_an_unknown_format_is_refused(self) -> None:
        with pytest.raises(InvalidLogFormat, match="HOOKBAY_LOG_FORMAT must be json or console"):
            choose_format({"HOOKBAY_LOG_FORMAT": "yaml"}, io.StringIO())

    def test_a_closed_stream_is_not_a_terminal(self) -> None:
        stream = io.StringIO()
        stream.close()
        assert choose_format({}, stream) == "json"


class TestConsoleFormat:
    def test_readable_lines_with_the_context(
        self, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("HOOKBAY_LOG_FORMAT", "console")
        configure_logging("INFO", service="test")
        with structlog.contextvars.bound_contextvars(request_id="req_1"):
            get_logger("hookbay.test").info("event_received", size=12)
            logging.getLogger("thirdparty").warning("plain %s", "stdlib")
        first, second = capsys.readouterr().err.splitlines()
        assert "event_received" in first
        assert "size=12" in first
        assert "request_id=req_1" in first
        assert "service=test" in first
        assert "\x1b[" not in first  # no colours: stderr is not a terminal here
        assert "plain stdlib" in second
        with pytest.raises(json.JSONDecodeError):
            json.loads(first)

    def test_exceptions_are_shown(
        self, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("HOOKBAY_LOG_FORMAT", "console")
        configure_logging("INFO", service="test")
        try:
            raise RuntimeError("kaput")
        except RuntimeError:
            get_logger("hookbay.test").exception("failed")
        err = capsys.readouterr().err
        assert "failed" in err
        assert "RuntimeError" in err
        assert "kaput" in err

    def test_json_unless_told_otherwise_off_a_terminal(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        configure_logging("INFO", service="test")
        get_logger("hookbay.test").info("event_received")
        assert json.loads(capsys.readouterr().err)["event"] == "event_received"

    def test_an_explicit_format_wins_over_the_variable(
        self, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("HOOKBAY_LOG_FORMAT", "console")
        configure_logging("INFO", service="test", log_format="json")
        get_logger("hookbay.test").info("event_received")
        assert json.loads(capsys.readouterr().err)["event"] == "event_received"


class TestLoopErrors:
    """An exception no one retrieved: one JSON line naming it, never a traceback."""

    @staticmethod
    def abandon(failure: BaseException) -> None:
        """Run a task that fails, drop it unretrieved, let the loop report it."""

        async def background() -> None:
            raise failure

        loop = asyncio.new_event_loop()
        report_loop_errors(loop)
        try:
            task = loop.create_task(background())
            loop.run_until_complete(asyncio.wait([task]))
            del task
            gc.collect()  # the report comes when the failed task is collected
        finally:
            loop.close()

    def test_a_kafka_error_is_a_warning_without_traceback(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        configure_logging("INFO", service="test")
        self.abandon(NotCoordinatorForGroupError())
        err = capsys.readouterr().err
        assert "Traceback" not in err
        (line,) = [json.loads(line) for line in err.splitlines()]
        assert (line["event"], line["level"], line["error"]) == (
            "kafka_background_error", "warning", "NotCoordinatorForGroupError",
        )  # fmt: skip
        assert line["where"].endswith("background")
        assert line["message"] == "Task exception was never retrieved"

    def test_any_other_error_is_an_error_without_traceback(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        configure_logging("INFO", service="test")
        self.abandon(RuntimeError("secret-ish detail"))
        err = capsys.readouterr().err
        assert "Traceback" not in err
        assert "secret-ish" not in err
        (line,) = [json.loads(line) for line in err.splitlines()]
        assert (line["event"], line["level"], line["error"]) == (
            "loop_error",
            "error",
            "RuntimeError",
        )
