"""Waiting for a condition a test brought about: polled, with a deadline, never a fixed sleep."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable


async def until(
    condition: Callable[[], bool | Awaitable[bool]],
    timeout: float = 30,
    *,
    interval: float = 0.05,
    what: str = "condition",
) -> None:
    """Poll ``condition`` (plain or async) until it holds; fail after ``timeout`` seconds."""
    try:
        async with asyncio.timeout(timeout):
            while True:
                result = condition()
                if inspect.isawaitable(result):
                    result = await result
                if result:
                    return
                await asyncio.sleep(interval)
    except TimeoutError:
        raise AssertionError(f"{what}: not within {timeout:g} s") from None
