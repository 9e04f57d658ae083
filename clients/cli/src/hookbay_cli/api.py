"""The dashboard API as the CLI uses it: one ``httpx`` client with the owner's token, and the
API's errors turned into ``ApiError`` (its status and the server's own message)."""

from __future__ import annotations

import functools
import ssl
from collections.abc import Mapping
from typing import Any, Final

import httpx

from hookbay_cli.config import Credentials

API: Final = "/api/v1"
FATAL: Final = frozenset({401, 403, 404})
"""Statuses that end a command (exit 2): retrying cannot help."""
USER_AGENT: Final = "hookbay-cli/0.1"


class ApiError(Exception):
    """The API answered ``status`` with ``message`` (the JSON error's, else the status line)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message

    @property
    def fatal(self) -> bool:
        return self.status in FATAL


@functools.cache
def tls() -> ssl.SSLContext:
    """httpx's default verifying context (``SSL_CERT_FILE``/``SSL_CERT_DIR``, else certifi),
    made once: httpx would load the CA bundle again for every client (~35 ms of CPU)."""
    return httpx.create_ssl_context()


def client(credentials: Credentials, *, timeout: float = 30.0) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=f"{credentials.server}{API}",
        headers={"Authorization": f"Bearer {credentials.token}", "User-Agent": USER_AGENT},
        timeout=timeout,
        verify=tls(),
    )


def error_of(response: httpx.Response) -> ApiError:
    """The error a non-2xx response stands for (its body must have been read)."""
    message = f"HTTP {response.status_code} {response.reason_phrase}"
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, Mapping):
        detail = body.get("message") or body.get("error") or body.get("detail")
        if isinstance(detail, str):
            message = detail
    if response.status_code == 401:
        message = f"{message}: the token is wrong, revoked or expired (hookbay login)"
    return ApiError(response.status_code, message)


async def request(http: httpx.AsyncClient, method: str, path: str, **kwargs: Any) -> Any:
    """The JSON answer of a call, or ``ApiError``."""
    response = await http.request(method, path, **kwargs)
    if response.status_code >= 400:
        raise error_of(response)
    return response.json() if response.content else None
