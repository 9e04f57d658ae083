"""Private servers for failure tests: a Kafka broker or a FerretDB process of the test's own,
started, stopped and killed through ``deploy/local/infra.sh`` (data kept across restarts)."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

from tests.support.net import free_port, free_port_pair
from tests.support.waiting import until

ROOT = Path(__file__).resolve().parent.parent.parent
INFRA = ROOT / "deploy" / "local" / "infra.sh"


class PrivateServer:
    """One server of ``infra.sh`` (``kafka`` or ``ferretdb``) with its state in ``run_dir``."""

    def __init__(self, name: str, run_dir: Path, env: dict[str, str]) -> None:
        self.name = name
        self._run_dir = run_dir
        self._env = {**os.environ, "HOOKBAY_INFRA_RUN": str(run_dir), **env}

    async def _infra(self, action: str) -> None:
        """Run ``infra.sh`` without blocking the event loop (a test's receiver lives in it)."""
        proc = await asyncio.create_subprocess_exec(
            str(INFRA), action, self.name, env=self._env, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )  # fmt: skip
        async with asyncio.timeout(180):
            output, _ = await proc.communicate()
        assert proc.returncode == 0, f"infra.sh {action} {self.name}: {output.decode()[-2000:]}"

    async def up(self) -> None:
        """Start it (its data kept from before) and return once it answers."""
        await self._infra("up")

    async def down(self) -> None:
        """Stop it gracefully (SIGTERM, as an orchestrator would)."""
        await self._infra("down")

    async def kill(self) -> None:
        """``kill -9``: no shutdown at all; ``up`` then sees the recorded process gone."""
        pid = int((self._run_dir / f"{self.name}.pid").read_text())
        os.killpg(pid, signal.SIGKILL)  # its session: the server and anything it started
        await until(lambda: not _alive(pid), timeout=20, what=f"{self.name} gone after kill -9")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


class PrivateBroker(PrivateServer):
    def __init__(self, run_dir: Path) -> None:
        self.port = free_port_pair()  # the listener and, next to it, the KRaft controller
        self.bootstrap = f"127.0.0.1:{self.port}"
        super().__init__("kafka", run_dir, {"HOOKBAY_INFRA_KAFKA_PORT": str(self.port)})


class PrivateFerretDB(PrivateServer):
    """A FerretDB process of the test's own over the test infrastructure's PostgreSQL (the
    production backend; the PostgreSQL server is shared and stays up): stopping it takes the
    MongoDB endpoint away, starting it brings the same data back."""

    def __init__(self, run_dir: Path) -> None:
        self.port = free_port()
        self.url = f"mongodb://127.0.0.1:{self.port}"
        super().__init__(
            "ferretdb", run_dir,
            {"HOOKBAY_INFRA_MONGO_PORT": str(self.port), "HOOKBAY_FERRETDB_BACKEND": "postgresql",
             "HOOKBAY_INFRA_PG_EXTERNAL": "1"},
        )  # fmt: skip
