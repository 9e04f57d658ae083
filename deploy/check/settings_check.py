"""Every container of a rendered chart starts with settings its service accepts.

For each Deployment, CronJob and Job, the container's ``HOOKBAY_*`` environment (values from
secrets replaced by a 32-character stand-in) is given to the settings class of the role its
argument names, exactly as the process would read it at start-up; a rejected value fails here
instead of in a crash-looping pod. Every ``HOOKBAY_*`` name the chart sets must also be a field of
that class: the settings ignore unknown variables, so a misspelt one would silently do nothing.

usage: settings_check.py RENDER...
"""

# ruff: noqa: T201  (a command-line check: its report is printed)
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError
from pydantic_settings import BaseSettings

from hookbay_common.settings import Settings
from hookbay_dashboard.settings import DashboardSettings
from hookbay_forwarder.settings import ForwarderSettings
from hookbay_ingest.settings import IngestSettings
from hookbay_retention.settings import RetentionSettings

ROLES: dict[str, type[BaseSettings]] = {
    "ingest": IngestSettings,
    "forwarder": ForwarderSettings,
    "recorder": ForwarderSettings,
    "stats": ForwarderSettings,
    "dashboard": DashboardSettings,
    "retention": RetentionSettings,
    "migrate": Settings,
}
# stand-ins for values read from secrets, by the key the chart reads
SECRET_STAND_INS = {
    "secret-key": "s" * 32,
    "mongo-url": "mongodb://user:password@mongo:27017/hookbay",
    "redis-url": "redis://:password@redis:6379/0",
}


def value(entry: dict[str, Any]) -> str:
    if "valueFrom" in entry:
        return SECRET_STAND_INS[entry["valueFrom"]["secretKeyRef"]["key"]]
    return str(entry.get("value", ""))


def unread(settings: type[BaseSettings], names: set[str]) -> list[str]:
    """The names with the settings' prefix (``HOOKBAY_``) that are none of its fields."""
    prefix = str(settings.model_config.get("env_prefix", "")).upper()
    fields = {prefix + name.upper() for name in settings.model_fields}
    return sorted(n for n in names if n.upper().startswith(prefix) and n.upper() not in fields)


def pod_spec(doc: dict[str, Any]) -> dict[str, Any] | None:
    kind = doc.get("kind")
    if kind in ("Deployment", "Job"):
        return dict(doc["spec"]["template"]["spec"])
    if kind == "CronJob":
        return dict(doc["spec"]["jobTemplate"]["spec"]["template"]["spec"])
    return None


def check(render: str) -> int:
    checked = 0
    for doc in yaml.safe_load_all(Path(render).read_text()):
        spec = pod_spec(doc) if isinstance(doc, dict) else None
        if spec is None:
            continue
        for container in spec["containers"]:
            role = container["args"][0]
            env = {e["name"]: value(e) for e in container.get("env", [])}
            unknown = unread(ROLES[role], set(env))
            if unknown:
                sys.exit(
                    f"{render}: {doc['metadata']['name']} ({role}) sets {', '.join(unknown)}, which "
                    f"{ROLES[role].__name__} does not read (misspelt, or not a setting of the role)"
                )
            saved = dict(os.environ)
            os.environ.clear()
            os.environ.update(env)
            try:
                ROLES[role]()
            except ValidationError as exc:
                sys.exit(f"{render}: {doc['metadata']['name']} ({role}) would not start:\n{exc}")
            finally:
                os.environ.clear()
                os.environ.update(saved)
            checked += 1
    return checked


def main() -> None:
    for render in sys.argv[1:]:
        print(
            f"{Path(render).name}: {check(render)} containers start with settings their role accepts"
        )


if __name__ == "__main__":
    main()
