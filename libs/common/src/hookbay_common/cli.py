"""The ``hookbay-admin`` command: a shell whose sub-commands the services contribute.

Each service registers click commands under the ``hookbay.commands`` entry-point group (see its
pyproject.toml); this module only loads them, runs them, and turns every expected failure into one
line on stderr and exit status 1 (usage mistakes exit 2, as click does).
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import TYPE_CHECKING, Any, TypeVar

import click

# Start-up cost: `hookbay-admin --help` must stay well under 0.3 s of CPU, so this module and every
# command module import only click at the top; database, Kafka, pydantic and rich are imported
# inside the functions that use them (docs/benchmarks.md, "CLI start-up").
if TYPE_CHECKING:
    from pydantic import ValidationError
    from rich.console import Console

    from hookbay_common.configlog import ConfigPublisher
    from hookbay_common.db.client import Database
    from hookbay_common.plans import PlanBook
    from hookbay_common.producer import ResilientProducer
    from hookbay_common.secrets_box import SecretBox
    from hookbay_common.settings import Settings

T = TypeVar("T")
S = TypeVar("S", bound="Settings")


@dataclass
class Runtime:
    """What a command works with; opened by ``CliState.run`` and closed after it."""

    settings: Settings
    db: Database
    plans: PlanBook
    box: SecretBox
    kafka: CliProducer
    """The command's one producer, connected on first use (most commands never send)."""
    config: ConfigPublisher
    """Publishes configuration changes to the change log (``hookbay_common.configlog``)."""


@dataclass
class CliProducer:
    """A ``ResilientProducer`` connected on the first ``get`` (the broker's own error when it
    does not answer), stopped with the run; failed sends are remembered for one warning line."""

    settings: Settings
    producer: ResilientProducer | None = None
    failures: list[str] = field(default_factory=list)

    async def get(self) -> ResilientProducer:
        from hookbay_common.producer import ResilientProducer

        if self.producer is None:
            self.producer = ResilientProducer.from_settings(self.settings, name="hookbay-cli")
            await self.producer.connect()
        return self.producer

    async def send(self, topic: str, key: bytes, value: bytes) -> None:
        """``configlog.Send``: acknowledged, or raises (and is counted as a failure)."""
        try:
            await (await self.get()).send_and_wait(topic, value, key=key)
        except BaseException as exc:
            self.failures.append(type(exc).__name__)
            raise

    async def close(self) -> None:
        if self.producer is not None:
            await self.producer.stop()


class CliState:
    def __init__(self) -> None:
        self.json = False

    @cached_property
    def settings(self) -> Settings:
        from hookbay_common.settings import Settings

        return self.settings_of(Settings)

    def settings_of(self, cls: type[S]) -> S:
        """``cls`` from the environment; in a checkout, whatever it leaves unset takes the value
        `make run` gives the services (``hookbay_common.localenv``)."""
        from hookbay_common.localenv import local_overrides

        overrides: dict[str, Any] = dict(local_overrides())  # strings, parsed like the env's
        return cls(**overrides)

    def run(self, work: Callable[[Runtime], Awaitable[T]]) -> T:
        """Run ``work`` with an open database; ``migrate`` first so a fresh database works.

        The services' log lines are held back meanwhile: they are for operators of a server
        (and structlog, unconfigured in a command, would print them to stdout), while a
        command's output is its result, or the one error line ``_Shell`` prints. A change
        that could not be published to the change log is reported as one warning line."""
        import asyncio

        import structlog

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
        from hookbay_common.configlog import ConfigPublisher
        from hookbay_common.db import client as db_client
        from hookbay_common.plans import load_plans
        from hookbay_common.secrets_box import SecretBox

        settings = self.settings
        plans = load_plans(settings.plans_file)
        mongo = db_client.connect(settings.mongo_url)
        producer = CliProducer(settings)
        try:
            db = db_client.database(mongo)
            await db_client.migrate(db)
            box = SecretBox(settings.secret_key.get_secret_value())
            config = ConfigPublisher(producer.send, settings.topics.config, box)
            yield Runtime(settings, db, plans, box, producer, config)
        finally:
            await producer.close()
            await mongo.close()
            if producer.failures:
                click.echo(
                    "hookbay-admin: warning: saved, but not published to the configuration change log "
                    f"({producer.failures[0]}: is Kafka at {settings.kafka_bootstrap} running?);"
                    " ingest applies it at its next reconciliation "
                    "(HOOKBAY_VIEW_RECONCILE_INTERVAL, 60 s by default)",
                    err=True,
                )

    def emit(self, data: Any, *, human: Callable[[Console], None]) -> None:
        """Print ``data`` as JSON under ``--json``, else call ``human`` with a console."""
        if self.json:
            click.echo(json.dumps(data, default=_json_default, indent=2))
        else:
            from rich.console import Console

            human(Console(highlight=False, soft_wrap=True))


def table(console: Console, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    from rich.table import Table

    grid = Table(*columns, box=None, pad_edge=False, header_style="bold")
    for row in rows:
        grid.add_row(*("-" if cell is None else str(cell) for cell in row))
    console.print(grid)


def _json_default(value: object) -> Any:
    from hookbay_common.clock import isoformat

    if isinstance(value, datetime):
        return isoformat(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


pass_state = click.make_pass_decorator(CliState, ensure=True)


def json_option(command: Callable[..., Any]) -> Callable[..., Any]:
    """``--json`` on a leaf command, the same as ``hookbay-admin --json ...``."""

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
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise  # --help, usage mistakes: click's own handling
        except Exception as exc:  # expected kinds become one line, the others re-raise
            _fail(_problem(exc))


def _problem(exc: Exception) -> str:
    """One line for an expected failure; re-raises anything else (a bug shows its traceback).
    The libraries are imported here, once a command failed, not at start-up."""
    from aiokafka.errors import KafkaError
    from pydantic import ValidationError
    from pymongo.errors import PyMongoError

    from hookbay_common.errors import HookbayError

    if isinstance(exc, HookbayError):
        return exc.message
    if isinstance(exc, ValidationError):
        return _settings_problem(exc)
    if isinstance(exc, PyMongoError):
        return f"database error: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
    if isinstance(exc, KafkaError):
        return f"Kafka error: {type(exc).__name__}: {exc}"
    if isinstance(exc, OSError):
        return f"{type(exc).__name__}: {exc}"
    raise exc


def _settings_problem(exc: ValidationError) -> str:
    from hookbay_common.localenv import SECRET_KEY_FILE, checkout_root

    problems = []
    for err in exc.errors():
        variable = f"HOOKBAY_{'_'.join(str(p) for p in err['loc']).upper()}"
        if err["type"] == "missing":
            hint = "set it to the value the services use"
            if variable == "HOOKBAY_SECRET_KEY":
                root = checkout_root()
                hint = (
                    f"set it to the services' key, or run `make run` once in {root} (it "
                    f"generates {SECRET_KEY_FILE})"
                    if root
                    else "set it to the value the services use (`openssl rand -hex 32` for a new "
                    "installation)"
                )
            problems.append(f"{variable} is not set: {hint}")
        else:
            problems.append(f"{variable}: {err['msg']}")
    return "invalid settings: " + "; ".join(problems)


def _fail(message: str) -> None:
    click.echo(f"hookbay-admin: {' '.join(message.split())}", err=True)
    sys.exit(1)


@click.group(cls=_Shell, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--json", "as_json", is_flag=True, help="Machine-readable JSON output.")
@click.pass_context
def hookbay(ctx: click.Context, as_json: bool) -> None:
    """hookbay-admin: the operator's commands, with direct database and Kafka access. Settings
    come from HOOKBAY_* variables. Owners use ``hookbay``, the dashboard API's client."""
    ctx.ensure_object(CliState).json = as_json
    for library in ("aiokafka", "pymongo"):  # failures are reported once, as one line, by _Shell
        logging.getLogger(library).setLevel(logging.CRITICAL)


@hookbay.command("migrate")
@json_option
@pass_state
def migrate_command(state: CliState) -> None:
    """Create MongoDB indexes and Kafka topics that are missing, upgrade events stored in an
    earlier layout, give each webhook's forward_url its route and destination, republish the
    configuration (idempotent)."""

    async def work(rt: Runtime) -> tuple[int, int, list[str], int]:  # indexes are made already
        from hookbay_common.db import DestinationRepository, WebhookRepository
        from hookbay_common.db.events import migrate_event_layout
        from hookbay_common.db.forwarding import route_forward_urls
        from hookbay_common.kafka import ensure_configured_topics

        moved = await migrate_event_layout(rt.db)
        routed = await route_forward_urls(
            WebhookRepository(rt.db, rt.box), DestinationRepository(rt.db, rt.box)
        )
        created = await ensure_configured_topics(rt.settings)
        return moved, routed, created, await publish_configuration(rt)

    moved, routed, created, published = state.run(work)
    state.emit(
        {
            "indexes": "ok", "events_upgraded": moved, "forward_urls_routed": routed,
            "topics_created": created, "config_published": published,
        },
        human=lambda c: c.print(
            f"indexes ok; {moved} events upgraded to the paged layout; {routed} forward_urls "
            f"given their route; topics created: {', '.join(created) or 'none'}; "
            f"{published} users, webhooks, destinations and transformations published to the "
            "change log"
        ),
    )  # fmt: skip


async def publish_configuration(rt: Runtime) -> int:
    """Publish every user, webhook (with its routes), destination and transformation as it is
    stored (how a migration that rewrote them, or a restored database, reaches the change log);
    how many were published."""
    from hookbay_common.db import (
        DestinationRepository,
        TransformationRepository,
        UserRepository,
        WebhookRepository,
    )

    published = 0
    for user in await UserRepository(rt.db).list_all():
        published += await rt.config.user_changed(user)
    for webhook in await WebhookRepository(rt.db, rt.box).list_all():
        published += await rt.config.webhook_changed(webhook)
    for destination in await DestinationRepository(rt.db, rt.box).list_all():
        published += await rt.config.destination_changed(destination)
    for transformation in await TransformationRepository(rt.db, rt.box).list_all():
        published += await rt.config.transformation_changed(transformation)
    return published


def build() -> click.Group:
    """The ``hookbay-admin`` group with every installed service's commands added."""
    from importlib.metadata import entry_points

    for entry in entry_points(group="hookbay.commands"):
        if entry.name not in hookbay.commands:
            hookbay.add_command(entry.load(), entry.name)
    return hookbay


def main(argv: Sequence[str] | None = None) -> None:
    build().main(args=argv, prog_name="hookbay-admin")
