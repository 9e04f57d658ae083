"""The sandbox worker: ``python -m hookbay_sandbox.worker --engine quickjs
--address-space BYTES``. It lowers its own limits before it reads its first frame (no core
files, no file writes, a few file descriptors, a capped address space), then answers frames on
its stdin, one call at a time, on its stdout; anything else printing to stdout goes nowhere.
Before each call it moves its CPU rlimit to just past the call's CPU budget, so a call that
escapes the engine's own limit and the pool's deadline still dies of SIGXCPU. It exits at the
end of its stdin."""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from typing import BinaryIO

from hookbay_sandbox import protocol
from hookbay_sandbox.engine import ENGINES, Engine, Outcome, load
from hookbay_sandbox.limits import Limits
from hookbay_sandbox.model import TransformError

NOFILE = 16
CPU_BACKSTOP_SLACK_S = 2


def confine(address_space: int, *, idle: bool = False) -> None:
    """The process-wide limits; lowered hard limits cannot be raised again by this process
    (unless it runs as root, where they still bound what the engine's allocator gets). ``idle``:
    in the kernel's idle scheduling class from the start (a save-time check, which nobody waits
    on in bulk); a pool's worker runs at its host's priority, and the pool moves it to the idle
    class when one call runs long (``hookbay_sandbox.pool.DEMOTE_AFTER_S``)."""
    if idle:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NOFILE, (NOFILE, NOFILE))
    resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))


def arm_cpu_backstop(limits: Limits) -> None:
    used = resource.getrusage(resource.RUSAGE_SELF)
    spent = used.ru_utime + used.ru_stime
    soft = int(spent + limits.cpu_s + limits.margin_s) + CPU_BACKSTOP_SLACK_S
    hard = resource.getrlimit(resource.RLIMIT_CPU)[1]
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))


def private_pipes() -> tuple[BinaryIO, BinaryIO]:
    """The protocol's stdin and stdout on descriptors of their own; 0 and 1 point to
    /dev/null from then on."""
    stdin = os.fdopen(os.dup(0), "rb")
    stdout = os.fdopen(os.dup(1), "wb")
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)
    sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - lives as long as the process
    return stdin, stdout


def answer(engine: Engine, header: dict[str, object], parts: list[bytes]) -> bytes:
    limits = Limits.from_wire(header["limits"])  # type: ignore[arg-type]
    arm_cpu_backstop(limits)
    started = time.process_time()
    recycle = False
    try:
        if header.get("op") == "check":
            outcome = Outcome(None, engine.check(parts[0].decode(), limits))
        else:
            code, request_json, env_json = (part.decode() for part in parts)
            outcome = engine.run(code, request_json, env_json, limits)
    except MemoryError:
        recycle = True
        message = "the worker's address space limit was reached"
        outcome = Outcome(None, TransformError("memory", message))
    except Exception as exc:  # the engine's binding failed: answer, then start afresh
        recycle = True
        outcome = Outcome(None, TransformError("crashed", f"the engine failed: {exc}"))
    cpu_ms = (time.process_time() - started) * 1000
    reply = {
        "ok": outcome.error is None,
        "error": outcome.error.to_dict() if outcome.error else None,
        "logs": outcome.logs,
        "cpu_ms": round(cpu_ms, 3),
        "recycle": recycle,
    }
    output = []
    if outcome.output is not None and outcome.body is not None:
        output = [outcome.output.encode(), outcome.body.encode()]
    return protocol.encode(reply, output)


def serve(engine: Engine, stdin: BinaryIO, stdout: BinaryIO) -> None:
    stdout.write(protocol.encode({"op": "ready", "engine": engine.name}))
    stdout.flush()
    while True:
        try:
            header, parts = protocol.read_blocking(stdin)
        except EOFError:
            return
        stdout.write(answer(engine, header, parts))
        stdout.flush()


def main() -> None:
    parser = argparse.ArgumentParser(prog="hookbay_sandbox.worker")
    parser.add_argument("--engine", choices=ENGINES, default="quickjs")
    parser.add_argument("--address-space", type=int, required=True)
    parser.add_argument("--idle", action="store_true", help="the idle scheduling class")
    args = parser.parse_args()
    # A process group of its own (the pool kills it whole) in its host's session, not a session
    # of its own: outside a CPU cgroup (a VM, make run) Linux shares the CPU between sessions'
    # autogroups before it looks at nice or SCHED_IDLE, and a worker leading its own session took
    # half of a 2-core machine from every service while it spun (docs/decisions.md, the
    # sandbox). In its host's session its idle class yields to the host and the services started
    # beside it, and the CPU the host leaves while it waits for an answer is the worker's.
    if os.getpgid(0) != os.getpid():  # a session leader (started so) leads its group already
        os.setpgid(0, 0)
    engine = load(args.engine)
    stdin, stdout = private_pipes()
    confine(args.address_space, idle=args.idle)
    arm_cpu_backstop(Limits())
    serve(engine, stdin, stdout)


if __name__ == "__main__":
    main()
