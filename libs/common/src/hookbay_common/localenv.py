"""The settings of a local checkout: what ``make run`` gives every service, and what the ``hookbay``
command falls back on when it runs from that checkout's virtualenv with no ``HOOKBAY_*`` set.

A checkout is recognised by its virtualenv: ``<checkout>/.venv`` holding the running interpreter
and ``<checkout>/deploy/local/infra.sh`` beside it. An installed image has neither, so nothing
here applies there: its settings come from the environment only.
"""

from __future__ import annotations

import os
import secrets
import sys
from collections.abc import Mapping
from pathlib import Path

SECRET_KEY_FILE = Path(".cache") / "secret_key"


def checkout_root() -> Path | None:
    """The checkout whose ``.venv`` runs this interpreter, if any."""
    root = Path(sys.prefix).resolve().parent
    return root if (root / "deploy" / "local" / "infra.sh").is_file() else None


def local_secret_key(root: Path, *, create: bool) -> str | None:
    """The key generated once per checkout (so stored webhook secrets stay readable across
    runs); ``create`` makes it when missing (``make run`` does, the CLI does not)."""
    path = root / SECRET_KEY_FILE
    if not path.exists():
        if not create:
            return None
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(secrets.token_hex(32))
        path.chmod(0o600)
    return path.read_text().strip()


def local_defaults(root: Path, env: Mapping[str, str], *, create_key: bool) -> dict[str, str]:
    """The ``HOOKBAY_*`` values ``make run`` uses, for the variables ``env`` does not set: the
    local infrastructure's ports (``HOOKBAY_INFRA_*_PORT`` move them), the checkout's key,
    private destinations allowed, plain-http cookies."""
    defaults = {
        "HOOKBAY_KAFKA_BOOTSTRAP": f"127.0.0.1:{env.get('HOOKBAY_INFRA_KAFKA_PORT', '9092')}",
        "HOOKBAY_MONGO_URL": (
            f"mongodb://127.0.0.1:{env.get('HOOKBAY_INFRA_MONGO_PORT', '27017')}/hookbay"
        ),
        "HOOKBAY_REDIS_URL": f"redis://127.0.0.1:{env.get('HOOKBAY_INFRA_REDIS_PORT', '6379')}/0",
        "HOOKBAY_ALLOW_PRIVATE_DESTINATIONS": "true",  # a local stack forwards locally
        "HOOKBAY_COOKIE_SECURE": "false",  # the local dashboard is plain http
    }
    key = local_secret_key(root, create=create_key)
    if key is not None:
        defaults["HOOKBAY_SECRET_KEY"] = key
    return {name: value for name, value in defaults.items() if name not in env}


def local_overrides() -> dict[str, str]:
    """In a checkout, the local values for the ``HOOKBAY_*`` variables this process leaves unset,
    as settings field names (``kafka_bootstrap``, ...) to pass to a ``Settings`` class (never
    creating the key, never touching the environment); empty outside a checkout."""
    root = checkout_root()
    if root is None:
        return {}
    defaults = local_defaults(root, os.environ, create_key=False)
    return {name.removeprefix("HOOKBAY_").lower(): value for name, value in defaults.items()}
