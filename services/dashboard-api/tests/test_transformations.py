"""Every transformation operation of the dashboard API on the real store and change log, the
test run in a real sandbox, and every bad field answered 413 or 422 with a detail naming it."""

from __future__ import annotations

import asyncio
import logging

import httpx
import pytest

from hookbay_common.configlog import Entity, decode_change
from hookbay_common.errors import ServiceUnavailable
from hookbay_common.models import Event
from hookbay_dashboard.transformations.sandbox import Sandbox
from hookbay_sandbox import TransformRequest, request_of_event
from tests.support.dashboard import Dashboard, Owner
from tests.support.factories import create_event
from tests.support.kafka import TopicReader
from tests.support.waiting import until

API = "/api/v1/transformations"
IDENTITY = "addHandler('transform', (request, context) => request)"
CHANGE_BODY = """addHandler('transform', (request, context) => {
  console.log('id', request.body.id);
  request.body = { order: request.body.id, key: context.env.API_KEY.length };
  request.headers['x-extra'] = 'yes';
  return request;
});"""
THROWS = """addHandler('transform', (request) => {
  const x = request.body;
  throw new Error('no ' + x.id);
});"""
SPINS = "addHandler('transform', (request) => { while (true) {} });"


async def create(
    owner: Owner, name: str = "shape", code: str = IDENTITY, **body: object
) -> httpx.Response:
    return await owner.client.post(API, json={"name": name, "code": code, **body})


async def stored_event(dashboard: Dashboard, owner: Owner, **fields: object) -> Event:
    event = create_event(username=owner.username, webhook_name="orders", **fields)
    await dashboard.runtime.events.upsert_many([event])
    return event


def detail(response: httpx.Response) -> dict[str, object]:
    entries = response.json()["detail"]
    assert len(entries) == 1, entries
    entry: dict[str, object] = entries[0]
    return entry


class TestCreate:
    async def test_created_with_version_1_and_the_env_masked(self, dashboard: Dashboard) -> None:
        owner = await dashboard.owner()
        response = await create(owner, env={"API_KEY": "s3cret-env-value", "TENANT": "t1"})
        assert response.status_code == 201, response.text
        created = response.json()
        assert created["id"].startswith("trf_")
        assert (created["name"], created["code"], created["version"]) == ("shape", IDENTITY, 1)
        assert created["env"] == {"API_KEY": "********", "TENANT": "********"}
        assert "s3cret-env-value" not in response.text
        assert (await owner.client.get(f"{API}/shape")).json() == created
        assert [t["name"] for t in (await owner.client.get(API)).json()] == ["shape"]
        stored = await dashboard.runtime.db.transformations.find_one({"_id": created["id"]})
        assert stored is not None
        assert "s3cret-env-value" not in str(stored)  # sealed at rest

    async def test_a_taken_name_is_409(self, dashboard: Dashboard) -> None:
        owner = await dashboard.owner()
        assert (await create(owner)).status_code == 201
        again = await create(owner)
        assert again.status_code == 409
        assert again.json()["error"] == "Transformation already exists"

    async def test_a_syntax_error_is_422_naming_code_with_line_and_column(
        self, dashboard: Dashboard
    ) -> None:
        owner = await dashboard.owner()
        response = await create(owner, code="addHandler('transform', (r) => {\n  return r +;\n});")
        assert response.status_code == 422, response.text
        entry = detail(response)
        assert entry["loc"] == ["body", "code"]
        assert entry["type"] == "transformation_syntax"
        assert entry["line"] == 2
        assert isinstance(entry["column"], int)
        assert "line 2" in str(entry["msg"])
        assert (await owner.client.get(f"{API}/shape")).status_code == 404

    async def test_code_without_a_handler_is_422(self, dashboard: Dashboard) -> None:
        owner = await dashboard.owner()
        response = await create(owner, code="const x = 1;")
        assert response.status_code == 422
        assert detail(response)["loc"] == ["body", "code"]

    async def test_code_over_64_kib_is_413_naming_code(self, dashboard: Dashboard) -> None:
        owner = await dashboard.owner()
        response = await create(owner, code=IDENTITY + "//" + "x" * 65_536)
        assert response.status_code == 413, response.text
        assert detail(response)["loc"] == ["body", "code"]

    async def test_an_env_over_its_size_is_413_naming_env(self, dashboard: Dashboard) -> None:
        owner = await dashboard.owner()
        env = {f"K{i}": "v" * 4000 for i in range(9)}
        response = await create(owner, env=env)
        assert response.status_code == 413, response.text
        assert detail(response)["loc"] == ["body", "env"]

    @pytest.mark.parametrize(
        ("body", "loc", "fragment"),
        [
            ({"name": "Shape"}, ["body", "name"], "invalid name"),
            ({"name": "x" * 65}, ["body", "name"], "at most 64"),
            ({"code": ""}, ["body", "code"], "at least 1"),
            ({"env": {"1BAD": "v"}}, ["body", "env"], "env name"),
            ({"env": {"K": "v" * 4097}}, ["body", "env"], "at most 4096"),
            ({"env": {f"K{i}": "v" for i in range(51)}}, ["body", "env"], "at most 50"),
            ({"env": {"K": "********"}}, ["body", "env"], "stored value"),
            ({"version": 3}, ["body", "version"], "Extra inputs"),
        ],
    )
    async def test_a_bad_field_is_422_naming_it(
        self, dashboard: Dashboard, body: dict[str, object], loc: list[str], fragment: str
    ) -> None:
        owner = await dashboard.owner()
        response = await owner.client.post(API, json={"name": "shape", "code": IDENTITY, **body})
        assert response.status_code == 422, response.text
        entry = detail(response)
        assert entry["loc"] == loc
        assert fragment in str(entry["msg"])


class TestUpdate:
    async def test_version_moves_with_code_and_env_only(self, dashboard: Dashboard) -> None:
        owner = await dashboard.owner()
        await create(owner, env={"API_KEY": "first"})
        same = await owner.client.patch(f"{API}/shape", json={"code": IDENTITY})
        assert same.json()["version"] == 1  # nothing changed
        kept = await owner.client.patch(f"{API}/shape", json={"env": {"API_KEY": "********"}})
        assert kept.json()["version"] == 1  # the mask keeps the stored value
        code = await owner.client.patch(f"{API}/shape", json={"code": CHANGE_BODY})
        assert (code.status_code, code.json()["version"]) == (200, 2)
        env = await owner.client.patch(
            f"{API}/shape", json={"env": {"API_KEY": "********", "NEW": "n"}}
        )
        assert env.json()["version"] == 3
        assert env.json()["env"] == {"API_KEY": "********", "NEW": "********"}
        stored = await dashboard.runtime.services.stores.transformations.require(
            owner.username, "shape"
        )
        assert stored.env["API_KEY"].get_secret_value() == "first"
        cleared = await owner.client.patch(f"{API}/shape", json={"env": None})
        assert (cleared.json()["env"], cleared.json()["version"]) == ({}, 4)

    async def test_bad_code_is_refused_and_the_stored_code_stays(
        self, dashboard: Dashboard
    ) -> None:
        owner = await dashboard.owner()
        await create(owner)
        response = await owner.client.patch(f"{API}/shape", json={"code": "throw 1"})
        assert response.status_code == 422
        assert detail(response)["loc"] == ["body", "code"]
        current = (await owner.client.get(f"{API}/shape")).json()
        assert (current["code"], current["version"]) == (IDENTITY, 1)

    async def test_null_code_and_an_unknown_masked_name_are_422(self, dashboard: Dashboard) -> None:
        owner = await dashboard.owner()
        await create(owner)
        null = await owner.client.patch(f"{API}/shape", json={"code": None})
        assert (null.status_code, detail(null)["loc"]) == (422, ["body", "code"])
        masked = await owner.client.patch(f"{API}/shape", json={"env": {"K": "********"}})
        assert (masked.status_code, detail(masked)["loc"]) == (422, ["body", "env", "K"])

    async def test_deleted_then_404(self, dashboard: Dashboard) -> None:
        owner = await dashboard.owner()
        await create(owner)
        assert (await owner.client.delete(f"{API}/shape")).status_code == 204
        assert (await owner.client.get(f"{API}/shape")).status_code == 404
        assert (await owner.client.delete(f"{API}/shape")).status_code == 404


class TestIsolation:
    async def test_another_owners_transformation_is_404_for_everything(
        self, dashboard: Dashboard
    ) -> None:
        alice, mallory = await dashboard.owner(), await dashboard.owner()
        await create(alice, env={"API_KEY": "alice-only"})
        event = await stored_event(dashboard, alice)
        assert (await mallory.client.get(API)).json() == []
        calls = [
            mallory.client.get(f"{API}/shape"),
            mallory.client.patch(f"{API}/shape", json={"code": CHANGE_BODY}),
            mallory.client.post(f"{API}/shape/test", json={"event_id": event.id}),
            mallory.client.post(f"{API}/shape/test", json={"request": {}}),
            mallory.client.delete(f"{API}/shape"),
        ]
        for call in calls:
            response = await call
            assert response.status_code == 404, response.text
            assert response.json()["error"] == "Transformation not found"
            assert "alice-only" not in response.text
        current = (await alice.client.get(f"{API}/shape")).json()
        assert (current["code"], current["version"]) == (IDENTITY, 1)

    async def test_no_test_run_against_another_owners_event(self, dashboard: Dashboard) -> None:
        alice, mallory = await dashboard.owner(), await dashboard.owner()
        event = await stored_event(dashboard, alice, body=b'{"id": "alice-secret"}')
        await create(mallory)
        response = await mallory.client.post(f"{API}/shape/test", json={"event_id": event.id})
        assert response.status_code == 404
        assert response.json()["error"] == "Event not found"
        assert "alice-secret" not in response.text


class TestTestRun:
    async def test_a_stored_event_reshaped(self, dashboard: Dashboard) -> None:
        owner = await dashboard.owner()
        await create(owner, code=CHANGE_BODY, env={"API_KEY": "12345"})
        event = await stored_event(
            dashboard, owner, body=b'{"id": "ord_1"}', query="a=1",
            request_headers={"Content-Type": "application/json", "X-Sender": "s"},
        )  # fmt: skip
        response = await owner.client.post(f"{API}/shape/test", json={"event_id": event.id})
        assert response.status_code == 200, response.text
        result = response.json()
        assert result["error"] is None
        assert result["logs"] == ["id ord_1"]
        assert result["request"] == {
            "headers": {"content-type": "application/json", "x-sender": "s", "x-extra": "yes"},
            "body": {"order": "ord_1", "key": 5},
            "query": "a=1",
            "path": f"/w/{owner.username}/orders",
        }
        assert result["duration_ms"] > 0
        assert "12345" not in response.text  # the env is used, never shown

    async def test_a_request_sent_with_the_call(self, dashboard: Dashboard) -> None:
        owner = await dashboard.owner()
        await create(owner, code=CHANGE_BODY, env={"API_KEY": "k"})
        request = {"headers": {"X-A": "1"}, "body": {"id": 7}, "query": "", "path": "/p"}
        response = await owner.client.post(f"{API}/shape/test", json={"request": request})
        assert response.status_code == 200, response.text
        assert response.json()["request"]["body"] == {"order": 7, "key": 1}
        assert response.json()["request"]["headers"] == {"x-a": "1", "x-extra": "yes"}

    async def test_a_throwing_handler_answers_its_error_with_its_line(
        self, dashboard: Dashboard
    ) -> None:
        owner = await dashboard.owner()
        await create(owner, code=THROWS)
        response = await owner.client.post(
            f"{API}/shape/test", json={"request": {"body": {"id": "x1"}}}
        )
        assert response.status_code == 200, response.text
        result = response.json()
        assert result["request"] is None
        assert result["error"]["kind"] == "runtime"
        assert "no x1" in result["error"]["message"]
        assert result["error"]["line"] == 3

    async def test_a_spinning_handler_hits_the_cpu_limit_while_others_are_answered(
        self, dashboard: Dashboard
    ) -> None:
        owner, other = await dashboard.owner(), await dashboard.owner()
        await create(owner, code=SPINS)
        await create(other)
        spinning = asyncio.create_task(
            owner.client.post(f"{API}/shape/test", json={"request": {"body": 1}})
        )
        await until(lambda: dashboard.runtime.sandbox.busy > 0, 30, what="the spinning call")
        listed = await owner.client.get(API)
        answered = await other.client.post(f"{API}/shape/test", json={"request": {"body": 2}})
        assert listed.status_code == 200
        assert (answered.status_code, answered.json()["request"]["body"]) == (200, 2)
        assert not spinning.done()  # answered meanwhile, not behind the spinning call
        response = await spinning
        assert response.status_code == 200, response.text
        result = response.json()
        assert result["request"] is None
        assert (
            result["error"]["kind"] == "timeout"
        )  # the CPU limit (or, on a busy machine, the wall time)

    async def test_neither_or_both_of_event_and_request_is_422(self, dashboard: Dashboard) -> None:
        owner = await dashboard.owner()
        await create(owner)
        for body in ({}, {"event_id": "evt_x", "request": {}}):
            response = await owner.client.post(f"{API}/shape/test", json=body)
            assert response.status_code == 422, response.text
            assert "either event_id or request" in response.text

    async def test_an_oversized_request_is_413(self, dashboard: Dashboard) -> None:
        owner = await dashboard.owner()
        await create(owner)
        request = {"body": "x" * 4_700_000}
        response = await owner.client.post(f"{API}/shape/test", json={"request": request})
        assert response.status_code == 413, response.text[:300]
        assert detail(response)["loc"] == ["body", "request"]

    async def test_an_unknown_event_is_404(self, dashboard: Dashboard) -> None:
        owner = await dashboard.owner()
        await create(owner)
        response = await owner.client.post(f"{API}/shape/test", json={"event_id": "evt_nope"})
        assert response.status_code == 404


class TestSecrets:
    async def test_the_env_is_never_logged_nor_published_in_clear(
        self, dashboard: Dashboard, caplog: pytest.LogCaptureFixture
    ) -> None:
        owner = await dashboard.owner()
        with caplog.at_level(logging.DEBUG):
            await create(owner, env={"API_KEY": "log-me-not-1"})
            await owner.client.patch(f"{API}/shape", json={"env": {"API_KEY": "log-me-not-2"}})
            await owner.client.post(f"{API}/shape/test", json={"request": {}})
            await owner.client.delete(f"{API}/shape")
        assert "log-me-not" not in caplog.text
        topic = dashboard.settings.topics.config
        key = f"transformation:{owner.username}/shape".encode()
        reader = TopicReader(dashboard.settings.kafka_bootstrap, topic, bytes)
        await reader.start(from_beginning=True)
        try:
            records = [m for m in await reader.to_end() if m.key == key]
        finally:
            await reader.stop()
        assert len(records) == 3
        assert all(b"log-me-not" not in r.value for r in records)
        created, changed, deleted = (decode_change(r.value, dashboard.runtime.box) for r in records)
        assert created.key == (Entity.TRANSFORMATION.value, owner.username, "shape")
        assert created.transformation is not None
        assert created.transformation.env["API_KEY"].get_secret_value() == "log-me-not-1"
        assert changed.transformation is not None
        assert changed.transformation.version == 2
        assert deleted.deleted


class TestRequestOfEvent:
    def test_a_json_body_is_parsed(self) -> None:
        event = create_event(body=b'{"a": [1, 2]}', query=None)
        request = request_of_event(event)
        assert (request.body, request.query, request.path) == ({"a": [1, 2]}, "", "/w/alice/orders")

    def test_a_text_body_stays_text(self) -> None:
        event = create_event(body=b"a=1&b=2", content_type="application/x-www-form-urlencoded")
        assert request_of_event(event).body == "a=1&b=2"

    def test_json_that_does_not_parse_stays_text(self) -> None:
        event = create_event(body=b'{"a": NaN}')
        assert request_of_event(event).body == '{"a": NaN}'

    def test_a_number_out_of_range_leaves_it_text(self) -> None:
        event = create_event(body=b'{"a": 1e400}')
        assert request_of_event(event).body == '{"a": 1e400}'

    def test_nesting_deeper_than_python_parses_stays_text(self) -> None:
        body = b"[" * 100_000 + b"]" * 100_000
        assert request_of_event(create_event(body=body)).body == body.decode()

    def test_bytes_that_are_not_utf8_are_replaced(self) -> None:
        event = create_event(body=b"\xff\xfeok", content_type="application/octet-stream")
        assert request_of_event(event).body == "\ufffd\ufffdok"


class TestSandbox:
    """The dashboard's own pool, without the API around it (real workers, no other service)."""

    async def test_workers_start_with_the_first_run_and_stop_with_close(self) -> None:
        sandbox = Sandbox()
        assert await sandbox.check(IDENTITY) is None
        assert not sandbox.started  # a check needs no pool
        result = await sandbox.run("alice", IDENTITY, TransformRequest({}, body=1), {})
        assert (result.ok, sandbox.started) == (True, True)
        await sandbox.close()
        assert not sandbox.started
        with pytest.raises(ServiceUnavailable):
            await sandbox.run("alice", IDENTITY, TransformRequest({}, body=1), {})

    async def test_a_spinning_owner_leaves_the_other_worker_to_everyone_else(self) -> None:
        sandbox = Sandbox()
        try:
            spinning = asyncio.create_task(
                sandbox.run("alice", SPINS, TransformRequest({}, body=1), {})
            )
            await until(lambda: sandbox.busy > 0, 30, what="alice's spinning call")
            other = await sandbox.run("bob", IDENTITY, TransformRequest({}, body=2), {})
            assert (other.ok, other.request.body if other.request else None) == (True, 2)
            assert not spinning.done()  # answered meanwhile, not behind alice's second of CPU
            spun = await spinning
            assert (spun.ok, spun.error.kind if spun.error else None) == (False, "timeout")
        finally:
            await sandbox.close()
