"""Write-ups of measurements in ``docs/``: the benchmarks' and the chaos suite's generated blocks
and the machine they ran on."""

from __future__ import annotations

import contextlib
import os
import platform
from pathlib import Path


def write_doc_block(doc: Path, begin: str, end: str, heading: str, block: str) -> None:
    """Put ``block`` (which starts with ``begin`` and ends with ``end``) in ``doc`` in place of
    the previous one; the first time, append it under ``heading``. Text outside stays."""
    text = doc.read_text() if doc.exists() else "# Benchmarks\n"
    if begin in text and end in text:
        before, rest = text.split(begin, 1)
        doc.write_text(before + block + rest.split(end, 1)[1])
        return
    doc.write_text(text.rstrip("\n") + f"\n\n{heading}\n\n" + block + "\n")


def machine() -> str:
    """Cores, CPU model, memory and kernel of this machine, for a benchmark's write-up."""
    mem_kib = 0
    with contextlib.suppress(OSError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_kib = int(line.split()[1])
    model = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    gib = round(mem_kib / 1024 / 1024)
    return (
        f"{os.cpu_count()} cores ({model or platform.machine()}), {gib} GiB RAM, "
        f"{platform.system()} {platform.release()}, loopback (127.0.0.1) only"
    )
