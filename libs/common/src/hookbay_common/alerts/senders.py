"""One notification to one channel: the signed webhook, Slack's incoming webhook, PagerDuty's
Events API v2, an email through the operator's SMTP server. A failure raises ``ChannelError``
whose message names what happened (a status, an exception class), never a URL, a key or a
secret."""

from __future__ import annotations

import asyncio
import json
import smtplib
import time
from dataclasses import dataclass
from email.message import EmailMessage
from typing import Any, Final
from urllib.parse import unquote, urlsplit

import httpx

from hookbay_common.alerts.messages import Notification
from hookbay_common.alerts.signing import sign
from hookbay_common.models import AlertChannel, AlertChannelType, Notified

PAGERDUTY_EVENTS_URL: Final = "https://events.pagerduty.com/v2/enqueue"
SEND_TIMEOUT: Final = 10.0
USER_AGENT: Final = "hookbay-alerts"


class ChannelError(Exception):
    """A notification the channel did not take; the message is safe to store and show."""


@dataclass(frozen=True)
class SmtpSettings:
    """``HOOKBAY_SMTP_URL`` (``smtp://[user:password@]host:port``, ``smtps://`` for TLS from
    the start; ``smtp://`` upgrades with STARTTLS when the server offers it) and
    ``HOOKBAY_SMTP_FROM``."""

    url: str
    sender: str

    def parts(self) -> tuple[str, str, int, str | None, str | None]:
        split = urlsplit(self.url)
        if split.scheme not in ("smtp", "smtps") or not split.hostname:
            raise ValueError(
                "HOOKBAY_SMTP_URL must look like smtp://host:port or smtps://host:port"
            )
        port = split.port or (465 if split.scheme == "smtps" else 25)
        user = unquote(split.username) if split.username else None
        password = unquote(split.password) if split.password else None
        return split.scheme, split.hostname, port, user, password


class Senders:
    """Sends over one shared HTTP client (closed by its owner) and the SMTP server, if any."""

    def __init__(
        self, http: httpx.AsyncClient, *, smtp: SmtpSettings | None = None,
        timeout: float = SEND_TIMEOUT,
    ) -> None:  # fmt: skip
        self._http = http
        self._smtp = smtp
        self._timeout = timeout

    @property
    def email_enabled(self) -> bool:
        return self._smtp is not None

    async def send(self, channel: AlertChannel, notification: Notification) -> None:
        try:
            async with asyncio.timeout(self._timeout):
                await self._send(channel, notification)
        except TimeoutError:
            raise ChannelError(f"no answer within {self._timeout:g} s") from None

    async def _send(self, channel: AlertChannel, notification: Notification) -> None:
        match channel.type:
            case AlertChannelType.WEBHOOK:
                await self._webhook(channel, notification)
            case AlertChannelType.SLACK:
                await self._post(_secret(channel.url), {"text": notification.summary()}, {})
            case AlertChannelType.PAGERDUTY:
                await self._pagerduty(channel, notification)
            case AlertChannelType.EMAIL:
                await self._email(channel, notification)

    async def _webhook(self, channel: AlertChannel, notification: Notification) -> None:
        body = json.dumps(notification.body(), separators=(",", ":")).encode()
        timestamp = int(time.time())
        headers = {
            "webhook-id": notification.id,
            "webhook-timestamp": str(timestamp),
            "webhook-signature": sign(_secret(channel.secret), notification.id, timestamp, body),
        }
        await self._post(_secret(channel.url), body, headers)

    async def _pagerduty(self, channel: AlertChannel, notification: Notification) -> None:
        url = channel.events_url or PAGERDUTY_EVENTS_URL
        key = _secret(channel.routing_key)
        dedup = notification.issue.id
        if notification.kind is Notified.RESOLVED:
            await self._post(url, _pd(key, "resolve", dedup), {})
            return
        event = _pd(key, "trigger", dedup)
        event["payload"] = {
            "summary": notification.summary()[:1024], "source": "hookbay", "severity": "error",
            "component": notification.issue.destination or notification.issue.transformation,
            "group": notification.issue.type.value,
            "custom_details": notification.body()["issue"],
        }  # fmt: skip
        await self._post(url, event, {})
        if notification.test:  # leave no incident open behind a test
            await self._post(url, _pd(key, "resolve", dedup), {})

    async def _post(self, url: str, body: bytes | dict[str, Any], headers: dict[str, str]) -> None:
        headers = {"user-agent": USER_AGENT, "content-type": "application/json", **headers}
        content = body if isinstance(body, bytes) else json.dumps(body).encode()
        try:
            response = await self._http.post(url, content=content, headers=headers)
        except httpx.HTTPError as exc:
            raise ChannelError(f"request failed: {type(exc).__name__}") from None
        if not 200 <= response.status_code < 300:
            raise ChannelError(f"answered {response.status_code}")

    async def _email(self, channel: AlertChannel, notification: Notification) -> None:
        if self._smtp is None:
            raise ChannelError("no SMTP server is configured (HOOKBAY_SMTP_URL)")
        message = EmailMessage()
        message["From"] = self._smtp.sender
        message["To"] = channel.to or ""
        message["Subject"] = notification.summary()
        message["Message-ID"] = f"<{notification.id}@hookbay>"
        message.set_content(notification.text())
        try:
            await asyncio.to_thread(_smtp_send, self._smtp, message, self._timeout)
        except (OSError, smtplib.SMTPException) as exc:
            raise ChannelError(f"SMTP failed: {type(exc).__name__}") from None


def _pd(key: str, action: str, dedup: str) -> dict[str, Any]:
    return {"routing_key": key, "event_action": action, "dedup_key": dedup}


def _secret(value: Any) -> str:
    if value is None:
        raise ChannelError("the channel lacks a field it needs")
    return str(value.get_secret_value())


def _smtp_send(settings: SmtpSettings, message: EmailMessage, timeout: float) -> None:
    scheme, host, port, user, password = settings.parts()
    client: smtplib.SMTP
    if scheme == "smtps":
        client = smtplib.SMTP_SSL(host, port, timeout=timeout)
    else:
        client = smtplib.SMTP(host, port, timeout=timeout)
    with client:
        client.ehlo()
        if scheme == "smtp" and client.has_extn("starttls"):
            client.starttls()
        if user is not None:
            client.login(user, password or "")
        client.send_message(message)
