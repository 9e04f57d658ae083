"""Typed settings, read once at start-up from ``HOOKBAY_*`` environment variables and passed in."""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from hookbay_common.topics import (
    DEFAULT_NAMESPACE,
    NAMESPACE_PATTERN,
    Topics,
    TopicSpec,
    delay_tiers,
)

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

DEFAULT_RETRY_SCHEDULE = (0.0, 10.0, 60.0, 600.0, 3600.0, 21600.0)
_PLACEHOLDER_SECRETS = {"changethis", "changeme", "secret", "please-change-me"}
_DURATION = re.compile(r"^(?P<n>\d+(?:\.\d+)?)(?P<unit>ms|s|m|h)?$")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


def parse_duration(text: str) -> float:
    """Seconds in ``"250ms"``, ``"10s"``, ``"1m"``, ``"6h"`` or a bare number of seconds."""
    match = _DURATION.match(text.strip())
    if match is None:
        raise ValueError(f"not a duration: {text!r} (use e.g. 0, 500ms, 10s, 1m, 6h)")
    return float(match["n"]) * _UNIT_SECONDS[match["unit"]]


def _split(value: Any) -> Any:
    if isinstance(value, str):
        return [part for part in (p.strip() for p in value.split(",")) if part]
    return value


class Settings(BaseSettings):
    """Every setting hookbay reads. Invalid values stop start-up with a message naming the variable."""

    model_config = SettingsConfigDict(env_prefix="HOOKBAY_", extra="ignore", frozen=True)

    kafka_bootstrap: str = "127.0.0.1:9092"
    kafka_partitions: int = Field(default=6, ge=1, le=1024)
    kafka_replication_factor: int = Field(default=1, ge=1, le=32)
    """Replicas of each topic ``hookbay-admin migrate`` creates (3 on a production cluster); topics that
    exist already are left as they are."""
    kafka_namespace: str = Field(default=DEFAULT_NAMESPACE, pattern=NAMESPACE_PATTERN)
    """Prefix of every topic name (``hookbay.events``); lets installations share a cluster."""
    mongo_url: str = "mongodb://127.0.0.1:27017/hookbay"
    redis_url: str | None = None
    plans_file: Path | None = None
    retry_schedule: Annotated[tuple[float, ...], NoDecode] = DEFAULT_RETRY_SCHEDULE
    forward_timeout: float = Field(default=10.0, gt=0, le=300)
    max_body_bytes: int = Field(default=4_500_000, ge=1, le=6_000_000)
    allow_private_destinations: bool = False
    trusted_proxies: Annotated[tuple[IPNetwork, ...], NoDecode] = ()
    secret_key: SecretStr
    public_url: str = "http://127.0.0.1:8080"
    log_level: str = "INFO"
    keepalive_timeout: float = Field(default=75.0, ge=1, le=3600)
    """Seconds an idle HTTP keep-alive connection stays open on ingest and the dashboard. Longer
    than the idle timeout of the proxy in front (nginx 60 s, AWS ALB 60 s) and of common clients
    (httpx 5 s), so the client side always closes first and never sends a request on a
    connection the server is closing at that moment (uvicorn's own default, 5 s, races httpx's)."""
    producer_reset_after: float = Field(default=10.0, gt=0, le=600)
    """A producer that had no send acknowledged for this long, while sends failed or waited
    and the broker answered, is replaced by a fresh one (``hookbay_common.producer``)."""
    producer_wedged_after: float = Field(default=120.0, gt=0, le=3600)
    """Sends failing for this long, replacements included, while the broker answers: the
    process reports itself unhealthy (``/healthz`` 503) so that it is restarted."""

    smtp_url: str | None = Field(default=None, pattern=r"^smtps?://[^/?#]+/?$")
    """The SMTP server of email alert channels (``smtp://host:port``, ``smtps://`` for TLS,
    optional ``user:password@``); unset: no email channels."""
    smtp_from: str = "hookbay@localhost"
    """The sender of alert emails."""

    @property
    def topics(self) -> Topics:
        return Topics(self.kafka_namespace)

    @property
    def redis_prefix(self) -> str:
        """Where this installation's Redis keys start (``<kafka_namespace>:``; ``hookbay:`` for
        the default): installations sharing one Redis keep their keys apart."""
        return f"{self.kafka_namespace}:"

    @property
    def retry_delays(self) -> tuple[float, ...]:
        """The waits before the second, third, ... attempt (the schedule minus its first entry)."""
        return self.retry_schedule[1:]

    @property
    def delay_tiers(self) -> tuple[float, ...]:
        """The delay tiers, shortest first: the retry delays and ``topics.DELAY_TIERS``."""
        return delay_tiers(self.retry_delays)

    def topic_specs(self) -> list[TopicSpec]:
        """Every topic this configuration needs, for ``ensure_topics``: one tier per retry
        delay and per ``delay_tiers`` entry."""
        return self.topics.specs((*self.retry_delays, *self.delay_tiers))

    @field_validator("smtp_url", mode="before")
    @classmethod
    def _no_smtp(cls, value: Any) -> Any:
        return None if value == "" else value

    @field_validator("retry_schedule", mode="before")
    @classmethod
    def _parse_schedule(cls, value: Any) -> Any:
        value = _split(value)
        if isinstance(value, list | tuple):
            parsed = tuple(parse_duration(str(v)) for v in value)
            if not parsed:
                raise ValueError("the retry schedule needs at least one entry (the first attempt)")
            return parsed
        return value

    @field_validator("trusted_proxies", mode="before")
    @classmethod
    def _parse_proxies(cls, value: Any) -> Any:
        value = _split(value)
        if isinstance(value, list | tuple):
            return tuple(ipaddress.ip_network(str(v), strict=False) for v in value)
        return value

    @field_validator("secret_key")
    @classmethod
    def _refuse_weak_secret(cls, value: SecretStr) -> SecretStr:
        raw = value.get_secret_value()
        if raw.lower() in _PLACEHOLDER_SECRETS:
            raise ValueError("is a placeholder; generate one, e.g. `openssl rand -hex 32`")
        if len(raw) < 32:
            raise ValueError("must be at least 32 characters (e.g. `openssl rand -hex 32`)")
        return value

    @field_validator("log_level")
    @classmethod
    def _known_level(cls, value: str) -> str:
        level = value.upper()
        if level not in {"DEBUG", "INFO", "WARNING", "ERROR"}:
            raise ValueError("must be one of DEBUG, INFO, WARNING, ERROR")
        return level

    @field_validator("mongo_url")
    @classmethod
    def _mongo_scheme(cls, value: str) -> str:
        if not value.startswith(("mongodb://", "mongodb+srv://")):
            raise ValueError("must start with mongodb:// or mongodb+srv://")
        return value
