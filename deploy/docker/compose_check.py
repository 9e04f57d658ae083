"""`make compose-check`'s end-to-end part, against a running compose stack (compose-check.sh).

1. an owner and a webhook forwarding to the receiver container, made with the `hookbay-admin` CLI
2. a signed webhook sent to ingest: 200, forwarded to the receiver, listed by the dashboard API
3. 40 more events while the forwarder is restarted: every one forwarded and listed, none lost
4. /metrics of every role (retention: its textfile export) saved for deploy-check's name check
Standard library only: runs with the host's python3.
"""

# ruff: noqa: T201, S310, S105  (a check script: prints its steps, opens only its own http URLs)
from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

SECRET = "compose-check-signing-secret"
USER, HOOK = "check", "orders"


class Stack:
    def __init__(self, args: argparse.Namespace) -> None:
        self.base = ["docker", "compose", "-p", args.project, "-f", args.compose_file]
        self.ingest = args.ingest
        self.dashboard = args.dashboard
        self.token = ""

    def compose(self, *argv: str, stdin: str | None = None) -> str:
        done = subprocess.run(
            [*self.base, *argv], input=stdin, capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            sys.exit(f"docker compose {' '.join(argv)} failed:\n{done.stdout}\n{done.stderr}")
        return done.stdout

    def cli(self, *argv: str, stdin: str | None = None) -> Any:
        out = self.compose(
            "exec", "-T", "dashboard", "hookbay-role", "hookbay-admin", "--json", *argv, stdin=stdin
        )
        return json.loads(out)

    def in_container(self, service: str, url: str) -> str:
        code = f"import urllib.request; print(urllib.request.urlopen({url!r}, timeout=5).read().decode())"
        return self.compose("exec", "-T", service, "python3", "-c", code)

    def send(self, n: int) -> str:
        body = json.dumps({"order": n, "status": "paid"}).encode()
        signature = hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
        request = urllib.request.Request(
            f"{self.ingest}/w/{USER}/{HOOK}", data=body, method="POST",
            headers={"Content-Type": "application/json", "X-Service-Signature": signature},
        )  # fmt: skip
        with urllib.request.urlopen(request, timeout=10) as response:
            answer = json.loads(response.read())
        if response.status != 200 or not answer.get("success"):
            sys.exit(f"ingest answered {response.status} {answer}")
        return str(answer["requestId"])

    def received(self) -> set[str]:
        items = json.loads(self.in_container("receiver", "http://127.0.0.1:9000/received"))
        return {item["headers"].get("x-hookbay-request-id", "") for item in items}

    def listed(self) -> dict[str, str]:
        statuses: dict[str, str] = {}
        cursor = ""
        while True:
            url = f"{self.dashboard}/api/v1/webhooks/{HOOK}/events?limit=100" + (
                f"&cursor={cursor}" if cursor else ""
            )
            request = urllib.request.Request(url, headers={"Authorization": f"Bearer {self.token}"})
            with urllib.request.urlopen(request, timeout=10) as response:
                page = json.loads(response.read())
            statuses.update({item["request_id"]: item["status"] for item in page["items"]})
            cursor = page.get("next_cursor") or ""
            if not cursor:
                return statuses


def until(what: str, check: Any, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            sys.exit(f"timed out waiting until {what}")
        time.sleep(0.5)


def delivered(stack: Stack, ids: set[str]) -> None:
    until(f"the receiver got all {len(ids)} events", lambda: ids <= stack.received())
    until(
        f"the dashboard API lists all {len(ids)} events as success",
        lambda: all(stack.listed().get(i) == "success" for i in ids),
    )


RETENTION_MARK = "--- retention.prom ---"


def scrape(stack: Stack, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    pages = {
        "ingest": urllib.request.urlopen(f"{stack.ingest}/metrics", timeout=5).read().decode(),
        "dashboard": urllib.request.urlopen(f"{stack.dashboard}/metrics", timeout=5)
        .read()
        .decode(),
        "forwarder": stack.in_container("forwarder", "http://127.0.0.1:9101/metrics"),
        "recorder": stack.in_container("recorder", "http://127.0.0.1:9102/metrics"),
        "stats": stack.in_container("stats", "http://127.0.0.1:9103/metrics"),
        "retention": stack.compose(
            "run",
            "--rm",
            "--no-deps",
            "-e",
            "HOOKBAY_RETENTION_METRICS_FILE=/tmp/retention.prom",
            "--entrypoint",
            "/bin/sh",
            "retention",
            "-c",
            f"hookbay-role retention >&2 && echo {RETENTION_MARK} && cat /tmp/retention.prom",
        ).split(RETENTION_MARK + "\n")[-1],  # after the image build's log, if compose printed one
    }
    for role, text in pages.items():
        path = out / f"{role}.prom"
        kept = path.read_text() if path.exists() else ""
        # rewritten only when the metric families changed: the sample values of each run would
        # otherwise make every compose-check a change to commit
        if families(kept) != families(text):
            path.write_text(text)
        names = sum(1 for f in families(text) if f.startswith("# TYPE hookbay_"))
        print(f"scraped {role}: {names} hookbay metric families")


def families(text: str) -> list[str]:
    return sorted(line for line in text.splitlines() if line.startswith("# TYPE "))


def main() -> None:
    parser = argparse.ArgumentParser()
    for flag in ("--project", "--compose-file", "--ingest", "--dashboard", "--metrics-dir"):
        parser.add_argument(flag, required=True)
    args = parser.parse_args()
    stack = Stack(args)
    started = time.monotonic()

    stack.token = stack.cli(
        "user", "create", USER, "--plan", "pro", "--password-stdin", stdin="compose-check-pw-1\n"
    )["token"]
    stack.cli(
        "webhook",
        "create",
        USER,
        HOOK,
        "--secret",
        SECRET,
        "--forward-url",
        "http://receiver:9000/orders",
    )
    print("owner and webhook created with the hookbay CLI")

    first = stack.send(0)
    delivered(stack, {first})
    print(f"signed webhook {first}: 200, forwarded to the receiver, listed by the dashboard API "
          f"({time.monotonic() - started:.1f} s)")  # fmt: skip

    ids = {first} | {stack.send(n) for n in range(1, 21)}
    restart = subprocess.Popen([*stack.base, "restart", "forwarder"])
    ids |= {stack.send(n) for n in range(21, 41)}
    if restart.wait() != 0:
        sys.exit("docker compose restart forwarder failed")
    delivered(stack, ids)
    print(
        f"forwarder restarted with events in flight: all {len(ids)} forwarded and listed, none lost"
    )

    scrape(stack, Path(args.metrics_dir))
    print(f"end to end in {time.monotonic() - started:.1f} s")


if __name__ == "__main__":
    main()
