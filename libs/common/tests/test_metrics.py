from __future__ import annotations

import urllib.request

import httpx
from prometheus_client import Counter
from prometheus_client.parser import text_string_to_metric_families

from hookbay_common.metrics import (
    LATENCY_BUCKETS,
    SIZE_BUCKETS,
    asgi_app,
    name,
    new_registry,
    serve,
)
from tests.support.net import free_port


class TestMetrics:
    def test_served_registry_is_scrapable_and_isolated(self) -> None:
        registry = new_registry()
        Counter(name("widgets_total"), "Widgets.", registry=registry).inc(3)
        Counter(
            name("widgets_total"), "Widgets.", registry=new_registry()
        )  # no clash: own registry
        port = free_port()
        serve(registry, port, addr="127.0.0.1")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            text = response.read().decode()
        assert "hookbay_widgets_total 3.0" in text

    async def test_served_from_the_loop_it_reports_the_process_and_its_tasks(self) -> None:
        samples = await _scrape(new_registry())
        assert samples["process_open_fds"] > 0
        assert samples["process_resident_memory_bytes"] > 0
        assert samples[name("asyncio_tasks")] >= 1  # this test's own task at least

    async def test_a_registry_without_the_process_has_only_its_own_metrics(self) -> None:
        registry = new_registry(process=False)
        Counter(name("widgets_total"), "Widgets.", registry=registry).inc()
        assert set(await _scrape(registry)) == {name("widgets_total"), name("widgets_created")}

    def test_buckets_are_sorted(self) -> None:
        assert list(LATENCY_BUCKETS) == sorted(LATENCY_BUCKETS)
        assert list(SIZE_BUCKETS) == sorted(SIZE_BUCKETS)
        assert SIZE_BUCKETS[-1] == 4_500_000.0


async def _scrape(registry: object) -> dict[str, float]:
    """The samples ``asgi_app(registry)`` serves, by name, scraped in this test's event loop."""
    transport = httpx.ASGITransport(app=asgi_app(registry))  # type: ignore[arg-type]
    async with httpx.AsyncClient(transport=transport, base_url="http://metrics") as client:
        response = await client.get("/metrics")
    response.raise_for_status()
    return {
        sample.name: sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }
