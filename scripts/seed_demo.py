"""Create the demo user and webhook for `make run` unless they exist; print what was made as JSON.

Uses the same services as the CLI, so the demo data is exactly what a person would create.
"""

from __future__ import annotations

import contextlib
import json
import sys

from hookbay_common.cli import CliState, Runtime
from hookbay_common.errors import UserAlreadyExists, WebhookAlreadyExists
from hookbay_dashboard.commands import accounts_for, webhooks_for

DEMO_USER = "demo"
DEMO_PASSWORD = "demo-password"  # noqa: S105 - the documented demo login of a local stack
DEMO_WEBHOOK = "orders"
DEMO_SECRET = "demo-signing-secret"  # noqa: S105


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
    made["secret"] = DEMO_SECRET
    return made


def main() -> None:
    state = CliState()
    made = state.run(seed)
    json.dump(made, sys.stdout)


if __name__ == "__main__":
    main()
