"""Create the demo user and webhooks for `make run` unless they exist; print what was made as JSON.

Uses the same services as the CLI, so the demo data is exactly what a person would create.
``send_demo_events`` (called by ``scripts/run.py`` once the services answer, on the first run
only) then sends the demo webhook a few events of different kinds through ingest, as a sender
would, so that the dashboard's first look shows something real.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import sys
import urllib.error
import urllib.request

from hookbay_common.cli import CliState, Runtime
from hookbay_common.errors import UserAlreadyExists, WebhookAlreadyExists
from hookbay_dashboard.commands import accounts_for, webhooks_for

DEMO_USER = "demo"
DEMO_PASSWORD = "demo-password"  # noqa: S105 - the documented demo login of a local stack
DEMO_WEBHOOK = "orders"
DEMO_SECRET = "demo-signing-secret"  # noqa: S105
DEMO_FAILING = "shipping"
"""A second demo webhook whose destination refuses every delivery (a webhook of ingest's that
does not exist: 404, not retried), so a failed delivery with its attempt is there to look at."""


async def seed(rt: Runtime) -> dict[str, object]:
    accounts, webhooks = accounts_for(rt), webhooks_for(rt)  # the CLI's: they publish changes
    made: dict[str, object] = {
        "user": DEMO_USER,
        "password": DEMO_PASSWORD,
        "webhook": DEMO_WEBHOOK,
    }
    try:
        plan = "starter" if "starter" in rt.plans else None
        _, issued = await accounts.create_user(DEMO_USER, plan=plan, password=DEMO_PASSWORD)
        made["token"] = issued.token
    except UserAlreadyExists:
        made["token"] = None
    with contextlib.suppress(WebhookAlreadyExists):
        await webhooks.create(DEMO_USER, DEMO_WEBHOOK, secret=DEMO_SECRET)
    if rt.settings.allow_private_destinations:  # the refusing destination is the local ingest
        refused = f"{local_ingest()}/w/{DEMO_USER}/retired"
        with contextlib.suppress(WebhookAlreadyExists):
            await webhooks.create(DEMO_USER, DEMO_FAILING, forward_url=refused)
    made["secret"] = DEMO_SECRET
    return made


def _demo_requests() -> list[tuple[str, bytes, str, str | None]]:
    """(webhook, body, content type, signing secret) of each demo event."""
    png = bytes.fromhex("89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489")
    return [
        (DEMO_WEBHOOK, b'{"order_id": 1234, "status": "paid", "items": [{"sku": "A-1", "qty": 2}]}',
         "application/json", DEMO_SECRET),
        (DEMO_WEBHOOK, b"order_id=1235&status=refunded&note=customer+asked",
         "application/x-www-form-urlencoded", DEMO_SECRET),
        (DEMO_WEBHOOK, b"<order><id>1236</id><status>shipped</status></order>",
         "application/xml", DEMO_SECRET),
        (DEMO_WEBHOOK, png, "image/png", DEMO_SECRET),
        (DEMO_WEBHOOK, b'{"order_id": 1237, "status": "paid"}', "application/json",
         "not-the-demo-secret"),  # rejected by its signature: failed, never forwarded
        (DEMO_FAILING, b'{"shipment": 99, "carrier": "demo"}', "application/json", None),
    ]  # fmt: skip


def local_ingest() -> str:
    """This run's own ingest, on loopback (never the public URL, which may be elsewhere)."""
    return f"http://127.0.0.1:{os.environ.get('HOOKBAY_INGEST_PORT', '8080')}"


def send_demo_events(ingest: str) -> int:
    """POST the demo events to ``ingest``; how many it answered as expected (200, or 401 for
    the bad signature). A refusal or an unreachable ingest is reported, never raised: the
    demo data is a courtesy, ``make run`` goes on without it."""
    answered = 0
    for webhook, body, content_type, secret in _demo_requests():
        headers = {"Content-Type": content_type}
        if secret is not None:
            digest = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
            headers["X-Service-Signature"] = f"sha256={digest}"
        url = f"{ingest}/w/{DEMO_USER}/{webhook}"
        request = urllib.request.Request(url, data=body, headers=headers, method="POST")  # noqa: S310
        try:
            with urllib.request.urlopen(request, timeout=10):  # noqa: S310 - the local ingest
                answered += 1
        except urllib.error.HTTPError as error:
            answered += error.code == 401
        except OSError as error:
            print(f"run: demo event to {url} not sent: {error}", file=sys.stderr)
    return answered


def main() -> None:
    state = CliState()
    made = state.run(seed)
    json.dump(made, sys.stdout)


if __name__ == "__main__":
    main()
