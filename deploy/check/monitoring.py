"""Helpers of deploy-check for the chart's monitoring objects (run with the project's Python).

monitoring.py rules RENDER OUT      the PrometheusRule groups of a rendered chart, as a rules file
monitoring.py exprs RENDER          every Grafana panel expression, one per line, with Grafana's
                                    variables replaced so promtool can parse it
monitoring.py names RENDER SCRAPE...  fails when a rule or panel names a hookbay_* metric that no
                                    scrape of the running services (deploy/check/metrics/) exposes
"""

# ruff: noqa: T201  (a command-line helper: its output is printed)
from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import yaml

GRAFANA_VARIABLES = {
    "$__rate_interval": "5m",
    "$__interval": "1m",
    "$__range": "1h",
    "$namespace": "hookbay",
}
METRIC = re.compile(r"\bhookbay_[a-z0-9_]+")
SUFFIXES = ("_total", "_created", "_bucket", "_sum", "_count")
NOT_METRICS = {"hookbay_retention"}  # the retention job's Pushgateway job name


def documents(render: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(Path(render).read_text()) if isinstance(d, dict)]


def rules(render: str, out: str) -> None:
    groups = [
        g for d in documents(render) if d["kind"] == "PrometheusRule" for g in d["spec"]["groups"]
    ]
    if not groups:
        sys.exit(f"{render}: no PrometheusRule")
    Path(out).write_text(yaml.safe_dump({"groups": groups}, sort_keys=False))


def dashboard_exprs(render: str) -> list[str]:
    exprs = []
    for doc in documents(render):
        if doc["kind"] != "ConfigMap" or "grafana_dashboard" not in doc["metadata"].get(
            "labels", {}
        ):
            continue
        for data in doc["data"].values():
            board = json.loads(data)
            if len(board["panels"]) < 8:
                sys.exit(f"the Grafana dashboard has {len(board['panels'])} panels, fewer than 8")
            for panel in board["panels"]:
                for target in panel["targets"]:
                    expr = target["expr"]
                    for name, value in GRAFANA_VARIABLES.items():
                        expr = expr.replace(name, value)
                    exprs.append(expr)
    if not exprs:
        sys.exit(f"{render}: no Grafana dashboard")
    return exprs


def exposed(scrapes: list[str]) -> set[str]:
    names = set()
    for scrape in scrapes:
        for line in Path(scrape).read_text().splitlines():
            if line.startswith("# TYPE "):
                family = line.split()[2]
                names.add(family)
                names.update(family + s for s in SUFFIXES)
            elif line and not line.startswith("#"):
                names.add(re.split(r"[{ ]", line, maxsplit=1)[0])
    return names


def names(render: str, scrapes: list[str]) -> None:
    used = set()
    for doc in documents(render):
        if doc["kind"] == "PrometheusRule":
            used.update(METRIC.findall(json.dumps(doc["spec"])))
    for expr in dashboard_exprs(render):
        used.update(METRIC.findall(expr))
    missing = sorted(used - NOT_METRICS - exposed(scrapes))
    if missing:
        sys.exit(
            "metrics used by the alerts or the dashboard that no service exposes: "
            + ", ".join(missing)
        )
    print(
        f"{len(used)} hookbay metric names used by alerts and dashboard, all exposed by the services"
    )


def main() -> None:
    command, *args = sys.argv[1:]
    if command == "rules":
        rules(*args)
    elif command == "exprs":
        print("\n".join(dashboard_exprs(args[0])))
    elif command == "names":
        names(args[0], args[1:])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
