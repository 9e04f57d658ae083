"""The ``hookbay`` command: a shell whose sub-commands the services contribute.

Each service registers click commands under the ``hookbay.commands`` entry-point group (see its
pyproject.toml); this module only loads them, runs them, and turns every expected failure into one
line on stderr and exit status 1 (usage mistakes exit 2, as click does).
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from importlib.metadata import entry_points
from typing import Any, TypeVar

import click
import structlog
from aiokafka.errors import KafkaError
from pydantic import ValidationError
from pymongo.errors import PyMongoError
from rich.console import Console
from rich.table import Table

from hookbay_common.clock import isoformat
from hookbay_common.db import client as db_client
from hookbay_common.db.client import Database
from hookbay_common.errors import HookbayError
from hookbay_common.kafka import ensure_configured_topics
from hookbay_common.plans import PlanBook, load_plans
from hookbay_common.secrets_box import SecretBox
from hookbay_common.settings import Settings

T = TypeVar("T")


@dataclass
class Runtime:
    """What a command works with; opened by ``CliState.run`` and closed after it."""

    settings: Settings
    db: Database
    plans: PlanBook
    box: SecretBox


class CliState:
    def __init__(self) -> None:
        self.json = False

    @cached_property
    def settings(self) -> Settings:
        return Settings()  # type: ignore[call-arg]  # secret_key comes from the environment

    def run(self, work: Callable[[Runtime], Awaitable[T]]) -> T:
        """Run ``work`` with an open database; ``migrate`` first so a fresh database works.

        The services' log lines are held back meanwhile: they are for operators of a server
        (and structlog, unconfigured in a command, would print them to stdout), while a
        command's output is its result, or the one error line ``_Shell`` prints."""

        async def main() -> T:
            async with self._runtime() as runtime:
                return await work(runtime)

        saved = structlog.get_config()
        structlog.configure(
            wrapper_class=structlog.make_filtering_bound_logger(logging.CRITICAL),
            logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        )
        try:
            return asyncio.run(main())
        finally:
            structlog.configure(**saved)

    @asynccontextmanager
    async def _runtime(self) -> AsyncIterator[Runtime]:
        settings = self.settings
        plans = load_plans(settings.plans_file)
        mongo = db_client.connect(settings.mongo_url)
        try:
            db = db_client.database(mongo)
            await db_client.migrate(db)
            yield Runtime(settings, db, plans, SecretBox(settings.secret_key.get_secret_value()))
        finally:
            await mongo.close()

    def emit(self, data: Any, *, human: Callable[[Console], None]) -> None:
        """Print ``data`` as JSON under ``--json``, else call ``human`` with a console."""
        if self.json:
            click.echo(json.dumps(data, default=_json_default, indent=2))
        else:
            human(Console(highlight=False, soft_wrap=True))


def table(console: Console, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    grid = Table(*columns, box=None, pad_edge=False, header_style="bold")
    for row in rows:
        grid.add_row(*("-" if cell is None else str(cell) for cell in row))
    console.print(grid)


def _json_default(value: object) -> Any:
    if isinstance(value, datetime):
        return isoformat(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


pass_state = click.make_pass_decorator(CliState, ensure=True)


def json_option(command: Callable[..., Any]) -> Callable[..., Any]:
    """``--json`` on a leaf command, the same as ``hookbay --json ...``."""

    def set_json(ctx: click.Context, _: click.Parameter, value: bool) -> None:
        if value:
            ctx.ensure_object(CliState).json = True

    return click.option(
        "--json", is_flag=True, expose_value=False, callback=set_json, help="Machine output."
    )(command)


class _Shell(click.Group):
    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except HookbayError as exc:
            _fail(exc.message)
        except ValidationError as exc:
            _fail(_settings_problem(exc))
        except PyMongoError as exc:
            _fail(f"database error: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
        except KafkaError as exc:
            _fail(f"Kafka error: {type(exc).__name__}: {exc}")
        except OSError as exc:
            _fail(f"{type(exc).__name__}: {exc}")


def _settings_problem(exc: ValidationError) -> str:
    problems = [
        f"HOOKBAY_{'_'.join(str(p) for p in err['loc']).upper()}: {err['msg']}"
        for err in exc.errors()
    ]
    return "invalid settings: " + "; ".join(problems)


def _fail(message: str) -> None:
    click.echo(f"hookbay: {' '.join(message.split())}", err=True)
    sys.exit(1)


@click.group(cls=_Shell, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--json", "as_json", is_flag=True, help="Machine-readable JSON output.")
@click.pass_context
def hookbay(ctx: click.Context, as_json: bool) -> None:
    """hookbay: self-hosted webhook intake. Settings come from HOOKBAY_* variables."""
    ctx.ensure_object(CliState).json = as_json
    for library in ("aiokafka", "pymongo"):  # failures are reported once, as one line, by _Shell
        logging.getLogger(library).setLevel(logging.CRITICAL)


@hookbay.command("migrate")
@json_option
@pass_state
def migrate_command(state: CliState) -> None:
    """Create MongoDB indexes and Kafka topics that are missing (idempotent)."""

    async def work(rt: Runtime) -> list[str]:  # the runtime has already migrated MongoDB
        return await ensure_configured_topics(rt.settings)

    created = state.run(work)
    state.emit(
        {"indexes": "ok", "topics_created": created},
        human=lambda c: c.print(f"indexes ok; topics created: {', '.join(created) or 'none'}"),
    )


def build() -> click.Group:
    """The ``hookbay`` group with every installed service's commands added."""
    for entry in entry_points(group="hookbay.commands"):
        if entry.name not in hookbay.commands:
            hookbay.add_command(entry.load(), entry.name)
    return hookbay


def main(argv: Sequence[str] | None = None) -> None:
    build().main(args=argv, prog_name="hookbay")
