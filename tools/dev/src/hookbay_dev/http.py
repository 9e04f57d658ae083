"""HTTP clients for the harnesses: one TLS context for all of them.

httpx builds a new TLS context (the CA bundle loaded again, ~35 ms of CPU) for every client it
makes; the harnesses make a client per probe and per request, thousands in a test run. They
share this one, built by httpx as it builds its own (``SSL_CERT_FILE``/``SSL_CERT_DIR``, else
certifi), so a shared client verifies exactly as a fresh one would.
"""

from __future__ import annotations

import functools
import ssl
from typing import Any

import httpx


@functools.cache
def tls() -> ssl.SSLContext:
    """httpx's default verifying context, made once per process."""
    return httpx.create_ssl_context()


def async_client(**kwargs: Any) -> httpx.AsyncClient:
    """``httpx.AsyncClient(**kwargs)`` verifying with the shared context."""
    kwargs.setdefault("verify", tls())
    return httpx.AsyncClient(**kwargs)


def client(**kwargs: Any) -> httpx.Client:
    """``httpx.Client(**kwargs)`` verifying with the shared context."""
    kwargs.setdefault("verify", tls())
    return httpx.Client(**kwargs)
