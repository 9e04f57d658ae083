"""Running ``hookbay`` as an owner in the CLI tests: a command that must succeed, and its
``--json`` answer."""

from __future__ import annotations

import json
from typing import Any

from .test_main import hookbay


async def ok(*args: str, env: dict[str, str], stdin: str | None = None) -> str:
    code, out, err = await hookbay(*args, env=env, stdin=stdin)
    assert code == 0, err
    return out


async def ok_json(*args: str, env: dict[str, str], stdin: str | None = None) -> Any:
    return json.loads(await ok(*args, "--json", env=env, stdin=stdin))
