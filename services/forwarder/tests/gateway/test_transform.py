"""The transform step of a routed delivery: the request a transformation sees, the request sent
in its place, failures, suspension and resumption. The happy paths run the real sandbox
(worker processes); the counting runs a scripted runner. (End to end, with the forwarder's
lanes, Kafka and the recorder: services/dashboard-api/tests/test_transformed_delivery.py.)"""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator, Mapping, Sequence

import pytest
from prometheus_client import CollectorRegistry
from pydantic import SecretStr

from hookbay_common.clock import utcnow
from hookbay_common.models import (
    DeliveryStatus,
    DeliveryTask,
    Destination,
    Transformation,
    TransformTrace,
)
from hookbay_common.topics import Topics
from hookbay_common.wire import decode_attempt, decode_delivery, is_delivery_record
from hookbay_forwarder.delivery.deliverer import Outcome
from hookbay_forwarder.gateway.deliver import DestinationDelivery
from hookbay_forwarder.gateway.transform import (
    SUSPENDED,
    LazyPool,
    Transformed,
    TransformFailed,
    TransformStep,
)
from hookbay_forwarder.metrics import TransformMetrics
from hookbay_forwarder.writes import Message
from hookbay_sandbox import (
    TransformError,
    TransformPool,
    TransformRequest,
    TransformResult,
    request_of_event,
)
from tests.support.factories import create_destination, create_destination_task, create_event
from tests.support.transform import LIMITS

TOPICS = Topics("unit")
RESHAPE = """
addHandler('transform', (request, context) => {
  console.log('seen', request.body.id);
  request.body = { order: request.body.id, key: context.env.KEY };
  request.headers['x-shape'] = 'erp';
  return request;
});
"""


def create_transformation(
    name: str = "shape", code: str = RESHAPE, **overrides: object
) -> Transformation:
    now = utcnow()
    fields: dict[str, object] = {
        "id": f"trf_{name}", "username": "alice", "name": name, "code": code,
        "env": {"KEY": SecretStr("k_1")}, "version": 1, "created_at": now, "updated_at": now,
    }  # fmt: skip
    return Transformation.model_validate({**fields, **overrides})


class View:
    """The routing view's two lookups, from a dict: route name -> transformation name."""

    def __init__(self, routes: dict[str, str], *transformations: Transformation) -> None:
        self.routes = routes
        self.transformations = {t.name: t for t in transformations}
        self.route_lookups = 0

    def may_transform(self, username: str, webhook: str) -> bool:
        return bool(self.routes)

    async def route_transform(self, username: str, webhook: str, route: str) -> str | None:
        self.route_lookups += 1
        return self.routes.get(route)

    async def transformation(self, username: str, name: str) -> Transformation | None:
        return self.transformations.get(name)


class Scripted:
    """A runner answering ``results`` in turn (the last one again when they run out)."""

    def __init__(self, *results: TransformResult) -> None:
        self.results = list(results)
        self.calls = 0

    async def run(
        self, owner: str, code: str, request: TransformRequest, env: Mapping[str, str]
    ) -> TransformResult:
        self.calls += 1
        return self.results.pop(0) if len(self.results) > 1 else self.results[0]


def failure(kind: str = "runtime") -> TransformResult:
    return TransformResult(False, None, ["tried"], TransformError(kind, "Error: no", 1, 9))  # type: ignore[arg-type]


def success() -> TransformResult:
    returned = TransformRequest({"a": "1"}, body_json='{"ok":1}', query="", path="/w/alice/orders")
    return TransformResult(True, returned, [])


def task(route: str = "r", body: bytes = b'{"id": "ord_1"}', **event: object) -> DeliveryTask:
    made = create_destination_task(route=route, event=create_event(body=body, **event))
    return DeliveryTask(
        event=made.event, chain_id=made.chain_id, trigger=made.trigger, number=1,
        url="https://erp.example/in", not_before=made.not_before,
    )  # fmt: skip


@pytest.fixture(scope="module")
async def pool() -> AsyncIterator[LazyPool]:
    lazy = LazyPool(lambda: TransformPool(size=2, limits=LIMITS))
    yield lazy
    await lazy.close()


class TestRequestOfEvent:
    def test_a_json_body_is_handed_over_as_its_text(self) -> None:
        event = create_event(body=b'{"id": 1,  "x": [1]}', query="a=1", webhook_name="orders")
        request = request_of_event(event)
        assert request.body_json == '{"id": 1,  "x": [1]}'  # not parsed and encoded again
        assert request.body == {"id": 1, "x": [1]}
        assert (request.query, request.path) == ("a=1", f"/w/{event.username}/orders")
        assert request.headers["content-type"] == "application/json"

    @pytest.mark.parametrize(
        ("body", "content_type"),
        [
            (b"a=1&b=2", "application/x-www-form-urlencoded"),
            (b"{not json", "application/json"),
            (b'{"n": NaN}', "application/json"),
            (b'{"n": 1e400}', "application/json"),
            (b'{"id": 1}', "text/plain"),
        ],
    )
    def test_anything_else_is_text(self, body: bytes, content_type: str) -> None:
        request = request_of_event(create_event(body=body, content_type=content_type))
        assert request.body == body.decode()

    def test_bytes_that_are_not_utf8_read_as_replacement_characters(self) -> None:
        request = request_of_event(create_event(body=b"\xff\xfeok", content_type="text/plain"))
        assert request.body == "\ufffd\ufffdok"


class TestTransformedRequest:
    def transformed(
        self, *, path: str = "/w/a/h", query: str = "q=1", body: bytes = b"{}"
    ) -> Transformed:
        trace = TransformTrace(name="shape", version=1)
        return Transformed({"x-a": "é€"}, body, path, query, "/w/a/h", "q=1", trace)

    def test_headers_and_body_replace_the_events_and_the_url_stays(self) -> None:
        sent = self.transformed().apply(task())
        assert sent.event.body == b"{}"
        assert sent.event.request_headers == {"x-a": "é€"}
        assert sent.url == "https://erp.example/in"

    def test_a_changed_path_is_appended_and_a_changed_query_added(self) -> None:
        request = task().model_copy(update={"url": "https://erp.example/in/?k=v"})
        sent = self.transformed(path="/tenants/acme", query="x=2").apply(request)
        assert sent.url == "https://erp.example/in/tenants/acme?k=v&x=2"
        only_query = self.transformed(query="").apply(request)
        assert only_query.url == "https://erp.example/in/?k=v"


class TestPrepare:
    async def test_a_route_without_a_transformation_starts_no_sandbox(self) -> None:
        runner = LazyPool(lambda: TransformPool(size=1, limits=LIMITS))
        step = TransformStep(View({}), runner)
        assert await step.prepare(create_destination_task(route="r")) is None
        assert not runner.started

    async def test_the_request_sent_is_the_transformations(self, pool: LazyPool) -> None:
        step = TransformStep(View({"r": "shape"}, create_transformation()), pool)
        prepared = await step.prepare(create_destination_task(
            route="r", event=create_event(body=b'{"id": "ord_9"}'),
        ))  # fmt: skip
        assert isinstance(prepared, Transformed)
        assert json.loads(prepared.body) == {"order": "ord_9", "key": "k_1"}
        assert prepared.headers["x-shape"] == "erp"
        assert prepared.headers["content-type"] == "application/json"
        assert prepared.trace.body_sha256 == hashlib.sha256(prepared.body).hexdigest()
        assert (prepared.trace.name, prepared.trace.version) == ("shape", 1)
        assert prepared.trace.logs == ("seen ord_9",)

    async def test_a_string_body_is_sent_as_it_is(self, pool: LazyPool) -> None:
        code = "addHandler('transform', (r) => { r.body = 'plain é'; return r; });"
        step = TransformStep(View({"r": "text"}, create_transformation("text", code)), pool)
        prepared = await step.prepare(create_destination_task(route="r"))
        assert isinstance(prepared, Transformed)
        assert prepared.body == "plain é".encode()
        assert prepared.headers["content-type"] == "application/json"  # the event's own

    async def test_header_names_are_sent_lower_case(self, pool: LazyPool) -> None:
        code = "addHandler('transform', (r) => { r.headers['X-Api-Key'] = 'k'; return r; });"
        step = TransformStep(View({"r": "hdr"}, create_transformation("hdr", code)), pool)
        prepared = await step.prepare(create_destination_task(route="r"))
        assert isinstance(prepared, Transformed)
        assert prepared.headers["x-api-key"] == "k"
        assert "X-Api-Key" not in prepared.headers

    async def test_a_pool_that_cannot_start_is_started_again(self) -> None:
        made: list[TransformPool] = []

        class Refusing(TransformPool):
            async def start(self) -> None:
                if not made or made[0] is self:
                    made.append(self)
                    raise OSError("no worker")
                made.append(self)
                await super().start()

        lazy = LazyPool(lambda: Refusing(size=1, limits=LIMITS))
        try:
            step = TransformStep(View({"r": "shape"}, create_transformation()), lazy)
            prepared = await step.prepare(create_destination_task(route="r"))
            assert isinstance(prepared, Transformed)
            assert len(made) == 2
        finally:
            await lazy.close()

    async def test_a_thrown_error_fails_with_its_place_and_logs(self, pool: LazyPool) -> None:
        code = "addHandler('transform', (r) => {\n  console.log('before');\n  throw new Error('no');\n});"
        step = TransformStep(View({"r": "bad"}, create_transformation("bad", code)), pool)
        prepared = await step.prepare(create_destination_task(route="r"))
        assert isinstance(prepared, TransformFailed)
        assert prepared.reason == "runtime: Error: no (line 3, column 13)"
        assert prepared.trace.logs == ("before",)
        assert prepared.trace.body_sha256 is None

    async def test_a_deleted_transformation_fails_the_delivery(self) -> None:
        step = TransformStep(View({"r": "gone"}), Scripted(success()))
        prepared = await step.prepare(create_destination_task(route="r"))
        assert isinstance(prepared, TransformFailed)
        assert prepared.reason == "transformation 'gone' no longer exists"


class TestSuspension:
    async def test_five_failures_in_a_row_suspend_it_without_running_it_again(self) -> None:
        runner = Scripted(failure())
        registry = CollectorRegistry()
        step = TransformStep(
            View({"r": "t"}, create_transformation("t")), runner,
            metrics=TransformMetrics(registry),
        )  # fmt: skip
        reasons = [await step.prepare(create_destination_task(route="r")) for _ in range(7)]
        assert all(isinstance(r, TransformFailed) for r in reasons)
        assert [r.reason for r in reasons if isinstance(r, TransformFailed)][4:] == [
            "runtime: Error: no (line 1, column 9)", SUSPENDED, SUSPENDED,
        ]  # fmt: skip
        assert runner.calls == 5
        assert step.suspended("alice", "t") == 1
        metric = "hookbay_forwarder_transformations_total"
        assert registry.get_sample_value(metric, {"outcome": "failed"}) == 5
        assert registry.get_sample_value(metric, {"outcome": "suspended"}) == 2
        assert registry.get_sample_value("hookbay_forwarder_transformations_suspended") == 1

    async def test_a_success_starts_the_count_again(self) -> None:
        runner = Scripted(*[failure()] * 4, success(), *[failure()] * 4, success())
        step = TransformStep(View({"r": "t"}, create_transformation("t")), runner)
        for _ in range(10):
            await step.prepare(create_destination_task(route="r"))
        assert step.suspended("alice", "t") is None

    async def test_failures_that_are_not_the_codes_do_not_count(self) -> None:
        runner = Scripted(failure("crashed"), failure("too_large"))
        step = TransformStep(View({"r": "t"}, create_transformation("t")), runner, suspend_after=1)
        for _ in range(3):
            assert isinstance(
                await step.prepare(create_destination_task(route="r")), TransformFailed
            )
        assert step.suspended("alice", "t") is None

    async def test_a_new_version_resumes_it(self) -> None:
        view = View({"r": "t"}, create_transformation("t"))
        runner = Scripted(failure(), success())
        step = TransformStep(view, runner, suspend_after=1)
        await step.prepare(create_destination_task(route="r"))
        assert step.suspended("alice", "t") == 1
        step.changed(create_transformation("t"))  # the same version: still suspended
        assert step.suspended("alice", "t") == 1
        edited = create_transformation("t", version=2)
        step.changed(edited)
        assert step.suspended("alice", "t") is None
        view.transformations["t"] = edited
        assert isinstance(await step.prepare(create_destination_task(route="r")), Transformed)

    async def test_a_newer_version_met_by_a_lookup_resumes_it_too(self) -> None:
        view = View({"r": "t"}, create_transformation("t"))
        step = TransformStep(view, Scripted(failure(), success()), suspend_after=1)
        await step.prepare(create_destination_task(route="r"))
        view.transformations["t"] = create_transformation("t", version=3)
        assert isinstance(await step.prepare(create_destination_task(route="r")), Transformed)
        assert step.suspended("alice", "t") is None


class Deliverer:
    """A deliverer answering 200 and keeping the requests it was asked to send."""

    def __init__(self) -> None:
        self.sent: list[DeliveryTask] = []

    async def attempt(
        self, task: DeliveryTask, *, within: float | None = None,
        extra_headers: Mapping[str, str] | None = None,
    ) -> Outcome:  # fmt: skip
        self.sent.append(task)
        return Outcome(utcnow(), status_code=200)


class Written(list[Message]):
    async def __call__(self, messages: Sequence[Message]) -> None:
        self.extend(messages)


class Destinations:
    def __init__(self, destination: Destination) -> None:
        self.destination = destination

    def destination_by_id(self, destination_id: str) -> Destination | None:
        return self.destination if destination_id == self.destination.id else None


def deliver_with(
    runner: object, deliverer: Deliverer
) -> tuple[DestinationDelivery, Written, Destination]:
    destination = create_destination(url="https://erp.example/in")
    step = TransformStep(View({"r": "t"}, create_transformation("t")), runner)  # type: ignore[arg-type]
    written = Written()
    deliver = DestinationDelivery(
        Destinations(destination), deliverer, written, TOPICS,  # type: ignore[arg-type]
        schedule=(0.0, 10.0), jitter=0.0, transform=step,
    )  # fmt: skip
    return deliver, written, destination


class TestDeliveryWithATransformation:
    async def test_the_transformed_request_is_sent_and_the_attempt_carries_the_trace(self) -> None:
        deliverer = Deliverer()
        deliver, written, destination = deliver_with(Scripted(success()), deliverer)
        task = create_destination_task(route="r", destination=destination.id)
        assert (await deliver(task)).outcome == "success"
        (sent,) = deliverer.sent
        assert (sent.event.body, sent.event.request_headers["a"]) == (b'{"ok":1}', "1")
        assert sent.url == "https://erp.example/in"
        (record,) = written
        attempt = decode_attempt(record.value)
        assert attempt.transform is not None
        assert attempt.transform.body_sha256 == hashlib.sha256(b'{"ok":1}').hexdigest()
        assert (attempt.as_delivery() or attempt).transform == attempt.transform

    async def test_a_failure_is_recorded_and_nothing_is_sent(self) -> None:
        deliverer = Deliverer()
        deliver, written, destination = deliver_with(Scripted(failure()), deliverer)
        task = create_destination_task(route="r", destination=destination.id)
        delivered = await deliver(task)
        assert (delivered.outcome, delivered.attempted, delivered.status) == (
            "transform_failed", False, None,
        )  # fmt: skip
        assert deliverer.sent == []
        (record,) = written
        assert is_delivery_record(record.value)
        failed = decode_delivery(record.value)
        assert failed.status is DeliveryStatus.TRANSFORM_FAILED
        assert failed.reason == "runtime: Error: no (line 1, column 9)"
        assert failed.transform is not None
        assert failed.transform.logs == ("tried",)
        assert (failed.id, failed.chain, failed.destination) == (
            task.delivery_id, task.chain_id, destination.name,
        )  # fmt: skip
        assert record.topic == TOPICS.attempts

    async def test_a_route_without_one_is_sent_as_it_is(self) -> None:
        deliverer = Deliverer()
        runner = Scripted(success())
        deliver, _, destination = deliver_with(runner, deliverer)
        task = create_destination_task(route="other", destination=destination.id)
        await deliver(task)
        assert deliverer.sent[0].event == task.event
        assert runner.calls == 0
