"""Prometheus helpers: metric names are prefixed ``hookbay_``; buckets suited to each kind."""

from __future__ import annotations

from typing import Final

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.asgi import make_asgi_app

PREFIX: Final = "hookbay_"
LATENCY_BUCKETS: Final = (
    0.0005, 0.001, 0.0025, 0.005, 0.0075, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
)  # fmt: skip
SIZE_BUCKETS: Final = (*(float(2**n) for n in range(6, 24, 2)), 4_500_000.0)


def name(suffix: str) -> str:
    return PREFIX + suffix


def new_registry() -> CollectorRegistry:
    """A registry per app instance, so tests can build many apps in one process."""
    return CollectorRegistry(auto_describe=True)


def asgi_app(registry: CollectorRegistry) -> object:
    """An ASGI app serving ``registry`` in the Prometheus text format (mount at ``/metrics``)."""
    return make_asgi_app(registry)


def serve(registry: CollectorRegistry, port: int, addr: str = "0.0.0.0") -> None:
    """Serve ``/metrics`` from a background thread, for processes that are not web apps."""
    start_http_server(port, addr=addr, registry=registry)
