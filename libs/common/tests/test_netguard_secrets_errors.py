from __future__ import annotations

import pytest

from hookbay_common.errors import ConfigurationError, HookbayError, UserNotFound, WebhookNotFound
from hookbay_common.netguard import DestinationNotAllowed, check_destination, is_public
from hookbay_common.secrets_box import TOKEN_PREFIX, SecretBox, hash_api_token, new_api_token


class TestCheckDestination:
    @pytest.mark.parametrize(
        ("url", "fragment"),
        [
            ("ftp://example.com/x", "http:// or https://"),
            ("file:///etc/passwd", "http:// or https://"),
            ("http:///path", "no host"),
            ("https://user:pw@example.com/", "credentials"),
            ("http://example.com:99999/", "malformed"),
            ("http://x/" + "a" * 3000, "longer than"),
        ],
    )
    async def test_shape(self, url: str, fragment: str) -> None:
        with pytest.raises(DestinationNotAllowed, match=fragment):
            await check_destination(url, allow_private=True)

    @pytest.mark.parametrize(
        "url",
        [
            "http://127.0.0.1:8000/hook",
            "http://localhost/hook",
            "http://10.1.2.3/",
            "http://192.168.0.10/",
            "http://172.16.5.4/",
            "http://169.254.169.254/latest/meta-data/",
            "http://[::1]/",
            "http://[fd00::1]/",
            "http://[::ffff:127.0.0.1]/",
            "http://0.0.0.0/",
            "http://100.64.0.1/",
        ],
    )
    async def test_private_addresses_refused(self, url: str) -> None:
        with pytest.raises(DestinationNotAllowed, match="non-public address") as caught:
            await check_destination(url, allow_private=False)
        assert caught.value.status_code == 400

    async def test_private_allowed_when_configured(self) -> None:
        await check_destination("http://127.0.0.1:8000/hook", allow_private=True)

    async def test_public_literal_allowed(self) -> None:
        await check_destination("https://93.184.215.14/hook", allow_private=False)

    async def test_unresolvable_host(self) -> None:
        with pytest.raises(DestinationNotAllowed, match="does not resolve"):
            await check_destination("http://no-such-host.invalid/", allow_private=False)

    def test_is_public(self) -> None:
        assert is_public("8.8.8.8")
        assert is_public("2606:4700::1111")
        assert not is_public("224.0.0.1")
        assert not is_public("::ffff:10.0.0.1")


class TestSecretBox:
    def test_round_trip_and_ciphertext_hides_secret(self) -> None:
        box = SecretBox("k" * 40)
        sealed = box.seal("whsec-very-secret")
        assert "whsec" not in sealed
        assert box.open(sealed) == "whsec-very-secret"

    def test_other_key_cannot_open(self) -> None:
        sealed = SecretBox("k" * 40).seal("s3cret-value")
        with pytest.raises(ConfigurationError, match="HOOKBAY_SECRET_KEY differs"):
            SecretBox("j" * 40).open(sealed)

    def test_tokens(self) -> None:
        token = new_api_token()
        assert token.startswith(TOKEN_PREFIX)
        assert len(token) > 40
        assert hash_api_token(token) == hash_api_token(token) != hash_api_token(new_api_token())
        assert token not in hash_api_token(token)


class TestErrors:
    def test_bodies_carry_error_message_and_fields(self) -> None:
        assert WebhookNotFound("alice", "orders").body() == {
            "error": "Webhook not found",
            "message": "user 'alice' has no webhook named 'orders'",
            "username": "alice",
            "webhookName": "orders",
        }
        assert UserNotFound("bob").status_code == 404

    def test_base_is_a_500(self) -> None:
        assert HookbayError("boom").status_code == 500
