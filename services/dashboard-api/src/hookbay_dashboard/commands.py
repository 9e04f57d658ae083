"""``hookbay-admin user|token|webhook ...``: owner administration from the command line.

Registered under the ``hookbay.commands`` entry-point group; the ``hookbay-admin`` shell in
``hookbay_common.cli`` loads them. Each command is a thin adapter over the services, built as the API builds
them (``services_for``).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import click

from hookbay_common.cli import CliState, Runtime, json_option, pass_state, table

# Only click at import time: `hookbay-admin --help` loads this module (see hookbay_common.cli).
if TYPE_CHECKING:
    from collections.abc import Callable

    from rich.console import Console

    from hookbay_common.models import User, Webhook
    from hookbay_dashboard.accounts.service import AccountService, IssuedToken
    from hookbay_dashboard.services import Services
    from hookbay_dashboard.webhooks.schemas import VerificationWrite
    from hookbay_dashboard.webhooks.service import WebhookService

# The verification types, spelled out so that `--help` needs no model import (a test keeps
# them equal to hookbay_common.models.VerificationType).
VERIFICATION_TYPES = (
    "hookbay", "standard-webhooks", "stripe", "github", "shopify", "slack", "twilio", "zoom",
    "meta", "paddle", "linear", "pagerduty", "typeform", "intercom", "square", "gitlab",
    "sendgrid", "mailgun", "x", "hmac", "basic", "api-key", "none",
)  # fmt: skip


def services_for(rt: Runtime) -> Services:
    """The dashboard's services over the command's runtime: the same construction as the API's
    (``hookbay_dashboard.services``)."""
    from hookbay_dashboard.services import Services, Stores

    return Services(Stores.open(rt.db, rt.box), rt.settings, rt.plans, config=rt.config)


def accounts_for(rt: Runtime) -> AccountService:
    return services_for(rt).accounts()


def webhooks_for(rt: Runtime) -> WebhookService:
    return services_for(rt).webhooks()


def user_view(user: User) -> dict[str, Any]:
    from hookbay_dashboard.accounts.schemas import UserRead

    return UserRead.of(user).view()


def webhook_view(webhook: Webhook, public_url: str) -> dict[str, Any]:
    from hookbay_dashboard.webhooks.schemas import WebhookRead

    return WebhookRead.of(webhook, public_url).view()


def _read_password() -> str:
    from hookbay_common.errors import InvalidRequest

    line = sys.stdin.readline()
    password = line.removesuffix("\n").removesuffix("\r")
    if not password:
        raise InvalidRequest("--password-stdin: no password on standard input")
    return password


@click.group()
def user() -> None:
    """Users and their plans."""


@user.command("create")
@click.argument("username")
@click.option("--plan", default=None, help="Plan name (default: the plans file's default).")
@click.option("--admin", is_flag=True, help="Give the user the admin role.")
@click.option("--password-stdin", is_flag=True, help="Read a dashboard password from stdin.")
@json_option
@pass_state
def user_create(
    state: CliState, username: str, plan: str | None, admin: bool, password_stdin: bool
) -> None:
    """Create USERNAME and print its first API token (shown once)."""
    password = _read_password() if password_stdin else None

    async def work(rt: Runtime) -> tuple[User, IssuedToken]:
        return await accounts_for(rt).create_user(
            username, plan=plan, admin=admin, password=password
        )

    created, issued = state.run(work)

    def human(console: Console) -> None:
        console.print(f"created user {created.username} (plan {created.plan}, {created.role})")
        console.print(f"API token (shown once): {issued.token}")

    state.emit(
        {**user_view(created), "token": issued.token, "token_id": issued.record.id}, human=human
    )


@user.command("set-plan")
@click.argument("username")
@click.argument("plan")
@json_option
@pass_state
def user_set_plan(state: CliState, username: str, plan: str) -> None:
    """Move USERNAME to PLAN; every ingest replica applies the new rate limit at once."""

    async def work(rt: Runtime) -> User:
        return await accounts_for(rt).set_plan(username, plan)

    changed = state.run(work)
    state.emit(
        user_view(changed), human=lambda c: c.print(f"{changed.username}: plan {changed.plan}")
    )


@user.command("delete")
@click.argument("username")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@json_option
@pass_state
def user_delete(state: CliState, username: str, yes: bool) -> None:
    """Delete USERNAME and everything of theirs (webhooks, tokens, events)."""
    if not yes:
        click.confirm(f"Delete user {username} and all their webhooks and events?", abort=True)

    async def work(rt: Runtime) -> None:
        await accounts_for(rt).delete_user(username)

    state.run(work)
    state.emit(
        {"username": username, "deleted": True},
        human=lambda c: c.print(f"deleted user {username}"),
    )


@click.group()
def token() -> None:
    """Personal API tokens."""


@token.command("create")
@click.argument("username")
@click.option("--name", default="cli", show_default=True, help="A label for the token.")
@json_option
@pass_state
def token_create(state: CliState, username: str, name: str) -> None:
    """Issue a new API token for USERNAME (shown once)."""

    async def work(rt: Runtime) -> IssuedToken:
        return await accounts_for(rt).create_token(username, name=name)

    issued = state.run(work)
    state.emit(
        {"id": issued.record.id, "username": username, "name": name, "token": issued.token},
        human=lambda c: c.print(f"API token for {username} (shown once): {issued.token}"),
    )


def verification_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The ``--verify TYPE`` family; without ``--verify``, ``--secret`` is a plain secret."""
    options = [
        click.option(
            "--verify", "verify", type=click.Choice(VERIFICATION_TYPES), default=None,
            metavar="TYPE", help="Verify requests with this preset (see docs/owners/verification.md); "
            "--secret is then its secret.",
        ),
        click.option("--mode", type=click.Choice(("enforce", "record")), default=None,
                     help="enforce (default): refuse failing requests with 401; record: accept "
                     "and record the verdict."),
        click.option("--tolerance", type=click.IntRange(min=0), default=None, metavar="SECONDS",
                     help="Largest age of a signed timestamp (0: not checked)."),
        click.option("--keep-previous-for", type=click.IntRange(min=0), default=None,
                     metavar="SECONDS", help="With a new --secret: the old one stays valid "
                     "this long."),
        click.option("--public-url", default=None, help="twilio, square: the URL the sender signs."),
        click.option("--verify-token", default=None, help="meta: the handshake's verify token."),
        click.option("--public-key", default=None, help="sendgrid: the public key (base64 DER)."),
        click.option("--hmac-header", default=None, help="hmac: the signature's header."),
        click.option("--hmac-algorithm", type=click.Choice(("sha1", "sha256", "sha512")),
                     default=None, help="hmac: the hash (default sha256)."),
        click.option("--hmac-encoding", type=click.Choice(("hex", "base64")), default=None,
                     help="hmac: how the signature is written (default hex)."),
        click.option("--hmac-prefix", default=None, help="hmac: text before the signature, "
                     "e.g. 'sha256='."),
        click.option("--hmac-payload", default=None, metavar="TEMPLATE", help="hmac: what is "
                     "signed, over {body} {timestamp} {id} {url} (default '{body}')."),
        click.option("--hmac-timestamp-header", default=None,
                     help="hmac: the header {timestamp} comes from."),
        click.option("--hmac-id-header", default=None, help="hmac: the header {id} comes from."),
        click.option("--basic-username", default=None,
                     help="basic: the user name (--secret is the password)."),
        click.option("--api-key-header", default=None,
                     help="api-key: the header that carries the key (--secret is the key)."),
    ]  # fmt: skip
    for option in reversed(options):
        command = option(command)
    return command


_NESTED = ("hmac_", "basic_", "api_key_")
"""Options that go into the ``hmac``, ``basic`` and ``api_key`` objects of the verification."""
_CREDENTIALS = ("basic", "api-key")
"""Types whose --secret is a password or key inside their object (given with its name)."""


def verification_of(secret: str | None, options: dict[str, Any]) -> VerificationWrite | None:
    """The verification the ``--verify`` options ask for (``None`` without ``--verify``; its
    other options then are a usage mistake)."""
    verify = options.pop("verify")
    given = {k: v for k, v in options.items() if v is not None}
    if verify is None:
        if given:
            flags = ", ".join("--" + k.replace("_", "-") for k in sorted(given))
            raise click.UsageError(f"{flags}: only with --verify TYPE")
        return None
    from pydantic import ValidationError

    from hookbay_common.errors import InvalidRequest
    from hookbay_dashboard.webhooks.schemas import VerificationWrite

    rename = {"tolerance": "tolerance_s", "keep_previous_for": "keep_previous_for_s"}
    fields = {rename.get(k, k): v for k, v in given.items() if not k.startswith(_NESTED)}
    hmac = {k.removeprefix("hmac_"): v for k, v in given.items() if k.startswith("hmac_")}
    if hmac:
        fields["hmac"] = hmac
    username, header = given.get("basic_username"), given.get("api_key_header")
    if verify in _CREDENTIALS and secret is not None and username is None and header is None:
        needed = "--basic-username" if verify == "basic" else "--api-key-header"
        raise click.UsageError(f"--verify {verify} --secret: give {needed} with it")
    if username is not None:
        fields["basic"] = {"username": username, "password": secret}
    elif header is not None:
        fields["api_key"] = {"header": header, "value": secret}
    elif secret is not None:
        fields["secret"] = secret
    try:
        return VerificationWrite.model_validate({"type": verify, **fields})
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()
        )
        raise InvalidRequest(f"invalid verification: {problems}") from None


@click.group()
def webhook() -> None:
    """Webhooks: receiving URLs, secrets, verification, forward destinations."""


@webhook.command("create")
@click.argument("username")
@click.argument("name")
@click.option(
    "--secret", default=None,
    help="Signing secret: of the --verify preset, else a plain secret (HMAC-SHA256 of the body).",
)  # fmt: skip
@click.option("--forward-url", default=None, help="Destination that receives every event.")
@verification_options
@json_option
@pass_state
def webhook_create(
    state: CliState,
    /,
    username: str,
    name: str,
    secret: str | None,
    forward_url: str | None,
    **verify: Any,
) -> None:
    """Create webhook NAME for USERNAME."""
    verification = verification_of(secret, verify)
    plain = None if verification is not None else secret

    async def work(rt: Runtime) -> Webhook:
        return await webhooks_for(rt).create(
            username, name, secret=plain, forward_url=forward_url, verification=verification
        )

    _emit_webhook(state, state.run(work), "created")


@webhook.command("set")
@click.argument("username")
@click.argument("name")
@click.option(
    "--secret", default=None,
    help="Set or rotate the signing secret: of the --verify preset, else the plain secret.",
)  # fmt: skip
@click.option("--no-secret", is_flag=True, help="Remove the plain signing secret.")
@click.option("--forward-url", default=None, help="Set the forward destination.")
@click.option("--no-forward", is_flag=True, help="Remove the forward destination.")
@click.option("--no-verify", is_flag=True, help="Remove the verification.")
@verification_options
@json_option
@pass_state
def webhook_set(
    state: CliState,
    /,
    username: str,
    name: str,
    secret: str | None,
    no_secret: bool,
    forward_url: str | None,
    no_forward: bool,
    no_verify: bool,
    **verify: Any,
) -> None:
    """Change the secret, the verification or the forward destination of a webhook. With
    --verify of the webhook's current type, a secret not given is kept."""
    if secret is not None and no_secret:
        raise click.UsageError("--secret and --no-secret exclude each other")
    if forward_url is not None and no_forward:
        raise click.UsageError("--forward-url and --no-forward exclude each other")
    if verify["verify"] is not None and no_verify:
        raise click.UsageError("--verify and --no-verify exclude each other")
    verification = verification_of(secret, verify)
    changes = (secret, forward_url, verification)
    if all(c is None for c in changes) and not (no_secret or no_forward or no_verify):
        raise click.UsageError(
            "nothing to change: give --secret, --no-secret, --verify, --no-verify, "
            "--forward-url or --no-forward"
        )
    from hookbay_dashboard.webhooks.service import UNCHANGED

    plain = secret if verification is None else None
    new_secret = None if no_secret else (plain if plain is not None else UNCHANGED)
    new_url = None if no_forward else (forward_url if forward_url is not None else UNCHANGED)
    new_verification = None if no_verify else (verification or UNCHANGED)

    async def work(rt: Runtime) -> Webhook:
        return await webhooks_for(rt).change(
            username, name, secret=new_secret, forward_url=new_url,
            verification=new_verification,
        )  # fmt: skip

    _emit_webhook(state, state.run(work), "updated")


def _set_active(state: CliState, username: str, name: str, active: bool) -> None:
    async def work(rt: Runtime) -> Webhook:
        return await webhooks_for(rt).set_active(username, name, active)

    _emit_webhook(state, state.run(work), "activated" if active else "deactivated")


@webhook.command("activate")
@click.argument("username")
@click.argument("name")
@json_option
@pass_state
def webhook_activate(state: CliState, username: str, name: str) -> None:
    """Accept requests to the webhook again."""
    _set_active(state, username, name, True)


@webhook.command("deactivate")
@click.argument("username")
@click.argument("name")
@json_option
@pass_state
def webhook_deactivate(state: CliState, username: str, name: str) -> None:
    """Refuse requests to the webhook (403) until it is activated."""
    _set_active(state, username, name, False)


@webhook.command("delete")
@click.argument("username")
@click.argument("name")
@json_option
@pass_state
def webhook_delete(state: CliState, username: str, name: str) -> None:
    """Delete a webhook and its stats (its events stay until retention removes them)."""

    async def work(rt: Runtime) -> None:
        await webhooks_for(rt).delete(username, name)

    state.run(work)
    state.emit(
        {"username": username, "name": name, "deleted": True},
        human=lambda c: c.print(f"deleted webhook {username}/{name}"),
    )


@webhook.command("list")
@click.argument("username")
@json_option
@pass_state
def webhook_list(state: CliState, username: str) -> None:
    """List USERNAME's webhooks."""

    async def work(rt: Runtime) -> list[Webhook]:
        return await webhooks_for(rt).list_for_owner(username)

    hooks = state.run(work)
    views = [webhook_view(h, state.settings.public_url) for h in hooks]

    def human(console: Console) -> None:
        columns = ("NAME", "ACTIVE", "SECRET", "VERIFY", "FORWARD URL", "RECEIVING URL")
        rows = [
            (v["name"], "yes" if v["active"] else "no", "set" if v["secret"] else "none",
             _verify_cell(v), v["forward_url"], v["url"])
            for v in views
        ]  # fmt: skip
        table(console, columns, rows)

    state.emit(views, human=human)


def _verify_cell(view: dict[str, Any]) -> str:
    """The verification type (and mode when it only records); ``hookbay`` for a plain secret."""
    verification = view["verification"]
    if verification is None:
        return "hookbay" if view["secret"] else "none"
    mode = " (record)" if verification["mode"] == "record" else ""
    return f"{verification['type']}{mode}"


def _emit_webhook(state: CliState, hook: Webhook, verb: str) -> None:
    view = webhook_view(hook, state.settings.public_url)
    state.emit(
        view, human=lambda c: c.print(f"{verb} webhook {hook.username}/{hook.name}: {view['url']}")
    )
