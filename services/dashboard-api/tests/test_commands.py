"""Every ``hookbay-admin user|token|webhook`` command and error path, against the real database."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from pymongo import MongoClient

from hookbay_common.cli import build
from tests.support.factories import unique_name

Invoke = Callable[..., Result]


@pytest.fixture
def hookbay(env: dict[str, str]) -> Invoke:
    runner = CliRunner()

    def invoke(*args: str, input: str | None = None, **overrides: str | None) -> Result:
        return runner.invoke(
            build(), list(args), input=input, env={**env, **overrides}, catch_exceptions=False
        )

    return invoke


def ok_json(result: Result) -> Any:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def fails(result: Result, message: str, code: int = 1) -> None:
    assert result.exit_code == code, result.output
    assert message in result.stderr
    assert "Traceback" not in result.output
    if code == 1:
        assert result.stderr.count("\n") == 1
        assert result.stderr.startswith("hookbay-admin: ")


@pytest.fixture
def user(hookbay: Invoke) -> str:
    name = unique_name("u")
    ok_json(hookbay("user", "create", name, "--json"))
    return name


@pytest.fixture
def raw_db(env: dict[str, str]) -> Any:
    with MongoClient[dict[str, Any]](env["HOOKBAY_MONGO_URL"]) as client:
        yield client.get_default_database()


class TestUserCreate:
    def test_prints_a_working_token(self, hookbay: Invoke, raw_db: Any) -> None:
        name = unique_name("u")
        result = hookbay("user", "create", name)
        assert result.exit_code == 0
        assert f"created user {name} (plan free, user)" in result.stdout
        token = result.stdout.split("API token (shown once): ")[1].strip()
        assert token.startswith("hbk_")
        stored = raw_db.api_tokens.find_one({"username": name})
        assert stored["token_hash"] != token
        assert token not in str(stored)

    def test_json_plan_admin(self, hookbay: Invoke) -> None:
        name = unique_name("u")
        data = ok_json(hookbay("user", "create", name, "--plan", "pro", "--admin", "--json"))
        assert data["username"] == name
        assert data["plan"] == "pro"
        assert data["role"] == "admin"
        assert data["token"].startswith("hbk_")
        assert data["has_password"] is False

    def test_global_json_flag(self, hookbay: Invoke) -> None:
        data = ok_json(hookbay("--json", "user", "create", unique_name("u")))
        assert data["plan"] == "free"

    def test_password_stdin_stored_as_argon2id(self, hookbay: Invoke, raw_db: Any) -> None:
        name = unique_name("u")
        data = ok_json(
            hookbay("user", "create", name, "--password-stdin", "--json", input="correct horse\n")
        )
        assert data["has_password"] is True
        stored = raw_db.users.find_one({"_id": name})
        assert stored["password_hash"].startswith("$argon2id$")

    @pytest.mark.parametrize(
        ("args", "stdin", "message"),
        [
            (["Bad_Name"], None, "invalid username 'Bad_Name'"),
            (["{name}", "--plan", "gold"], None, "unknown plan 'gold' (known: free, pro, starter)"),
            (["{name}", "--password-stdin"], "short\n", "password must be at least 8 characters"),
            (["{name}", "--password-stdin"], "", "no password on standard input"),
        ],
    )
    def test_bad_input(
        self, hookbay: Invoke, args: list[str], stdin: str | None, message: str
    ) -> None:
        name = unique_name("u")
        fails(hookbay("user", "create", *(a.format(name=name) for a in args), input=stdin), message)

    def test_duplicate(self, hookbay: Invoke, user: str) -> None:
        fails(hookbay("user", "create", user), f"a user named '{user}' already exists")


class TestUserSetPlan:
    def test_changes_plan(self, hookbay: Invoke, user: str) -> None:
        assert ok_json(hookbay("user", "set-plan", user, "starter", "--json"))["plan"] == "starter"
        result = hookbay("user", "set-plan", user, "pro")
        assert result.stdout.strip() == f"{user}: plan pro"

    def test_unknown_user_and_plan(self, hookbay: Invoke, user: str) -> None:
        fails(hookbay("user", "set-plan", "nobody-here", "pro"), "no user named 'nobody-here'")
        fails(hookbay("user", "set-plan", user, "gold"), "unknown plan 'gold'")


class TestTokenCreate:
    def test_issues_distinct_tokens(self, hookbay: Invoke, user: str, raw_db: Any) -> None:
        first = ok_json(hookbay("token", "create", user, "--name", "ci", "--json"))
        second = ok_json(hookbay("token", "create", user, "--json"))
        assert first["token"] != second["token"]
        assert first["name"] == "ci"
        assert raw_db.api_tokens.count_documents({"username": user}) == 3
        human = hookbay("token", "create", user)
        assert f"API token for {user} (shown once): hbk_" in human.stdout

    def test_unknown_user(self, hookbay: Invoke) -> None:
        fails(hookbay("token", "create", "nobody-here"), "no user named 'nobody-here'")


class TestWebhookCreate:
    def test_create_with_secret_and_destination(
        self, hookbay: Invoke, user: str, raw_db: Any
    ) -> None:
        data = ok_json(
            hookbay("webhook", "create", user, "orders", "--secret", "s3cret-value",
                    "--forward-url", "http://127.0.0.1:9000/in", "--json")
        )  # fmt: skip
        assert data["url"] == f"http://127.0.0.1:8080/w/{user}/orders"
        assert data["secret"] == "********"
        assert data["forward_url"] == "http://127.0.0.1:9000/in"
        assert data["active"] is True
        assert data["id"].startswith("wh_")
        assert "s3cret-value" not in str(raw_db.webhooks.find_one({"_id": data["id"]}))

    def test_human_output_uses_public_url(self, hookbay: Invoke, user: str) -> None:
        result = hookbay(
            "webhook", "create", user, "billing", HOOKBAY_PUBLIC_URL="https://hooks.example.com/"
        )
        assert (
            result.stdout.strip()
            == f"created webhook {user}/billing: https://hooks.example.com/w/{user}/billing"
        )

    @pytest.mark.parametrize(
        ("args", "message"),
        [
            (["Orders"], "invalid webhook name 'Orders'"),
            (["a--b"], "invalid webhook name 'a--b'"),
            (["ok", "--secret", "short"], "secret must be at least 8 characters"),
            (["ok", "--forward-url", "ftp://example.com/"], "must start with http:// or https://"),
        ],
    )
    def test_bad_input(self, hookbay: Invoke, user: str, args: list[str], message: str) -> None:
        fails(hookbay("webhook", "create", user, *args), message)

    def test_private_destination_refused_unless_allowed(self, hookbay: Invoke, user: str) -> None:
        fails(
            hookbay("webhook", "create", user, "internal", "--forward-url", "http://169.254.169.254/",
                    HOOKBAY_ALLOW_PRIVATE_DESTINATIONS="false"),
            "resolves to a non-public address (169.254.169.254)",
        )  # fmt: skip

    def test_unknown_user_and_duplicate(self, hookbay: Invoke, user: str) -> None:
        fails(hookbay("webhook", "create", "nobody-here", "orders"), "no user named 'nobody-here'")
        ok_json(hookbay("webhook", "create", user, "orders", "--json"))
        fails(
            hookbay("webhook", "create", user, "orders"),
            f"user '{user}' already has a webhook named 'orders'",
        )


class TestWebhookSet:
    @pytest.fixture
    def hook(self, hookbay: Invoke, user: str) -> str:
        ok_json(hookbay("webhook", "create", user, "orders", "--json"))
        return user

    def test_set_and_remove(self, hookbay: Invoke, hook: str) -> None:
        data = ok_json(hookbay("webhook", "set", hook, "orders", "--secret", "new-secret-1",
                               "--forward-url", "http://127.0.0.1:9/x", "--json"))  # fmt: skip
        assert data["secret"] == "********"
        assert data["forward_url"] == "http://127.0.0.1:9/x"
        data = ok_json(hookbay("webhook", "set", hook, "orders", "--no-secret", "--json"))
        assert data["secret"] is None
        assert data["forward_url"] == "http://127.0.0.1:9/x"
        data = ok_json(hookbay("webhook", "set", hook, "orders", "--no-forward", "--json"))
        assert data["forward_url"] is None
        assert hookbay("webhook", "set", hook, "orders", "--no-forward").stdout.startswith(
            "updated webhook"
        )

    @pytest.mark.parametrize(
        ("args", "message"),
        [
            (
                ["--secret", "abcdefgh1", "--no-secret"],
                "--secret and --no-secret exclude each other",
            ),
            (
                ["--forward-url", "http://x/", "--no-forward"],
                "--forward-url and --no-forward exclude each other",
            ),
            ([], "nothing to change"),
        ],
    )
    def test_usage_errors(self, hookbay: Invoke, hook: str, args: list[str], message: str) -> None:
        fails(hookbay("webhook", "set", hook, "orders", *args), message, code=2)

    def test_unknown_webhook_and_bad_url(self, hookbay: Invoke, hook: str) -> None:
        fails(
            hookbay("webhook", "set", hook, "nope", "--no-secret"),
            f"user '{hook}' has no webhook named 'nope'",
        )
        fails(
            hookbay("webhook", "set", hook, "orders", "--forward-url", "http://u:p@x/"),
            "must not carry credentials",
        )


class TestWebhookVerification:
    def test_create_set_rotate_and_remove(self, hookbay: Invoke, user: str, raw_db: Any) -> None:
        data = ok_json(hookbay(
            "webhook", "create", user, "pay", "--verify", "stripe", "--secret", "whsec_first",
            "--tolerance", "120", "--json",
        ))  # fmt: skip
        assert data["secret"] is None
        verification = data["verification"]
        assert (verification["type"], verification["mode"]) == ("stripe", "enforce")
        assert (verification["secret"], verification["tolerance_s"]) == ("********", 120)
        data = ok_json(hookbay(
            "webhook", "set", user, "pay", "--verify", "stripe", "--mode", "record", "--json",
        ))  # fmt: skip
        assert data["verification"]["mode"] == "record"
        assert data["verification"]["secret"] == "********"  # kept
        data = ok_json(hookbay(
            "webhook", "set", user, "pay", "--verify", "stripe", "--secret", "whsec_second",
            "--keep-previous-for", "3600", "--json",
        ))  # fmt: skip
        assert data["verification"]["previous"]["secret"] == "********"
        assert data["verification"]["previous"]["expires_at"]
        stored = raw_db.webhooks.find_one({"username": user, "name": "pay"})
        assert "whsec_" not in str(stored)  # sealed at rest
        lines = hookbay("webhook", "list", user).stdout.splitlines()
        assert lines[1].split()[:5] == ["pay", "yes", "none", "stripe", "(record)"]
        data = ok_json(hookbay("webhook", "set", user, "pay", "--no-verify", "--json"))
        assert data["verification"] is None

    def test_meta_twilio_sendgrid_fields(self, hookbay: Invoke, user: str) -> None:
        meta = ok_json(hookbay(
            "webhook", "create", user, "meta", "--verify", "meta", "--secret", "app-secret",
            "--verify-token", "hub-token", "--json",
        ))  # fmt: skip
        assert meta["verification"]["verify_token"] == "********"
        twilio = ok_json(hookbay(
            "webhook", "create", user, "sms", "--verify", "twilio", "--secret", "auth-token",
            "--public-url", "https://hooks.example.com/w/sms", "--json",
        ))  # fmt: skip
        assert twilio["verification"]["public_url"] == "https://hooks.example.com/w/sms"
        grid = ok_json(hookbay(
            "webhook", "create", user, "mail", "--verify", "sendgrid", "--public-key", "MFkwEw",
            "--json",
        ))  # fmt: skip
        assert grid["verification"]["public_key"] == "MFkwEw"

    def test_generic_hmac_basic_and_api_key(self, hookbay: Invoke, user: str, raw_db: Any) -> None:
        generic = ok_json(hookbay(
            "webhook", "create", user, "acme", "--verify", "hmac", "--secret", "acme-key",
            "--hmac-header", "X-Acme-Signature", "--hmac-algorithm", "sha512",
            "--hmac-encoding", "base64", "--hmac-prefix", "v1=",
            "--hmac-payload", "{timestamp}.{body}", "--hmac-timestamp-header", "X-Acme-Time",
            "--json",
        ))  # fmt: skip
        assert generic["verification"]["secret"] == "********"
        assert generic["verification"]["hmac"] == {
            "header": "x-acme-signature", "algorithm": "sha512", "encoding": "base64",
            "prefix": "v1=", "payload": "{timestamp}.{body}",
            "timestamp_header": "x-acme-time", "id_header": None,
        }  # fmt: skip
        rotated = ok_json(hookbay(
            "webhook", "set", user, "acme", "--verify", "hmac", "--secret", "acme-key-2",
            "--keep-previous-for", "60", "--json",
        ))  # fmt: skip
        assert rotated["verification"]["hmac"] == generic["verification"]["hmac"]  # kept
        assert rotated["verification"]["previous"]["secret"] == "********"
        basic = ok_json(hookbay(
            "webhook", "create", user, "legacy", "--verify", "basic", "--basic-username", "ops",
            "--secret", "pa55word", "--json",
        ))  # fmt: skip
        assert basic["verification"]["basic"] == {"username": "ops", "password": "********"}
        keyed = ok_json(hookbay(
            "webhook", "create", user, "keyed", "--verify", "api-key",
            "--api-key-header", "X-Api-Key", "--secret", "k3y-value", "--json",
        ))  # fmt: skip
        assert keyed["verification"]["api_key"]["value"] == "********"
        stored = str(list(raw_db.webhooks.find({"username": user})))
        assert not any(s in stored for s in ("acme-key", "pa55word", "k3y-value"))

    def test_a_missing_field_is_named(self, hookbay: Invoke, user: str) -> None:
        fails(
            hookbay("webhook", "create", user, "hmac", "--verify", "hmac", "--secret", "k"),
            "verification.hmac",
        )
        fails(
            hookbay("webhook", "create", user, "pay", "--verify", "stripe"),
            "verification.secret: secret is required by verification type stripe",
        )
        fails(
            hookbay("webhook", "create", user, "sms", "--verify", "twilio", "--secret", "t0ken"),
            "verification.public_url",
        )

    @pytest.mark.parametrize(
        ("args", "message"),
        [
            (["--verify", "acme"], "'acme' is not one of"),
            (["--mode", "record"], "--mode: only with --verify TYPE"),
            (["--verify", "none", "--no-verify"], "--verify and --no-verify exclude each other"),
            (["--verify", "stripe", "--tolerance", "-1"], "-1 is not in the range x>=0"),
            (["--hmac-header", "x-sig"], "--hmac-header: only with --verify TYPE"),
            (["--verify", "basic", "--secret", "pw"], "give --basic-username with it"),
            (["--verify", "api-key", "--secret", "k"], "give --api-key-header with it"),
        ],
    )
    def test_usage_errors(self, hookbay: Invoke, user: str, args: list[str], message: str) -> None:
        ok_json(hookbay("webhook", "create", user, "orders", "--json"))
        fails(hookbay("webhook", "set", user, "orders", *args), message, code=2)

    def test_the_choices_are_the_models_types(self) -> None:
        from hookbay_common.models import VerificationType
        from hookbay_dashboard.commands import VERIFICATION_TYPES

        assert list(VERIFICATION_TYPES) == [t.value for t in VerificationType]


class TestWebhookActivation:
    def test_deactivate_activate(self, hookbay: Invoke, user: str) -> None:
        ok_json(hookbay("webhook", "create", user, "orders", "--json"))
        assert (
            ok_json(hookbay("webhook", "deactivate", user, "orders", "--json"))["active"] is False
        )
        assert hookbay("webhook", "activate", user, "orders").stdout.startswith(
            f"activated webhook {user}/orders"
        )
        fails(hookbay("webhook", "activate", user, "nope"), "has no webhook named 'nope'")
        fails(
            hookbay("webhook", "deactivate", "nobody-here", "orders"),
            "has no webhook named 'orders'",
        )


class TestWebhookList:
    def test_table_and_json(self, hookbay: Invoke, user: str) -> None:
        hookbay("webhook", "create", user, "zeta", "--secret", "zeta-secret")
        hookbay("webhook", "create", user, "alpha", "--forward-url", "http://127.0.0.1:1/")
        hookbay("webhook", "deactivate", user, "alpha")
        data = ok_json(hookbay("webhook", "list", user, "--json"))
        assert [(h["name"], h["active"], h["secret"]) for h in data] == [
            ("alpha", False, None),
            ("zeta", True, "********"),
        ]
        lines = hookbay("webhook", "list", user).stdout.splitlines()
        assert lines[0].split() == [
            "NAME",
            "ACTIVE",
            "SECRET",
            "VERIFY",
            "FORWARD",
            "URL",
            "RECEIVING",
            "URL",
        ]
        assert lines[1].split()[:5] == ["alpha", "no", "none", "none", "http://127.0.0.1:1/"]
        assert lines[2].split()[:5] == ["zeta", "yes", "set", "hookbay", "-"]
        assert "zeta-secret" not in "".join(lines)

    def test_empty_and_unknown(self, hookbay: Invoke, user: str) -> None:
        assert ok_json(hookbay("webhook", "list", user, "--json")) == []
        fails(hookbay("webhook", "list", "nobody-here"), "no user named 'nobody-here'")


class TestEnvironmentErrors:
    def test_missing_secret_key(self, hookbay: Invoke, monkeypatch: pytest.MonkeyPatch) -> None:
        """Outside a checkout (an installed image) nothing fills it in: one line naming it."""
        monkeypatch.setattr("hookbay_common.localenv.checkout_root", lambda: None)
        fails(
            hookbay("webhook", "list", "x", HOOKBAY_SECRET_KEY=None),
            "invalid settings: HOOKBAY_SECRET_KEY is not set",
        )

    def test_a_checkout_fills_in_the_local_key(
        self, hookbay: Invoke, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, env: dict[str, str]
    ) -> None:
        """In a checkout the key `make run` generated stands in for an unset HOOKBAY_SECRET_KEY."""
        (tmp_path / "deploy" / "local").mkdir(parents=True)
        (tmp_path / "deploy" / "local" / "infra.sh").touch()
        (tmp_path / ".cache").mkdir()
        (tmp_path / ".cache" / "secret_key").write_text(env["HOOKBAY_SECRET_KEY"])
        monkeypatch.setattr("hookbay_common.localenv.checkout_root", lambda: tmp_path)
        owner = unique_name("u")
        ok_json(hookbay("user", "create", owner, "--json"))
        created = hookbay("webhook", "create", owner, "keyed", "--secret", "local-secret",
                          HOOKBAY_SECRET_KEY=None)  # fmt: skip
        assert created.exit_code == 0, created.output
        listed = ok_json(hookbay("webhook", "list", owner, "--json", HOOKBAY_SECRET_KEY=None))
        assert [w["name"] for w in listed] == ["keyed"]

    def test_bad_plans_file(self, hookbay: Invoke, tmp_path: Any) -> None:
        path = tmp_path / "plans.yaml"
        path.write_text("plans: [")
        fails(
            hookbay("user", "create", unique_name("u"), HOOKBAY_PLANS_FILE=str(path)),
            "not valid YAML",
        )

    def test_unreachable_database(self, hookbay: Invoke) -> None:
        fails(
            hookbay(
                "webhook",
                "list",
                "x",
                HOOKBAY_MONGO_URL="mongodb://127.0.0.1:1/x?serverSelectionTimeoutMS=300",
            ),
            "database error: ServerSelectionTimeoutError",
        )


class TestConsoleScript:
    """The installed ``hookbay-admin`` executable, as a person runs it."""

    def run(self, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
        script = os.path.join(os.path.dirname(sys.executable), "hookbay-admin")
        return subprocess.run(
            [script, *args], capture_output=True, text=True, env={**os.environ, **env}, timeout=60
        )

    def test_help_lists_service_commands(self, env: dict[str, str]) -> None:
        result = self.run(env, "--help")
        assert result.returncode == 0
        for command in ("user", "token", "webhook", "destination", "route"):
            assert f"  {command} " in result.stdout

    def test_error_is_one_line_without_traceback(self, env: dict[str, str]) -> None:
        result = self.run(env, "user", "set-plan", "nobody-here", "pro")
        assert result.returncode == 1
        assert result.stderr == "hookbay-admin: no user named 'nobody-here'\n"

    def test_usage_error_exits_2(self, env: dict[str, str]) -> None:
        result = self.run(env, "webhook", "create")
        assert result.returncode == 2
        assert "Missing argument 'USERNAME'" in result.stderr


class TestMigrate:
    def test_creates_indexes_and_topics_idempotently(self, hookbay: Invoke, raw_db: Any) -> None:
        first = ok_json(hookbay("migrate", "--json"))
        assert first["indexes"] == "ok"
        stored = sum(raw_db[c].count_documents({}) for c in ("users", "webhooks", "destinations"))
        assert first["config_published"] == stored  # every user, webhook, destination
        assert ok_json(hookbay("migrate", "--json"))["topics_created"] == []
        assert "request_id" in raw_db.events.index_information()
        assert "owner_name" in raw_db.destinations.index_information()
        assert (
            hookbay("migrate")
            .stdout.strip()
            .startswith(
                "indexes ok; 0 events upgraded to the paged layout; 0 forward_urls given their "
                "route; topics created: none; "
            )
        )

    def test_gives_a_stored_forward_url_its_route_and_destination(
        self, hookbay: Invoke, raw_db: Any
    ) -> None:
        """A webhook as stored before forward_url was a route: no routes, only the field."""
        name = f"legacy-{uuid.uuid4().hex[:8]}"
        now = datetime.now(UTC).replace(microsecond=0)
        raw_db.webhooks.insert_one(
            {
                "_id": f"wh_{uuid.uuid4().hex[:20]}", "username": name, "name": "orders",
                "secret": None, "verification": None, "forward_url": "https://example.com/in",
                "active": True, "created_at": now, "updated_at": now,
            }
        )  # fmt: skip
        try:
            assert ok_json(hookbay("migrate", "--json"))["forward_urls_routed"] >= 1
            stored = raw_db.webhooks.find_one({"username": name})
            assert [r["name"] for r in stored["routes"]] == ["forward_url"]
            assert stored["routes"][0]["destination"] == "orders.forward_url"
            assert stored["forward_url"] == "https://example.com/in"
            destination = raw_db.destinations.find_one({"username": name})
            assert destination["name"] == "orders.forward_url"
            assert destination["url"] == "https://example.com/in"
            assert ok_json(hookbay("migrate", "--json"))["forward_urls_routed"] == 0
            assert raw_db.webhooks.find_one({"username": name})["routes"] == stored["routes"]
        finally:
            raw_db.webhooks.delete_many({"username": name})
            raw_db.destinations.delete_many({"username": name})

    def test_unreachable_kafka(self, hookbay: Invoke) -> None:
        fails(
            hookbay("migrate", HOOKBAY_KAFKA_BOOTSTRAP="127.0.0.1:1"),
            "Kafka error: KafkaConnectionError",
        )
