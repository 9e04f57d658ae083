"""The one interface a JavaScript engine sits behind, inside a sandbox worker process. The
worker's protocol, the pool and the output checks know no engine; swapping QuickJS-ng for
another engine is a new module implementing ``Engine`` and its name in ``ENGINES``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from hookbay_sandbox.limits import Limits
from hookbay_sandbox.model import TransformError


@dataclass(slots=True)
class Outcome:
    """What the engine made of one call: ``output`` (the returned request's headers, query and
    path as JSON text) and ``body`` (its body's JSON text), or an ``error``; the ``logs``
    captured either way."""

    output: str | None
    error: TransformError | None
    logs: list[str] = field(default_factory=list)
    body: str | None = None


class Engine(Protocol):
    """Runs owners' code, one call at a time, each in a context of its own: nothing a call
    leaves behind (globals, changed prototypes, pending promises) is visible to the next. The
    engine enforces the call's CPU, memory, stack and output limits itself; the host enforces
    them again around it (the worker's rlimits, the pool's deadline)."""

    name: str

    def run(self, code: str, request_json: str, env_json: str, limits: Limits) -> Outcome:
        """Evaluate ``code`` (which registers a handler), call the handler with the request and
        ``{env}``, return what it returned as JSON, or why not."""
        ...

    def check(self, code: str, limits: Limits) -> TransformError | None:
        """Evaluate ``code``'s top level under ``limits`` and confirm it registered a handler;
        the handler is not called."""
        ...


def load(name: str) -> Engine:
    """The engine called ``name`` (imported only here, inside a worker)."""
    if name == "quickjs":
        from hookbay_sandbox.quickjs_engine import QuickJSEngine

        return QuickJSEngine()
    raise ValueError(f"unknown transformation engine {name!r}")


ENGINES = ("quickjs",)
