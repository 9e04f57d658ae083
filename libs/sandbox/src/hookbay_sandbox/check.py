"""Save-time checking of a transformation: its size, its syntax (with line and column), and that
its top level registers a handler. The top level runs, in a sandbox worker of its own under the
call limits (QuickJS-ng's ``Function`` constructor can be broken out of, so a parse that runs
nothing is not on offer), and the handler is never called."""

from __future__ import annotations

import subprocess
import sys

from hookbay_sandbox import protocol
from hookbay_sandbox.limits import CODE_MAX_BYTES, MIB, Limits
from hookbay_sandbox.model import TransformError

CHECK_LIMITS = Limits(cpu_s=0.5, memory_mb=16, margin_s=1.5)
CHECK_ADDRESS_SPACE = 256 * MIB


def check_transformation(code: str, *, engine: str = "quickjs") -> TransformError | None:
    """``None`` when ``code`` may be saved, else why not: ``too_large`` over
    ``CODE_MAX_BYTES``; ``syntax`` with the line and column; ``runtime`` when its top level
    throws or registers no handler; ``timeout`` / ``memory`` when its top level alone breaks the
    limits. Blocking (a worker process for the call, about a tenth of a second): call it from a
    thread in async code."""
    data = code.encode()
    if len(data) > CODE_MAX_BYTES:
        return TransformError(
            "too_large", f"the code is {len(data)} bytes; the limit is {CODE_MAX_BYTES}"
        )
    from hookbay_sandbox.pool import worker_env

    argv = [sys.executable, "-m", "hookbay_sandbox.worker", "--engine", engine]
    argv += ["--address-space", str(CHECK_ADDRESS_SPACE), "--idle"]
    frame = protocol.encode({"op": "check", "limits": CHECK_LIMITS.to_wire()}, (data,))
    try:
        done = subprocess.run(
            argv,
            input=frame,
            capture_output=True,
            env=worker_env(),
            timeout=CHECK_LIMITS.deadline_s + 10,  # + the worker's start-up
            check=False,
        )
    except subprocess.TimeoutExpired:
        return TransformError("timeout", "the code's top level did not finish in time")
    return _verdict(done.stdout)


def _verdict(stdout: bytes) -> TransformError | None:
    import io

    stream = io.BytesIO(stdout)
    try:
        ready, _ = protocol.read_blocking(stream)
        header, _ = protocol.read_blocking(stream)
    except (EOFError, protocol.ProtocolError):
        return TransformError("crashed", "the sandbox stopped without an answer")
    if ready.get("op") != "ready" or header.get("ok"):
        return None
    error = header["error"]
    return TransformError(error["kind"], error["message"], error.get("line"), error.get("column"))
