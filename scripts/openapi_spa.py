"""``python scripts/openapi_spa.py OUTPUT.json``: the dashboard API's OpenAPI document, from
``create_app(...).openapi()`` (no server, database or broker needed).

The SPA's typed client (``services/dashboard-api/web/src/api/schema.d.ts``) is generated from
it by ``make api-client``; ``make lint`` generates both again into ``.cache/`` and fails when
the committed types differ (the drift check).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from hookbay_common.plans import load_plans
from hookbay_dashboard.app import create_app
from hookbay_dashboard.settings import DashboardSettings

_PLACEHOLDER_KEY = "openapi-document-only-" + "x" * 32  # never serves a request


def document() -> str:
    settings = DashboardSettings(secret_key=_PLACEHOLDER_KEY)  # type: ignore[arg-type]
    schema = create_app(settings, load_plans(None)).openapi()
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: openapi_spa.py OUTPUT.json", file=sys.stderr)
        return 2
    Path(argv[1]).write_text(document())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
