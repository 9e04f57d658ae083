"""Transformations in the dashboard, against the real stack: one written in the code editor
(CodeMirror), saved, its refused code marked at the line the server names, tested on a pasted
request (the body as a diff, the console, an error with its line and column) and on a stored
event, deleted once no route runs it; a delivery's trace on the event page."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from playwright.async_api import Page, expect

from tests.browser.conftest import Owner, Session, Stack
from tests.browser.test_accessibility import serious_findings
from tests.support.waiting import until

MINUS = "\N{MINUS SIGN}"  # a removed line's mark
# typed key by key: CodeMirror indents each new line itself, so the lines carry no indentation
CODE = (
    "addHandler('transform', (request, context) => {\n"
    "console.log('order', request.body.id);\n"
    "request.body = {order: request.body.id, key: context.env.ERP_KEY};\n"
    "return request;\n"
    "});"
)


async def read(owner: Owner, path: str) -> Any:
    response = await owner.api.get(path)
    assert response.status_code == 200, response.text
    return response.json()


async def run_test(page: Page, request: dict[str, Any]) -> None:
    panel = page.get_by_role("region", name="Test")
    await panel.get_by_label("A request (JSON)").check()
    await panel.get_by_label("Request (JSON: headers, body, query, path)").fill(json.dumps(request))
    await panel.get_by_role("button", name="Run test").click()


class TestTransformationEditor:
    async def test_a_transformation_is_written_checked_tested_and_deleted(
        self, stack: Stack, session: Session
    ) -> None:
        owner = await stack.owner()
        page = session.page
        await session.login(owner, "/transformations")
        await expect(page.get_by_text("No transformations yet")).to_be_visible()

        await page.get_by_role("button", name="New transformation").click()
        form = page.get_by_role("form", name="New transformation")
        await form.get_by_label("Name", exact=True).fill("erp-shape")
        editor = form.get_by_role("textbox", name="Code (JavaScript)")
        await expect(editor).to_contain_text("addHandler('transform'")  # the template
        await editor.click()
        await page.keyboard.press("Control+a")
        await page.keyboard.press("Delete")
        await editor.press_sequentially(CODE)
        # highlighted as JavaScript: keywords and strings are tokens of their own
        await expect(editor.locator(".cm-t-keyword").first).to_be_visible()
        await expect(editor.locator(".cm-t-string").first).to_have_text("'transform'")
        # Tab is not the editor's: it moves the focus on
        await page.keyboard.press("Tab")
        await expect(editor).not_to_be_focused()
        await form.get_by_role("button", name="Add env value").click()
        await form.get_by_label("Env 1 name").fill("ERP_KEY")
        await form.get_by_label("Env 1 value").fill("k_123")
        await form.get_by_role("button", name="Create transformation").click()

        await page.wait_for_url("**/transformations/erp-shape")
        await expect(page.get_by_role("heading", name="Transformation erp-shape")).to_be_visible()
        stored = await read(owner, "/api/v1/transformations/erp-shape")
        assert [line.strip() for line in stored["code"].splitlines()] == CODE.splitlines(), stored[
            "code"
        ]
        assert (stored["env"], stored["version"]) == ({"ERP_KEY": "********"}, 1)

        # a syntax error: refused, its line marked and named, nothing saved
        edit = page.get_by_role("form", name="Code of erp-shape")
        editor = edit.get_by_role("textbox", name="Code (JavaScript)")
        await expect(edit.get_by_label("Env 1 value")).to_have_value("********")
        await editor.click()
        await page.keyboard.press("Control+End")
        await editor.press_sequentially("\nconst broken = ;")
        await edit.get_by_role("button", name="Save transformation").click()
        problem = edit.get_by_test_id("code-problem")
        await expect(problem).to_contain_text(re.compile(r"Line 6, column \d+: SyntaxError"))
        await expect(editor.locator(".cm-line[data-problem]")).to_have_text("const broken = ;")
        await expect(editor).to_have_attribute("aria-invalid", "true")
        await expect(editor).to_have_accessible_description(re.compile("Line 6"))
        assert (await read(owner, "/api/v1/transformations/erp-shape"))["version"] == 1

        # fixed: the mark goes as soon as the code changes, and the save goes through
        await editor.click()
        await page.keyboard.press("Control+End")
        await page.keyboard.press("Shift+Home")
        await page.keyboard.press("Backspace")
        await expect(editor.locator(".cm-line[data-problem]")).to_have_count(0)
        await page.keyboard.press("Backspace")
        await edit.get_by_role("button", name="Save transformation").click()
        await expect(page.get_by_test_id("live-region")).to_contain_text("erp-shape saved")
        await expect(problem).to_have_count(0)
        stored = await read(owner, "/api/v1/transformations/erp-shape")
        assert "broken" not in stored["code"]
        assert stored["env"] == {"ERP_KEY": "********"}  # the masked value was kept

        # a test on a pasted request: the output body as a diff, the console, the duration
        await run_test(
            page, {"headers": {"x-a": "1"}, "body": {"id": 7, "type": "invoice.paid"},
                   "query": "", "path": "/orders"},
        )  # fmt: skip
        result = page.get_by_test_id("test-result")
        await expect(result.get_by_role("status")).to_contain_text(
            re.compile(r"Returned a request in \d+\.\d ms")
        )
        diff = result.get_by_test_id("body-diff")
        await expect(diff.locator("ins")).to_have_text(
            ['+ added: "order": 7,', '+ added: "key": "k_123"']
        )
        await expect(diff.locator("del")).to_have_text(
            [f'{MINUS} removed: "id": 7,', f'{MINUS} removed: "type": "invoice.paid"']
        )
        await expect(result.get_by_role("figure")).to_have_accessible_description(
            re.compile("^2 lines added, 2 lines removed")
        )
        await expect(result.get_by_test_id("test-logs")).to_have_text("order 7")
        await expect(result).to_contain_text("/orders")
        await expect(result).to_contain_text("x-a: 1")

        # a handler that throws: the error with its line and column
        await run_test(page, {"body": None})
        await expect(result.get_by_role("status")).to_contain_text(
            re.compile(r"Failed \(runtime\) at line 2, column \d+: TypeError")
        )
        await expect(result.get_by_test_id("body-diff")).to_have_count(0)

        # a test on one of the owner's stored events
        hook = await stack.webhook(owner)
        event = await stack.event(await stack.send(hook, b'{"id": 9}'))
        panel = page.get_by_role("region", name="Test")
        await panel.get_by_label("One of your events").check()
        await panel.get_by_label("Event ID").fill(event.id)
        await panel.get_by_role("button", name="Run test").click()
        await expect(result.get_by_test_id("test-logs")).to_have_text("order 9")
        await expect(result.get_by_test_id("body-diff").locator("ins")).to_contain_text(
            ['"order": 9,']
        )

        # deleting it while a route runs it names the route; once none does, it goes
        await owner.api.post(
            "/api/v1/destinations", json={"name": "erp", "url": stack.receiver.url()}
        )
        made = await owner.api.post(
            f"/api/v1/webhooks/{hook['name']}/routes",
            json={"name": "to-erp", "destination": "erp", "transform": "erp-shape"},
        )
        assert made.status_code == 201, made.text
        await page.get_by_role("button", name="Delete erp-shape").click()
        dialog = page.get_by_role("dialog", name="Delete erp-shape?")
        await dialog.get_by_role("button", name="Delete transformation").click()
        await expect(dialog.get_by_role("alert")).to_contain_text("In use by routes")
        await expect(dialog.get_by_role("link", name=f"{hook['name']} / to-erp")).to_have_attribute(
            "href", f"/webhooks/{hook['name']}/routes"
        )
        await expect(dialog.get_by_role("button", name="Delete transformation")).to_be_disabled()
        await dialog.get_by_role("button", name="Cancel").click()
        gone = await owner.api.delete(f"/api/v1/webhooks/{hook['name']}/routes/to-erp")
        assert gone.status_code == 204, gone.text
        await page.get_by_role("button", name="Delete erp-shape").click()
        await dialog.get_by_role("button", name="Delete transformation").click()
        await page.wait_for_url(re.compile(r"/transformations$"))
        await expect(page.get_by_text("No transformations yet")).to_be_visible()
        assert await read(owner, "/api/v1/transformations") == []

    async def test_the_list_shows_name_version_and_change(
        self, stack: Stack, session: Session
    ) -> None:
        owner = await stack.owner()
        for name in ("alpha", "beta"):
            made = await owner.api.post(
                "/api/v1/transformations",
                json={"name": name, "code": "addHandler('transform', (r) => r);"},
            )
            assert made.status_code == 201, made.text
        patched = await owner.api.patch(
            "/api/v1/transformations/beta", json={"code": "addHandler('transform', (r) => r)"}
        )
        assert patched.status_code == 200, patched.text
        page = session.page
        await session.login(owner, "/transformations")
        table = page.get_by_role("table", name="Your transformations")
        await expect(table.get_by_role("row")).to_have_count(3)
        beta = table.get_by_role("row").filter(has=page.get_by_role("link", name="beta"))
        await expect(beta).to_contain_text("v2")
        await beta.get_by_role("link", name="beta").click()
        await expect(page.get_by_test_id("transformation-version")).to_contain_text("version 2")
        await page.goto("/transformations/no-such-one")
        await expect(page.get_by_role("heading", name="Page not found")).to_be_visible()


class TestTraces:
    async def test_a_deliverys_transformation_shows_on_the_event_page(
        self, stack: Stack, session: Session
    ) -> None:
        owner = await stack.owner()
        hook = await stack.webhook(owner)
        url = stack.receiver.url()
        made = await owner.api.post(
            "/api/v1/transformations",
            json={"name": "shape", "code": "addHandler('transform', (r) => {\n"
                  "  console.log('seen', r.body.n);\n  r.body = {m: r.body.n};\n  return r;\n});"},
        )  # fmt: skip
        assert made.status_code == 201, made.text
        await owner.api.post("/api/v1/destinations", json={"name": "sink", "url": url})
        routed = await owner.api.post(
            f"/api/v1/webhooks/{hook['name']}/routes",
            json={"name": "shaped", "destination": "sink", "transform": "shape"},
        )
        assert routed.status_code == 201, routed.text

        # ingest hears of the route on the change log: send until an event is routed over it
        detail: dict[str, Any] = {}

        async def traced() -> bool:
            nonlocal detail
            event = await stack.event(await stack.send(hook, b'{"n": 5}'), "success")
            detail = await read(owner, f"/api/v1/events/{event.id}")
            return any(d.get("transform") for d in detail["deliveries"])

        await until(traced, 30, interval=0.2, what="an event delivered through its transformation")
        (trace,) = [d["transform"] for d in detail["deliveries"] if d.get("transform")]
        sent = [r.body for r in stack.receiver.received(url)][-1]
        assert trace["body_sha256"] == hashlib.sha256(sent).hexdigest()

        page = session.page
        await session.login(owner, f"/events/{detail['id']}")
        shown = page.get_by_test_id("transform-trace")
        await expect(shown).to_contain_text("Route shaped ran shape version 1")
        await expect(shown.get_by_role("link", name="shape")).to_have_attribute(
            "href", "/transformations/shape"
        )
        await expect(shown.locator("code")).to_have_text(f"{trace['body_sha256'][:16]}…")
        await shown.get_by_role("button", name="Copy SHA-256").click()
        assert await page.evaluate("navigator.clipboard.readText()") == trace["body_sha256"]
        logs = shown.get_by_role("listitem")
        await expect(logs).to_be_hidden()  # in a closed <details>
        await shown.get_by_text("Console (1 line)").click()
        await expect(logs).to_have_text(["seen 5"])
        assert await serious_findings(page) == []
