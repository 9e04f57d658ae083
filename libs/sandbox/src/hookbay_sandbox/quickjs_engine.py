"""The QuickJS-ng engine (the ``quickjs-ng`` package): a new runtime and context per call, the
engine's own CPU (interrupt handler), heap and stack limits, the CPU budget shared by every
step of the call."""

from __future__ import annotations

import json
import re
import time

import quickjs

from hookbay_sandbox.engine import Outcome
from hookbay_sandbox.harness import HARNESS
from hookbay_sandbox.limits import MIB, Limits
from hookbay_sandbox.model import ErrorKind, TransformError

_FRAME = re.compile(r"^\s*at (?:(\S+) \()?<input>:(\d+):(\d+)", re.M)
_SETUP_BYTES = 2 * MIB
"""Heap granted over the call's limit to read back the logs after a memory failure."""
_LOGS_CPU_S = 0.25
"""CPU for reading the logs back, whatever the call's budget left (it runs none of the owner's
code: the harness copies the lines without prototype methods)."""


class _Budget:
    """The call's CPU time left, for each engine entry in turn (QuickJS-ng's limit counts from
    the start of each entry)."""

    def __init__(self, cpu_s: float) -> None:
        self._end = time.process_time() + cpu_s

    def arm(self, context: quickjs.Context) -> None:
        context.set_time_limit(max(self._end - time.process_time(), 0.001))


class _Call:
    """One call's context: the harness installed, its entry points held from Python."""

    def __init__(self, limits: Limits, request_bytes: int) -> None:
        self.limits = limits
        self.memory = limits.engine_memory_bytes(request_bytes)
        self.context = quickjs.Context()
        self.context.set_memory_limit(self.memory)
        self.context.set_max_stack_size(limits.stack_kb * 1024)
        args = f"globalThis, {limits.log_lines}, {limits.log_bytes}, {limits.output_bytes}"
        self.context.eval(f"globalThis.__hb = ({HARNESS})({args});")
        self.run = self.context.eval("__hb[0]")
        self.registered = self.context.eval("__hb[1]")
        self.collected = self.context.eval("__hb[2]")
        self.succeeded = self.context.eval("__hb[3]")
        self.body = self.context.eval("__hb[4]")
        self.context.eval("delete globalThis.__hb;")

    def logs(self) -> list[str]:
        """The console lines so far, whatever state the context was left in."""
        self.context.set_time_limit(_LOGS_CPU_S)
        self.context.set_memory_limit(self.memory + _SETUP_BYTES)
        try:
            lines = json.loads(self.collected())
        except (quickjs.JSException, ValueError):
            return []
        return [str(line) for line in lines]


def classify(exc: Exception, limits: Limits) -> TransformError:
    """A QuickJS exception as the owner's error: the kind, the first line of the message, and
    the innermost place in the owner's code."""
    text = str(exc)
    first = text.split("\n", 1)[0]
    kind: ErrorKind = "runtime"
    if first.startswith("InternalError: interrupted"):
        return TransformError("timeout", f"the CPU time limit of {limits.cpu_s:g} s was exceeded")
    if first.startswith("InternalError: out of memory"):
        kind, first = "memory", f"the memory limit of {limits.memory_mb} MiB was exceeded"
    elif first.startswith("SyntaxError"):
        kind = "syntax"
    elif isinstance(exc, quickjs.StackOverflow) or "Maximum call stack size" in first:
        first = "RangeError: the stack limit was exceeded (too deep a recursion or nesting)"
    line, column = locate(text)
    return TransformError(kind, first, line, column)


def locate(stack: str) -> tuple[int | None, int | None]:
    """The innermost place in the owner's code a QuickJS stack names (frames of the harness's
    ``hookbay$…`` functions skipped)."""
    for found in _FRAME.finditer(stack):
        if not (found[1] or "").startswith("hookbay$"):
            return int(found[2]), int(found[3])
    return None, None


def _from_harness(payload: str, limits: Limits) -> TransformError:
    data = json.loads(payload)
    kind = data["kind"]
    if kind not in ("runtime", "invalid_output"):
        kind = "runtime"
    message = str(data["message"])
    line, column = locate(str(data.get("stack", "")))
    if message.startswith("RangeError: Maximum call stack size"):
        message = "RangeError: the stack limit was exceeded (too deep a recursion or nesting)"
    elif message.startswith("InternalError: out of memory"):
        kind, message = "memory", f"the memory limit of {limits.memory_mb} MiB was exceeded"
    return TransformError(kind, message, line, column)


class QuickJSEngine:
    """See ``Engine``. ``code`` is evaluated as a global script; the harness's functions are
    held before it runs, so the code cannot replace them."""

    name = "quickjs"

    def run(self, code: str, request_json: str, env_json: str, limits: Limits) -> Outcome:
        budget = _Budget(limits.cpu_s)
        call = _Call(limits, len(request_json))
        try:
            budget.arm(call.context)
            call.context.eval(code)
            budget.arm(call.context)
            answer = call.run(request_json, env_json)
        except quickjs.JSException as exc:
            return Outcome(None, classify(exc, limits), call.logs())
        if not isinstance(answer, str):
            return Outcome(
                None, TransformError("crashed", "the engine gave no answer"), call.logs()
            )
        if call.succeeded():
            return Outcome(answer, None, call.logs(), call.body())
        return Outcome(None, _from_harness(answer, limits), call.logs())

    def check(self, code: str, limits: Limits) -> TransformError | None:
        budget = _Budget(limits.cpu_s)
        call = _Call(limits, 0)
        try:
            budget.arm(call.context)
            call.context.eval(code)
            registered = call.registered()
        except quickjs.JSException as exc:
            return classify(exc, limits)
        if not registered:
            return TransformError(
                "runtime",
                "no handler: the code must call addHandler('transform', (request, context) => request)",
            )
        return None
