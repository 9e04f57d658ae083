"""Destinations and a webhook's routes in the dashboard, against the real stack: a destination
created, listed, paused and resumed, its refused fields shown beside them, a write-only header
kept; a route's filter checked while it is typed (the syntax here, its meaning by the server),
its dry run judging real stored events; a transformation chosen and removed; a delay typed
(refused beside its field when out of range) and removed; order, enable /
disable, delete; another owner's destination and routes are a not-found page."""

from __future__ import annotations

import json
import re
from typing import Any

from playwright.async_api import Page, expect

from tests.browser.conftest import Owner, Session, Stack
from tests.support.receiver import Reply
from tests.support.waiting import until

ACCESSIBLE_INVALID = "true"


async def destination(owner: Owner, name: str, url: str, **fields: Any) -> dict[str, Any]:
    response = await owner.api.post(
        "/api/v1/destinations", json={"name": name, "url": url, **fields}
    )
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


async def route(owner: Owner, webhook: str, name: str, dest: str, **fields: Any) -> dict[str, Any]:
    body = {"name": name, "destination": dest, **fields}
    response = await owner.api.post(f"/api/v1/webhooks/{webhook}/routes", json=body)
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


async def read(owner: Owner, path: str) -> Any:
    response = await owner.api.get(path)
    assert response.status_code == 200, response.text
    return response.json()


def row(page: Page, name: str) -> Any:
    return page.get_by_role("row").filter(has=page.get_by_role("cell", name=name, exact=True))


class TestDestinations:
    async def test_a_destination_is_created_listed_paused_and_resumed(
        self, stack: Stack, session: Session
    ) -> None:
        owner = await stack.owner()
        page = session.page
        await session.login(owner, "/destinations")
        await expect(page.get_by_text("No destinations yet")).to_be_visible()

        form = page.get_by_role("form", name="New destination")
        await form.get_by_label("Name", exact=True).fill("billing")
        await form.get_by_label("URL", exact=True).fill(stack.receiver.url())
        await form.get_by_label("Max concurrency").fill("1")
        await form.get_by_label("Rate limit (requests; empty: no limit)").fill("5")
        await form.get_by_label("Per", exact=True).select_option("minute")
        await form.get_by_label("Retry schedule").fill("0, 10s, 1m")
        await form.get_by_role("button", name="Add header").click()
        await form.get_by_label("Header 1 name").fill("Authorization")
        await form.get_by_label("Header 1 value").fill("Bearer s3cret")
        await form.get_by_role("button", name="Create destination").click()

        listed = row(page, "billing")
        await expect(listed.get_by_test_id("destination-state")).to_have_text(re.compile("Active"))
        await expect(listed).to_contain_text("5 / minute")
        await expect(listed).to_contain_text("1 (in order)")
        stored = await read(owner, "/api/v1/destinations/billing")
        assert stored["headers"] == {"authorization": "********"}
        assert stored["retry_schedule"] == ["0", "10s", "1m"]
        assert (stored["rate_limit"], stored["max_concurrency"]) == (
            {"count": 5, "period": "minute"}, 1,
        )  # fmt: skip

        await listed.get_by_role("button", name="Pause billing").click()
        dialog = page.get_by_role("dialog", name="Pause billing?")
        await expect(dialog).to_contain_text("held, never discarded")
        await dialog.get_by_role("button", name="Pause destination").click()
        await expect(listed.get_by_test_id("destination-state")).to_have_text(
            re.compile(r"Paused.*paused by you")
        )
        stored = await read(owner, "/api/v1/destinations/billing")
        assert (stored["state"], stored["state_reason"]) == ("paused", "manual")

        await listed.get_by_role("button", name="Resume billing").click()
        await (
            page.get_by_role("dialog", name="Resume billing?")
            .get_by_role("button", name="Resume destination")
            .click()
        )
        await expect(listed.get_by_test_id("destination-state")).to_have_text(re.compile("Active"))
        stored = await read(owner, "/api/v1/destinations/billing")
        assert (stored["state"], stored["state_reason"]) == ("active", None)

    async def test_a_refused_url_is_shown_beside_its_field(
        self, stack: Stack, session: Session
    ) -> None:
        owner = await stack.owner()
        page = session.page
        await session.login(owner, "/destinations")
        form = page.get_by_role("form", name="New destination")
        await form.get_by_label("Name", exact=True).fill("legacy")
        url = form.get_by_label("URL", exact=True)
        await url.fill("ftp://files.example.com/drop")
        await form.get_by_role("button", name="Create destination").click()

        await expect(url).to_have_attribute("aria-invalid", ACCESSIBLE_INVALID)
        await expect(url).to_have_accessible_description(re.compile("http:// or https://"))
        await expect(form.get_by_role("alert")).to_have_text("Not saved: see the fields marked.")
        await expect(form.get_by_label("Timeout (seconds)")).to_have_attribute(
            "aria-invalid", "false"
        )
        assert await read(owner, "/api/v1/destinations") == []

    async def test_an_edit_sends_a_write_only_header_back_masked(
        self, stack: Stack, session: Session
    ) -> None:
        owner = await stack.owner()
        await destination(
            owner, "analytics", stack.receiver.url(), headers={"x-api-key": "k-123"}, timeout_s=10
        )
        page = session.page
        await session.login(owner, "/destinations/analytics")
        form = page.get_by_role("form", name="Settings of analytics")
        await expect(form.get_by_label("Header 1 name")).to_have_value("x-api-key")
        await expect(form.get_by_label("Header 1 value")).to_have_value("********")
        # the page has drawn all it loads (its Health figures come from a request of their own,
        # and move the form down when they arrive) before a field is edited and saved
        await expect(page.get_by_test_id("held-count")).to_have_text("0")
        await form.get_by_label("Timeout (seconds)").fill("30")
        async with page.expect_response(
            lambda r: r.request.method == "PATCH"
            and r.url.endswith("/api/v1/destinations/analytics")
        ) as answered:
            await form.get_by_role("button", name="Save destination").click()
        response = await answered.value
        body = json.loads(response.request.post_data or "{}")
        assert (body["timeout_s"], body["headers"]) == (30, {"x-api-key": "********"})
        assert response.status == 200
        # the whole definition: the breaker's "after 30 s, doubling …" holds "30 s" too
        await expect(
            page.get_by_role("definition").filter(has_text=re.compile(r"^30 s$"))
        ).to_be_visible()
        stored = await read(owner, "/api/v1/destinations/analytics")
        assert (stored["timeout_s"], stored["headers"]) == (30, {"x-api-key": "********"})

    async def test_deleting_a_destination_in_use_names_its_routes(
        self, stack: Stack, session: Session
    ) -> None:
        owner = await stack.owner()
        hook = await stack.webhook(owner)
        await destination(owner, "erp", stack.receiver.url())
        await route(owner, hook["name"], "orders-to-erp", "erp")
        page = session.page
        await session.login(owner, "/destinations")
        await row(page, "erp").get_by_role("button", name="Delete erp").click()
        dialog = page.get_by_role("dialog", name="Delete erp?")
        await dialog.get_by_role("button", name="Delete destination").click()
        await expect(dialog.get_by_role("alert")).to_contain_text("In use by routes")
        link = dialog.get_by_role("link", name=f"{hook['name']} / orders-to-erp")
        await expect(link).to_have_attribute("href", f"/webhooks/{hook['name']}/routes")
        await expect(dialog.get_by_role("button", name="Delete destination")).to_be_disabled()
        assert [d["name"] for d in await read(owner, "/api/v1/destinations")] == ["erp"]

    async def test_another_owners_destination_and_routes_are_not_found(
        self, stack: Stack, session: Session
    ) -> None:
        alice = await stack.owner()
        hook = await stack.webhook(alice)
        await destination(alice, "private-dest", stack.receiver.url())
        await route(alice, hook["name"], "secret-route", "private-dest")
        mallory = await stack.owner()
        page = session.page
        await session.login(mallory, "/destinations/private-dest")
        await expect(page.get_by_role("heading", name="Page not found")).to_be_visible()
        await page.goto(f"/webhooks/{hook['name']}/routes")
        await expect(page.get_by_role("heading", name="Page not found")).to_be_visible()
        await expect(page.get_by_text("secret-route")).to_have_count(0)
        await page.goto("/destinations")
        await expect(page.get_by_text("No destinations yet")).to_be_visible()
        await expect(page.get_by_text("private-dest")).to_have_count(0)


class TestRoutes:
    async def test_a_filtered_route_is_checked_as_typed_and_dry_run_on_stored_events(
        self, stack: Stack, session: Session
    ) -> None:
        owner = await stack.owner()
        hook = await stack.webhook(owner)
        await destination(owner, "billing", stack.receiver.url())
        paid = await stack.send(hook, b'{"type": "invoice.paid", "amount": 1200}')
        refunded = await stack.send(hook, b'{"type": "charge.refunded", "amount": 50}')
        paid_event = await stack.event(paid)
        await stack.event(refunded)
        page = session.page
        name = hook["name"]
        await session.login(owner, f"/webhooks/{name}/routes")
        await expect(page.get_by_text("No routes yet.")).to_be_visible()
        await page.get_by_role("button", name="New route").click()
        form = page.get_by_role("form", name="New route")
        await form.get_by_label("Name", exact=True).fill("invoices")
        editor = form.get_by_label("Filter (JSON)")
        status = form.get_by_test_id("filter-status")

        # typed key by key: the syntax is judged locally while it is incomplete...
        await editor.press_sequentially('{"body": {"type": {"$startWith"')
        await expect(status).to_contain_text("JSON syntax")
        await expect(editor).to_have_attribute("aria-invalid", "true")
        # ...and once it parses, the server judges the operator (a dry run of the unsaved route)
        await editor.press_sequentially(': "invoice."}}}')
        await expect(status).to_contain_text("/body/type/$startWith")
        await expect(status).to_contain_text("unknown operator $startWith")
        await expect(editor).to_have_accessible_description(re.compile(r"\$startWith"))

        await editor.fill('{"body": {"type": {"$startsWith": "invoice."}}}')
        await expect(status).to_have_text(re.compile("The filter is valid"))
        await expect(editor).to_have_attribute("aria-invalid", "false")
        panel = form.get_by_role("region", name="Dry run")
        await expect(panel.get_by_test_id("dry-run-summary")).to_have_text(
            re.compile("^1 of 2 matched")
        )
        matched = panel.get_by_role("row").filter(has_text=paid)
        await expect(matched).to_contain_text("Matched")
        not_matched = panel.get_by_role("row").filter(has_text=refunded)
        await expect(not_matched).to_contain_text("Not matched")
        await expect(not_matched).to_contain_text(
            'body.type: "charge.refunded" is not $startsWith "invoice." (filter /body/type/$startsWith)'
        )
        await expect(matched.get_by_role("link", name=paid)).to_have_attribute(
            "href", f"/events/{paid_event.id}"
        )

        await form.get_by_role("button", name="Create route").click()
        listed = row(page, "invoices")
        await expect(listed).to_contain_text("billing")
        await expect(listed).to_contain_text("Enabled")
        await expect(listed).to_contain_text('{"body":{"type":{"$startsWith":"invoice."}}}')
        (saved,) = await read(owner, f"/api/v1/webhooks/{name}/routes")
        assert (saved["name"], saved["destination"], saved["enabled"]) == (
            "invoices",
            "billing",
            True,
        )
        assert saved["filter"] == {"body": {"type": {"$startsWith": "invoice."}}}

        # a dry-run row leads to its event
        await listed.get_by_role("button", name="Edit invoices").click()
        edit = page.get_by_role("form", name="Edit route invoices")
        await edit.get_by_role("region", name="Dry run").get_by_role("link", name=paid).click()
        await page.wait_for_url(f"**/events/{paid_event.id}")
        await expect(page.get_by_text(paid).first).to_be_visible()

    async def test_a_route_runs_one_of_the_owners_transformations(
        self, stack: Stack, session: Session
    ) -> None:
        owner = await stack.owner()
        hook = await stack.webhook(owner)
        name = hook["name"]
        await destination(owner, "erp", stack.receiver.url())
        made = await owner.api.post(
            "/api/v1/transformations",
            json={"name": "erp-shape", "code": "addHandler('transform', (r) => r);"},
        )
        assert made.status_code == 201, made.text
        page = session.page
        await session.login(owner, f"/webhooks/{name}/routes")
        await page.get_by_role("button", name="New route").click()
        form = page.get_by_role("form", name="New route")
        await form.get_by_label("Name", exact=True).fill("to-erp")
        await form.get_by_label("Transformation").select_option("erp-shape")
        await form.get_by_role("button", name="Create route").click()
        listed = row(page, "to-erp")
        await expect(listed).to_contain_text("erp-shape")
        (saved,) = await read(owner, f"/api/v1/webhooks/{name}/routes")
        assert saved["transform"] == "erp-shape"

        await listed.get_by_role("button", name="Edit to-erp").click()
        edit = page.get_by_role("form", name="Edit route to-erp")
        await expect(edit.get_by_label("Transformation")).to_have_value("erp-shape")
        await edit.get_by_label("Transformation").select_option("")
        await edit.get_by_role("button", name="Save route").click()
        await expect(row(page, "to-erp")).not_to_contain_text("erp-shape")
        (saved,) = await read(owner, f"/api/v1/webhooks/{name}/routes")
        assert saved["transform"] is None

    async def test_a_dry_run_shows_each_transformed_body_as_a_diff(
        self, stack: Stack, session: Session
    ) -> None:
        owner = await stack.owner()
        hook = await stack.webhook(owner)
        name = hook["name"]
        await destination(owner, "erp", stack.receiver.url())
        code = {
            "erp-shape": "addHandler('transform', (r) => { r.body.total = r.body.amount * 100; "
            "delete r.body.amount; return r; });",
            "broken": "addHandler('transform', (r) => {\n  throw new Error('no ERP id');\n});",
        }
        for transformation, source in code.items():
            made = await owner.api.post(
                "/api/v1/transformations", json={"name": transformation, "code": source}
            )
            assert made.status_code == 201, made.text
        sent = await stack.send(hook, b'{"type": "invoice.paid", "amount": 12}')
        await stack.event(sent)
        page = session.page
        await session.login(owner, f"/webhooks/{name}/routes")
        await page.get_by_role("button", name="New route").click()
        form = page.get_by_role("form", name="New route")
        await form.get_by_label("Name", exact=True).fill("to-erp")
        panel = form.get_by_role("region", name="Dry run")
        await expect(panel.get_by_role("row").filter(has_text=sent)).to_contain_text("Matched")
        await expect(panel.get_by_role("columnheader", name="Transformed")).to_have_count(0)

        await form.get_by_label("Transformation").select_option("erp-shape")
        shown = panel.get_by_role("row").filter(has_text=sent)
        await shown.get_by_text("erp-shape v1: body diff").click()
        diff = shown.get_by_test_id("body-diff")
        await expect(shown.get_by_text("1 line added, 1 line removed.", exact=True)).to_be_visible()
        await expect(diff.locator("del")).to_have_text(re.compile(r'"amount": 12'))
        await expect(diff.locator("ins")).to_have_text(re.compile(r'"total": 1200'))

        await form.get_by_label("Transformation").select_option("broken")
        await expect(panel.get_by_role("row").filter(has_text=sent)).to_contain_text(
            re.compile(r"Failed \(line 2:\d+\): .*no ERP id")
        )

    async def test_a_route_delays_its_deliveries(self, stack: Stack, session: Session) -> None:
        owner = await stack.owner()
        hook = await stack.webhook(owner)
        name = hook["name"]
        await destination(owner, "erp", stack.receiver.url())
        page = session.page
        await session.login(owner, f"/webhooks/{name}/routes")
        await page.get_by_role("button", name="New route").click()
        form = page.get_by_role("form", name="New route")
        await form.get_by_label("Name", exact=True).fill("later")
        delay = form.get_by_label("Delay", exact=True)
        await delay.fill("soon")
        await expect(delay).to_have_attribute("aria-invalid", ACCESSIBLE_INVALID)
        await expect(form).to_contain_text("Give e.g. 30s, 5m, 2h")
        await delay.fill("25h")
        await form.get_by_role("button", name="Create route").click()
        await expect(delay).to_have_attribute("aria-invalid", ACCESSIBLE_INVALID)
        await expect(form).to_contain_text("less than or equal to 86400")
        await delay.fill("5m")
        await form.get_by_role("button", name="Create route").click()
        await expect(row(page, "later")).to_contain_text("5m")
        (saved,) = await read(owner, f"/api/v1/webhooks/{name}/routes")
        assert saved["delay_s"] == 300

        await row(page, "later").get_by_role("button", name="Edit later").click()
        edit = page.get_by_role("form", name="Edit route later")
        await expect(edit.get_by_label("Delay", exact=True)).to_have_value("5m")
        await edit.get_by_label("Delay", exact=True).fill("")
        await edit.get_by_role("button", name="Save route").click()
        await expect(row(page, "later")).not_to_contain_text("5m")
        (saved,) = await read(owner, f"/api/v1/webhooks/{name}/routes")
        assert saved["delay_s"] is None

    async def test_a_routes_deduplication_is_set_checked_and_dry_run(
        self, stack: Stack, session: Session
    ) -> None:
        owner = await stack.owner()
        hook = await stack.webhook(owner)
        name = hook["name"]
        await destination(owner, "sink", stack.receiver.url())
        keyed = await stack.send(hook, b'{"id": "evt_b1"}')
        keyless = await stack.send(hook, b'{"type": "ping"}')
        await stack.event(keyed)
        await stack.event(keyless)
        page = session.page
        await session.login(owner, f"/webhooks/{name}/routes")
        await page.get_by_role("button", name="New route").click()
        form = page.get_by_role("form", name="New route")
        await form.get_by_label("Name", exact=True).fill("once")
        section = form.get_by_role("group", name="Deduplication")
        await section.get_by_label("Key", exact=True).select_option("preset")
        await section.get_by_label("Provider").select_option("stripe")
        await section.get_by_label("Window", exact=True).fill("2")
        await section.get_by_label("Window unit").select_option("hours")
        panel = form.get_by_role("region", name="Dry run")
        await expect(panel.get_by_role("row").filter(has_text=keyed)).to_contain_text(
            'body.id="evt_b1"'
        )
        await expect(panel.get_by_role("row").filter(has_text=keyless)).to_contain_text(
            "no key (body.id missing)"
        )

        # the server judges the rule as it is typed: a bad path is shown in the section
        await section.get_by_label("Key", exact=True).select_option("fields")
        fields = section.get_by_label("Key fields")
        await fields.fill("id")
        await expect(section).to_contain_text("fields.0: Value error, the field 'id' must start")
        await expect(fields).to_have_attribute("aria-invalid", ACCESSIBLE_INVALID)
        await fields.fill("body.id")
        await expect(section).not_to_contain_text("fields.0")
        await form.get_by_role("button", name="Create route").click()
        listed = row(page, "once")
        await expect(listed).to_contain_text("body.id, 2 hours")
        (saved,) = await read(owner, f"/api/v1/webhooks/{name}/routes")
        assert saved["dedupe"] == {"window_s": 7200, "preset": None, "fields": ["body.id"]}

        # delivered once: the second event with the key is deduplicated, naming the first
        first: dict[str, Any] = {}
        probes = 0

        async def routed() -> bool:
            nonlocal first, probes
            probes += 1
            body = json.dumps({"id": f"evt_first_{probes}"}).encode()
            event = await stack.event(await stack.send(hook, body), "success")
            first = await read(owner, f"/api/v1/events/{event.id}")
            return len(first["deliveries"]) == 1

        await until(routed, 30, interval=0.2, what="an event routed over the new route")
        again = json.dumps({"id": f"evt_first_{probes}"}).encode()
        duplicate = await stack.event(await stack.send(hook, again), "success")
        detail = await read(owner, f"/api/v1/events/{duplicate.id}")
        assert [(d["status"], d["reason"]) for d in detail["deliveries"]] == [
            ("deduplicated", f"duplicate of {first['id']}")
        ]
        await page.goto(f"/events/{duplicate.id}")
        rows = page.get_by_role("table", name="The event's deliveries, one per route")
        dropped = rows.get_by_role("row").filter(has_text="sink")
        await expect(dropped).to_contain_text("deduplicated")
        await expect(dropped).to_contain_text(f"duplicate of {first['id']}")
        await dropped.get_by_role("link", name=first["id"]).click()
        await page.wait_for_url(f"**/events/{first['id']}")

        await page.goto(f"/webhooks/{name}/routes")
        await row(page, "once").get_by_role("button", name="Edit once").click()
        edit = page.get_by_role("form", name="Edit route once")
        await edit.get_by_label("Key", exact=True).select_option("none")
        await edit.get_by_role("button", name="Save route").click()
        await expect(row(page, "once")).not_to_contain_text("body.id")
        (saved,) = await read(owner, f"/api/v1/webhooks/{name}/routes")
        assert saved["dedupe"] is None

    async def test_routes_are_moved_disabled_and_deleted(
        self, stack: Stack, session: Session
    ) -> None:
        owner = await stack.owner()
        hook = await stack.webhook(owner)
        name = hook["name"]
        await destination(owner, "sink", stack.receiver.url())
        for route_name in ("first", "second", "third"):
            await route(owner, name, route_name, "sink")
        page = session.page
        await session.login(owner, f"/webhooks/{name}/routes")

        async def order() -> list[str]:
            return [r["name"] for r in await read(owner, f"/api/v1/webhooks/{name}/routes")]

        await row(page, "third").get_by_role("button", name="Move third up").click()
        await expect(row(page, "third").get_by_role("cell").first).to_have_text("2")
        assert await order() == ["first", "third", "second"]
        await expect(page.get_by_role("button", name="Move first up")).to_be_disabled()

        await row(page, "first").get_by_role("button", name="Disable first").click()
        await expect(row(page, "first")).to_contain_text("Disabled")
        routes = await read(owner, f"/api/v1/webhooks/{name}/routes")
        assert [r["enabled"] for r in routes] == [False, True, True]

        await row(page, "second").get_by_role("button", name="Delete second").click()
        await (
            page.get_by_role("dialog", name="Delete route second?")
            .get_by_role("button", name="Delete route")
            .click()
        )
        await expect(row(page, "second")).to_have_count(0)
        assert await order() == ["first", "third"]

    async def test_a_forward_urls_route_and_destination_change_only_on_the_webhook(
        self, stack: Stack, session: Session
    ) -> None:
        owner = await stack.owner()
        hook = await stack.webhook(owner, forward_url=stack.receiver.url())
        name = hook["name"]
        await destination(owner, "sink", stack.receiver.url())
        await route(owner, name, "mine", "sink")
        page = session.page
        await session.login(owner, f"/webhooks/{name}/routes")
        forward = row(page, "forward_url")
        await expect(forward).to_contain_text("the webhook's forward URL")
        await expect(forward.get_by_role("button", name="Delete forward_url")).to_have_count(0)
        await expect(forward.get_by_role("button", name="Edit forward_url")).to_have_count(0)
        await forward.get_by_role("button", name="Move forward_url down").click()
        await expect(row(page, "mine").get_by_role("cell").first).to_have_text("1")
        await expect(row(page, "mine").get_by_role("button", name="Delete mine")).to_be_visible()

        await page.get_by_role("button", name="New route").click()
        options = page.get_by_label("Destination", exact=True).locator("option")
        await expect(options).to_have_text(["sink"])  # not the forward URL's

        await forward.get_by_role("link", name=f"{name}.forward_url").click()
        await expect(page.get_by_text("The forward URL of webhook")).to_be_visible()
        await expect(page.get_by_role("button", name=f"Delete {name}.forward_url")).to_have_count(0)
        await expect(page.get_by_label("URL", exact=True)).to_have_attribute("readonly", "")
        await page.get_by_role("button", name=f"Pause {name}.forward_url").click()
        await page.get_by_role("button", name="Pause destination").click()
        await expect(page.get_by_test_id("destination-state")).to_contain_text("Paused")
        paused = await read(owner, f"/api/v1/destinations/{name}.forward_url")
        assert paused["state"] == "paused"


class TestDeliveries:
    async def test_an_events_deliveries_are_rows_on_its_page(
        self, stack: Stack, session: Session
    ) -> None:
        owner = await stack.owner()
        hook = await stack.webhook(owner)
        name = hook["name"]
        await destination(owner, "billing", stack.receiver.url())
        await destination(owner, "audit", stack.receiver.url())
        await route(owner, name, "all", "billing")
        await route(owner, name, "refunds", "audit",
                    filter={"body": {"type": "refund"}})  # fmt: skip

        # ingest hears of the routes on the change log (milliseconds): until it has, an event
        # is not routed; send until one is
        detail: dict[str, Any] = {}

        async def routed() -> bool:
            nonlocal detail
            event = await stack.event(await stack.send(hook, b'{"type": "order"}'), "success")
            detail = await read(owner, f"/api/v1/events/{event.id}")
            return len(detail["deliveries"]) == 2

        await until(routed, 30, interval=0.2, what="an event routed over both routes")
        page = session.page
        await session.login(owner, f"/events/{detail['id']}")

        rows = page.get_by_role("table", name="The event's deliveries, one per route")
        await expect(rows.get_by_role("row")).to_have_count(3)
        delivered = rows.get_by_role("row").filter(has_text="billing")
        await expect(delivered).to_contain_text("success")
        await expect(delivered).to_contain_text("(last: HTTP 200)")
        filtered = rows.get_by_role("row").filter(has_text="audit")
        await expect(filtered).to_contain_text("filtered")
        await expect(filtered).to_contain_text('"order"')
        await expect(filtered.get_by_role("button")).to_have_count(0)

        # a delivered one can be sent again on its own: its count of attempts grows
        await delivered.get_by_role("button", name="Retry the delivery over all").click()
        await expect(delivered).to_contain_text("2 (last: HTTP 200)", timeout=30_000)
        await expect(filtered).to_contain_text("filtered")

    async def test_a_destinations_failed_deliveries_are_retried_from_its_page(
        self, stack: Stack, session: Session
    ) -> None:
        owner = await stack.owner()
        hook = await stack.webhook(owner)
        url = stack.receiver.url(Reply(status=400, body=b"not yet"))  # then 200
        await destination(owner, "flaky", url)
        await route(owner, hook["name"], "all", "flaky")

        # until ingest knows the route (the change log) an event is not routed; send until one
        # is. The first routed event is the one flaky answers 400: its delivery may be recorded
        # after the event, so the event's own ``routed`` mark decides, not its deliveries.
        request_id = ""

        async def routed() -> bool:
            nonlocal request_id
            event = await stack.event(await stack.send(hook, b'{"n": 1}'))
            request_id = event.request_id
            return event.routed

        await until(routed, 30, interval=0.2, what="an event routed to flaky")
        await stack.event(request_id, "failed")
        page = session.page
        await session.login(owner, "/destinations/flaky")
        await page.get_by_role("button", name="Retry failed deliveries to flaky").click()
        dialog = page.get_by_role("dialog", name="Retry failed deliveries to flaky?")
        await dialog.get_by_role("button", name="Retry failed deliveries").click()
        await expect(page.get_by_test_id("live-region")).to_have_text(
            "1 failed delivery to flaky sent again"
        )
        await stack.event(request_id, "success")
        assert [r.body for r in stack.receiver.received(url)] == [b'{"n": 1}'] * 2
