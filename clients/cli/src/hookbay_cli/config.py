"""Where the CLI finds its server and token: ``HOOKBAY_SERVER`` / ``HOOKBAY_TOKEN`` (they win),
else ``$XDG_CONFIG_HOME/hookbay/config.toml`` (``~/.config`` when unset), written by
``hookbay login`` readable by its owner only (0600, in a 0700 directory)."""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path


class NotLoggedIn(Exception):
    """Neither the environment nor the config file names a server and a token."""


@dataclass(frozen=True)
class Credentials:
    server: str
    token: str

    def __repr__(self) -> str:  # never the token, whoever prints this
        return f"Credentials(server={self.server!r}, token=<hidden>)"


def config_path(env: Mapping[str, str] = os.environ) -> Path:
    base = env.get("XDG_CONFIG_HOME") or str(Path(env.get("HOME", "~")).expanduser() / ".config")
    return Path(base) / "hookbay" / "config.toml"


def load(env: Mapping[str, str] = os.environ) -> Credentials:
    """The credentials to use: each of server and token from the environment when set there,
    else from the config file."""
    stored: dict[str, object] = {}
    path = config_path(env)
    if path.exists():
        with path.open("rb") as file:
            stored = tomllib.load(file)
    server = env.get("HOOKBAY_SERVER") or stored.get("server")
    token = env.get("HOOKBAY_TOKEN") or stored.get("token")
    if not isinstance(server, str) or not isinstance(token, str) or not server or not token:
        raise NotLoggedIn(
            "not logged in: run `hookbay login --server URL --token hbk_...` "
            "(or set HOOKBAY_SERVER and HOOKBAY_TOKEN)"
        )
    return Credentials(normalize_server(server), token)


def save(credentials: Credentials, env: Mapping[str, str] = os.environ) -> Path:
    """Write the config file (0600), replacing it whole: a reader never sees half a file."""
    path = config_path(env)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    text = f"server = {json.dumps(credentials.server)}\ntoken = {json.dumps(credentials.token)}\n"
    partial = path.with_suffix(".toml.partial")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, text.encode())
    finally:
        os.close(fd)
    os.replace(partial, path)
    return path


def forget(env: Mapping[str, str] = os.environ) -> bool:
    """Remove the config file; whether there was one."""
    path = config_path(env)
    existed = path.exists()
    path.unlink(missing_ok=True)
    return existed


def normalize_server(server: str) -> str:
    """``https://hooks.example.com`` without a trailing slash; a bare host gets ``https://``."""
    server = server.strip().rstrip("/")
    if "://" not in server:
        server = f"https://{server}"
    return server
