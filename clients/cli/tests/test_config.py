"""Where the CLI finds its server and token, and how ``hookbay login`` stores them."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from hookbay_cli.config import Credentials, NotLoggedIn, config_path, forget, load, save


class TestConfig:
    def test_saved_with_mode_0600_and_read_back(self, tmp_path: Path) -> None:
        env = {"XDG_CONFIG_HOME": str(tmp_path)}
        path = save(Credentials("https://hooks.example.com", 'hbk_"quoted"\\'), env)
        assert path == tmp_path / "hookbay" / "config.toml" == config_path(env)
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert load(env) == Credentials("https://hooks.example.com", 'hbk_"quoted"\\')
        assert "hbk_" not in repr(load(env))

    def test_the_environment_wins_each_value(self, tmp_path: Path) -> None:
        env = {"XDG_CONFIG_HOME": str(tmp_path)}
        save(Credentials("https://saved.example", "hbk_saved"), env)
        assert load({**env, "HOOKBAY_TOKEN": "hbk_env"}) == Credentials(
            "https://saved.example", "hbk_env"
        )
        both = {**env, "HOOKBAY_SERVER": "other.example/", "HOOKBAY_TOKEN": "hbk_env"}
        assert load(both) == Credentials("https://other.example", "hbk_env")

    def test_nothing_saved_or_set(self, tmp_path: Path) -> None:
        env = {"XDG_CONFIG_HOME": str(tmp_path)}
        with pytest.raises(NotLoggedIn, match="hookbay login"):
            load(env)
        assert forget(env) is False
