"""Schemathesis against the served OpenAPI document: generated requests, valid and invalid, to
every operation of a real ``python -m hookbay_dashboard`` (on the real database, Kafka and Redis).

Checks: no 5xx for anything a client can send, every status code and response body as the
document says, and a documented content type. The live tail is left out: a valid request to it
never ends by design (tests/test_tail.py covers it).

Reproducible: the examples are derived from the test itself (``derandomize``, no example
database), so every run of ``make test`` sends the same requests and a red run is red for a
reason; open-ended exploration with fresh random inputs belongs to ``make chaos``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from click.testing import CliRunner
from hypothesis import HealthCheck, settings
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from hookbay_common.cli import build
from tests.support.net import free_port

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


@pytest.fixture(scope="module")
def served(env: dict[str, str]) -> Iterator[tuple[str, str]]:
    """A dashboard process and an admin's API token."""
    created = CliRunner().invoke(
        build(), ["user", "create", f"st{uuid.uuid4().hex[:10]}", "--admin", "--json"], env=env
    )
    assert created.exit_code == 0, created.output
    token = json.loads(created.stdout)["token"]
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "hookbay_dashboard"],
        env={
            **os.environ,
            **env,
            "HOOKBAY_DASHBOARD_PORT": str(port),
            "HOOKBAY_DASHBOARD_HOST": "127.0.0.1",
            "HOOKBAY_COOKIE_SECURE": "false",
            "HOOKBAY_LOGIN_LIMIT_PER_ADDRESS": "100000",
            "HOOKBAY_REDIS_KEY_PREFIX": f"hookbay:test:{uuid.uuid4().hex[:8]}:",
        },
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(f"{url}/readyz", timeout=2) as response:  # noqa: S310
                if response.status == 200:
                    break
        except OSError:
            pass
        assert proc.poll() is None, "dashboard exited during start-up"
        assert time.monotonic() < deadline, "dashboard not ready within 60 s"
        time.sleep(0.2)
    try:
        yield url, token
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.fixture(scope="module")
def api_schema(served: tuple[str, str]) -> schemathesis.BaseSchema:
    url, _ = served
    schema = schemathesis.openapi.from_url(f"{url}/api/v1/openapi.json")
    return schema.exclude(path_regex=r"/events/stream$")


schema = schemathesis.pytest.from_fixture("api_schema")


@schema.parametrize()
@settings(
    max_examples=30,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
def test_the_api_matches_its_document(
    case: schemathesis.Case[Any], served: tuple[str, str]
) -> None:
    url, token = served
    case.call_and_validate(
        base_url=url, headers={"Authorization": f"Bearer {token}"}, checks=CHECKS
    )
