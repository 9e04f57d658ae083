"""Prometheus helpers: metric names are prefixed ``hookbay_``; buckets suited to each kind."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any, Final

from prometheus_client import CollectorRegistry, ProcessCollector, start_http_server
from prometheus_client.asgi import make_asgi_app
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

PREFIX: Final = "hookbay_"
LATENCY_BUCKETS: Final = (
    0.0005, 0.001, 0.0025, 0.005, 0.0075, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
)  # fmt: skip
SIZE_BUCKETS: Final = (*(float(2**n) for n in range(6, 24, 2)), 4_500_000.0)


def name(suffix: str) -> str:
    return PREFIX + suffix


class _TaskCollector(Collector):
    """``hookbay_asyncio_tasks``: the tasks alive in the event loop that serves ``/metrics``
    (a leak shows as growth; the chaos suite's soak watches it)."""

    def collect(self) -> Iterator[Metric]:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # collected outside a loop (a test, a thread): nothing to count
            return
        gauge = GaugeMetricFamily(name("asyncio_tasks"), "asyncio tasks alive in the event loop")
        gauge.add_metric([], len(asyncio.all_tasks(loop)))
        yield gauge


def new_registry(*, process: bool = True) -> CollectorRegistry:
    """A registry per app instance, so tests can build many apps in one process; with the
    process's own figures (``process_resident_memory_bytes``, ``process_open_fds``, CPU seconds)
    and ``hookbay_asyncio_tasks`` unless ``process`` is false: a registry handed over once when
    its process ends (retention's push and textfile) must not carry frozen figures of a process
    that is gone, named like node_exporter's own ``process_*``."""
    registry = CollectorRegistry(auto_describe=True)
    if process:
        ProcessCollector(registry=registry)
        registry.register(_TaskCollector())
    return registry


class _MetricsApp:
    """The Prometheus ASGI app as an object, so a Starlette ``Route`` passes it requests as an
    ASGI app (it takes a plain function for a request handler)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._app = make_asgi_app(registry)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self._app(scope, receive, send)


def asgi_app(registry: CollectorRegistry) -> Callable[..., Any]:
    """An ASGI app serving ``registry`` in the Prometheus text format, for a ``GET /metrics``
    route (a route, not a mount: a mount answers ``/metrics`` with a redirect to ``/metrics/``,
    whatever the method)."""
    return _MetricsApp(registry)


def serve(registry: CollectorRegistry, port: int, addr: str = "0.0.0.0") -> None:
    """Serve ``/metrics`` from a background thread, for processes that are not web apps."""
    start_http_server(port, addr=addr, registry=registry)
