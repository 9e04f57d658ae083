from __future__ import annotations

import urllib.request

from prometheus_client import Counter

from hookbay_common.metrics import LATENCY_BUCKETS, SIZE_BUCKETS, name, new_registry, serve
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

    def test_buckets_are_sorted(self) -> None:
        assert list(LATENCY_BUCKETS) == sorted(LATENCY_BUCKETS)
        assert list(SIZE_BUCKETS) == sorted(SIZE_BUCKETS)
        assert SIZE_BUCKETS[-1] == 4_500_000.0
