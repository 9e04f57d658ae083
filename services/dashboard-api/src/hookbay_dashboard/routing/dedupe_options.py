"""A route's deduplication options of ``hookbay-admin route create/set``: a preset or fields,
and a window, made into the route's ``dedupe`` rule (docs/owners/routes.md, "Deduplication").
The owner's CLI has the same options (``hookbay_cli.dedupe``). Only click at import time."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Final

import click

PRESETS: Final = ("github", "stripe", "standard-webhooks", "shopify")
"""``hookbay_common.routing.dedupe.DedupePreset``'s values (not imported: it loads pydantic)."""
_UNITS: Final = {"s": 1, "m": 60, "h": 3600, "d": 86_400}
_DURATION: Final = re.compile(r"(\d+)([smhd]?)")


def window_seconds(text: str) -> int:
    """``90``, ``90s``, ``30m``, ``1h`` or ``7d`` in seconds (the rule checks the range)."""
    found = _DURATION.fullmatch(text.strip())
    if found is None:
        raise click.BadParameter(
            f"{text!r} is not a duration: give a number of seconds or one like 90s, 30m, 1h, 7d",
            param_hint="--dedupe-window",
        )
    return int(found[1]) * _UNITS[found[2] or "s"]


def dedupe_options(*, removable: bool) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The options ``dedupe_preset``, ``dedupe_fields``, ``dedupe_window`` (and, when
    ``removable``, ``no_dedupe``) on a command."""
    options = [
        click.option("--dedupe-preset", type=click.Choice(PRESETS), default=None,
                     help="Deliver once per provider event id (with --dedupe-window)."),
        click.option("--dedupe-fields", default=None, metavar="PATHS",
                     help="Deliver once per value of these comma-separated fields, such as "
                          "body.id,headers.x-request-id (with --dedupe-window)."),
        click.option("--dedupe-window", default=None, metavar="DURATION",
                     help="How long a key makes later events duplicates: 90s, 30m, 1h, 7d."),
    ]  # fmt: skip
    if removable:
        options.append(click.option("--no-dedupe", is_flag=True, help="Deduplicate nothing."))

    def apply(command: Callable[..., Any]) -> Callable[..., Any]:
        for option in reversed(options):
            command = option(command)
        return command

    return apply


def dedupe_rule(
    preset: str | None, fields: str | None, window: str | None, *, remove: bool = False
) -> dict[str, Any] | None:
    """The ``dedupe`` rule the options give; ``None`` when none was given (``remove``: the
    caller sends ``null``). Options that do not go together are a usage error."""
    given = preset is not None or fields is not None or window is not None
    if remove and given:
        raise click.UsageError("--no-dedupe excludes the other --dedupe options")
    if not given:
        return None
    if preset is not None and fields is not None:
        raise click.UsageError("--dedupe-preset and --dedupe-fields exclude each other")
    if preset is None and fields is None:
        raise click.UsageError("--dedupe-window needs --dedupe-preset or --dedupe-fields")
    if window is None:
        raise click.UsageError("deduplication needs --dedupe-window (such as 1h)")
    rule: dict[str, Any] = {"window_s": window_seconds(window)}
    if preset is not None:
        rule["preset"] = preset
    else:
        assert fields is not None
        rule["fields"] = [part.strip() for part in fields.split(",") if part.strip()]
    return rule


def dedupe_text(rule: dict[str, Any] | None) -> str:
    """A route's rule in a few words: ``github 1h``, ``body.id,headers.x-a 60s``, ``-``."""
    if not rule:
        return "-"
    source = rule.get("preset") or ",".join(rule.get("fields") or ())
    return f"{source} {_duration(int(rule['window_s']))}"


def dedupe_key_text(shown: dict[str, Any] | None) -> str:
    """A dry run's dedupe key of one event: its fields' values, or ``no key`` and what is
    missing; ``-``: none shown (no rule, or the event did not match)."""
    if shown is None:
        return "-"
    if shown["key"] is None:
        return f"no key ({', '.join(shown['missing'])} missing)"
    return ", ".join(f"{path}={value}" for path, value in shown["fields"].items())


def _duration(seconds: int) -> str:
    for unit, size in (("d", 86_400), ("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"
