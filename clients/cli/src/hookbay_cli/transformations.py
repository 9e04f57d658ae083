"""The ``hookbay transformation`` commands: the owner's JavaScript transformations and their
test runs, over the dashboard API (registered on the ``hookbay`` group when
``hookbay_cli.main`` is imported)."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from hookbay_cli.main import _call, _emit, _fields, _get, _q, _run, _table, hookbay, json_flag

_ENV_HELP = "NAME=VALUE for context.env (repeat for more; write-only)."


def _env(items: tuple[str, ...]) -> dict[str, str]:
    env: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise click.BadParameter(f"{item!r}: give NAME=VALUE", param_hint="--env")
        env[name] = value
    return env


def _read(path: str, hint: str) -> str:
    """The text of ``path`` (``-``: standard input)."""
    try:
        with click.open_file(path, encoding="utf-8") as source:
            return str(source.read())
    except (OSError, UnicodeDecodeError) as exc:
        raise click.BadParameter(f"cannot read {path}: {exc}", param_hint=hint) from None


def _line(t: dict[str, Any]) -> str:
    names = ", ".join(t["env"]) or "no env"
    return f"{t['name']} (version {t['version']}, {names})"


@hookbay.group()
def transformation() -> None:
    """Your transformations: JavaScript that reshapes a request before it is delivered."""


@transformation.command("list")
@json_flag
def transformation_list(as_json: bool) -> None:
    """Every transformation: name, version, env names."""
    found = _run(lambda c: _get(c, "/transformations"))
    rows = [[t["name"], str(t["version"]), ",".join(t["env"]) or "-"] for t in found]
    _emit(found, as_json, lambda _: _table(rows, ["NAME", "VERSION", "ENV"]))


@transformation.command("show")
@click.argument("name")
@json_flag
def transformation_show(name: str, as_json: bool) -> None:
    """One transformation with its code (env values masked)."""
    found = _run(lambda c: _get(c, f"/transformations/{_q(name)}"))

    def render(t: dict[str, Any]) -> str:
        head = {k: v for k, v in t.items() if k != "code"}
        return f"{_fields(head)}\ncode:\n{t['code']}"

    _emit(found, as_json, render)


@transformation.command("create")
@click.argument("name")
@click.option("--code", "code_path", required=True, metavar="FILE",
              help="The JavaScript (-: standard input).")  # fmt: skip
@click.option("--env", "env_items", multiple=True, metavar="NAME=VALUE", help=_ENV_HELP)
@json_flag
def transformation_create(
    name: str, code_path: str, env_items: tuple[str, ...], as_json: bool
) -> None:
    """Create transformation NAME; its code is checked first (a syntax error names its line
    and column)."""
    body: dict[str, Any] = {"name": name, "code": _read(code_path, "--code")}
    if env_items:
        body["env"] = _env(env_items)
    created = _run(lambda c: _call(c, "POST", "/transformations", body))
    _emit(created, as_json, lambda t: f"created transformation {_line(t)}")


@transformation.command("update")
@click.argument("name")
@click.option("--code", "code_path", default=None, metavar="FILE",
              help="New JavaScript (-: standard input).")  # fmt: skip
@click.option("--env", "env_items", multiple=True, metavar="NAME=VALUE",
              help="Replaces every env value (a VALUE of '********' keeps that name's).")  # fmt: skip
@click.option("--no-env", is_flag=True, help="Remove every env value.")
@json_flag
def transformation_update(
    name: str, code_path: str | None, env_items: tuple[str, ...], no_env: bool, as_json: bool
) -> None:
    """Change transformation NAME; its version moves up by one when the code or env changes."""
    if env_items and no_env:
        raise click.UsageError("--env and --no-env exclude each other")
    body: dict[str, Any] = {}
    if code_path is not None:
        body["code"] = _read(code_path, "--code")
    if env_items or no_env:
        body["env"] = _env(env_items)
    if not body:
        raise click.UsageError("nothing to change: give an option (see --help)")
    changed = _run(lambda c: _call(c, "PATCH", f"/transformations/{_q(name)}", body))
    _emit(changed, as_json, lambda t: f"updated transformation {_line(t)}")


@transformation.command("delete")
@click.argument("name")
def transformation_delete(name: str) -> None:
    """Delete transformation NAME."""
    _run(lambda c: _call(c, "DELETE", f"/transformations/{_q(name)}"))
    click.echo(f"deleted transformation {name}")


@transformation.command("test")
@click.argument("name")
@click.option("--event", "event_id", default=None, metavar="EVENT_ID",
              help="One of your stored events (evt_...).")  # fmt: skip
@click.option("--request", "request_path", default=None, metavar="FILE",
              help='A request as JSON: {"headers", "body", "query", "path"} (-: standard input).')  # fmt: skip
@json_flag
def transformation_test(
    name: str, event_id: str | None, request_path: str | None, as_json: bool
) -> None:
    """Run transformation NAME on an event or a request, in the sandbox; nothing is delivered.
    Prints what it returned and its console output; exits 1 when it failed."""
    if (event_id is None) == (request_path is None):
        raise click.UsageError("give either --event or --request")
    body: dict[str, Any]
    if event_id is not None:
        body = {"event_id": event_id}
    else:
        try:
            body = {"request": json.loads(_read(request_path or "-", "--request"))}
        except ValueError as exc:
            raise click.BadParameter(f"not JSON: {exc}", param_hint="--request") from None
    result = _run(lambda c: _call(c, "POST", f"/transformations/{_q(name)}/test", body))
    _emit(result, as_json, _render_test)
    if result["error"] is not None:
        sys.exit(1)


def _render_test(result: dict[str, Any]) -> str:
    lines = [f"log: {line}" for line in result["logs"]]
    error = result["error"]
    if error is not None:
        where = f" at {error['line']}:{error['column']}" if error["line"] is not None else ""
        lines.append(f"failed ({error['kind']}){where}: {error['message']}")
    else:
        lines.append(json.dumps(result["request"], indent=2, ensure_ascii=False))
    lines.append(f"in {result['duration_ms']:.1f} ms")
    return "\n".join(lines)
