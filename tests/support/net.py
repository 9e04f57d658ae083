"""Loopback ports for processes a test starts.

Ports come from below the kernel's ephemeral range (``ip_local_port_range``), never from it: a
server a test stops and starts again (a private Kafka broker, FerretDB) must find its port free on
restart, and a port in the ephemeral range can meanwhile be taken as the local end of any outgoing
connection on the machine, which ``bind`` then refuses ("Address already in use"). Each pytest-xdist
worker draws from its own slice, so two workers never race for one port.
"""

from __future__ import annotations

import os
import random
import socket
from pathlib import Path

_FLOOR = 20000  # above the fixed ports of the shared infrastructure (15433, 16379, 19092, ...)


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _slice() -> range:
    """This worker's ports: the span below the ephemeral range split among the xdist workers."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    index = int(worker[2:]) if worker[2:].isdigit() else 0
    top = max(_ephemeral_low(), _FLOOR + 2000)
    width = (top - _FLOOR) // max(workers, 1)
    start = _FLOOR + index % max(workers, 1) * width
    return range(start, start + width - 1)  # - 1: room for free_port_pair's successor


_rng = random.Random()


def _bindable(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    ports = _slice()
    for _ in range(200):
        port = _rng.choice(ports)
        if _bindable(port):
            return port
    raise RuntimeError(f"no free port on 127.0.0.1 in {ports.start}-{ports.stop}")


def free_port_pair() -> int:
    """A free port whose successor is free too (Kafka's controller listens on port + 1)."""
    for _ in range(200):
        port = free_port()
        if _bindable(port + 1):
            return port
    raise RuntimeError("no free port pair on 127.0.0.1")


def accepts_connections(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False
