"""Requests, limits and code for the transformation sandbox's tests."""

from __future__ import annotations

from hookbay_sandbox import Limits, TransformRequest

LIMITS = Limits(cpu_s=0.5, memory_mb=32, margin_s=5.0)
"""Half a second of CPU keeps spinning tests short; the wide margin keeps a busy test machine
from turning a slow but legal call into a host kill."""

IDENTITY = "addHandler('transform', (request, context) => request)"


def create_request(
    body: object = None,
    *,
    headers: dict[str, str] | None = None,
    query: str = "a=1",
    path: str = "/hooks",
) -> TransformRequest:
    return TransformRequest(
        headers=headers if headers is not None else {"content-type": "application/json"},
        body={"id": "evt_1", "amount": 10} if body is None else body,
        query=query,
        path=path,
    )
