"""deploy/local/infra.sh: idempotent, clear about conflicts, and a broker formatted correctly."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
INFRA = ROOT / "deploy" / "local" / "infra.sh"
RUN_DIR = Path(os.environ.get("HOOKBAY_INFRA_RUN", ROOT / ".cache" / "run"))


def infra(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(INFRA), *args], capture_output=True, text=True, env={**os.environ, **env}, timeout=120
    )


class TestInfra:
    def test_up_when_running_is_a_quick_no_op(self) -> None:
        started = time.monotonic()
        result = infra("up")
        assert result.returncode == 0, result.stderr
        assert "kafka already running" in result.stderr
        assert "ferretdb already running" in result.stderr
        assert "redis already running" in result.stderr
        if os.environ.get("HOOKBAY_FERRETDB_BACKEND", "postgresql") == "postgresql":
            assert "postgres already running" in result.stderr
        assert time.monotonic() - started < 10

    def test_status(self) -> None:
        lines = infra("status").stdout.splitlines()
        backend = os.environ.get("HOOKBAY_FERRETDB_BACKEND", "postgresql")
        names = ["kafka", "ferretdb", "redis"] + (["postgres"] if backend == "postgresql" else [])
        assert len(lines) == len(names)
        for name in names:
            assert any(re.fullmatch(rf"{name}: running \(pid \d+\)", line) for line in lines), lines

    def test_port_taken_by_someone_else(self, tmp_path: Path) -> None:
        with socket.socket() as squatter:
            squatter.bind(("127.0.0.1", 0))
            squatter.listen()
            port = squatter.getsockname()[1]
            result = infra(
                "up", HOOKBAY_INFRA_RUN=str(tmp_path), HOOKBAY_INFRA_KAFKA_PORT=str(port)
            )
        assert result.returncode == 1
        assert f"port {port} (for kafka) is taken by another process" in result.stderr
        assert not list(tmp_path.glob("*.pid"))

    def test_down_without_anything_started_is_harmless(self, tmp_path: Path) -> None:
        result = infra("down", HOOKBAY_INFRA_RUN=str(tmp_path))
        assert result.returncode == 0

    def test_broker_cluster_id_is_a_clean_uuid(self) -> None:
        meta = (RUN_DIR / "kafka" / "data" / "meta.properties").read_text()
        cluster_id = re.search(r"^cluster\.id=(.*)$", meta, re.MULTILINE)
        assert cluster_id is not None
        assert re.fullmatch(r"[A-Za-z0-9_-]{22}", cluster_id.group(1)), cluster_id.group(1)
