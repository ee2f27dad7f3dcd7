"""Settings precedence: flags > GITREG_* env > TOML file > defaults."""

from __future__ import annotations

from pathlib import Path

import pytest

from gitreg.errors import ConfigError
from gitreg.settings import load_settings


def test_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    settings = load_settings({}, environ={})
    assert settings.data_dir == tmp_path / "gitreg-data"
    assert (settings.host, settings.port, settings.no_tls) == ("127.0.0.1", 8443, False)


def test_precedence(tmp_path: Path) -> None:
    config = tmp_path / "gitreg.toml"
    config.write_text('port = 9000\nhost = "0.0.0.0"\npublic_url = "https://file.example"\n')
    env = {"GITREG_PORT": "9100", "GITREG_DATA_DIR": str(tmp_path / "d"), "GITREG_NO_TLS": "yes"}
    settings = load_settings({"port": 9200}, environ=env, config_file=config)
    assert settings.port == 9200
    assert settings.host == "0.0.0.0"
    assert settings.no_tls is True
    assert settings.public_url == "https://file.example"
    assert settings.data_dir == tmp_path / "d"


def test_config_file_in_data_dir_is_read(tmp_path: Path) -> None:
    (tmp_path / "gitreg.toml").write_text("git_timeout = 5\n[forges.github]\n")
    settings = load_settings({"data_dir": tmp_path}, environ={})
    assert settings.git_timeout == 5.0
    assert settings.forges["github"].hosts == ()  # the table replaces the default


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"GITREG_PORT": "eighty"}, "port"),
        ({"GITREG_NO_TLS": "maybe"}, "no_tls"),
        ({"GITREG_PUBLIC_URL": "registry.example.com"}, "public_url"),
        ({"GITREG_TLS_CERT": "/x.pem"}, "go together"),
    ],
)
def test_bad_values_are_clear_errors(tmp_path: Path, env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_settings({"data_dir": tmp_path}, environ=env)


def test_broken_config_file_is_a_clear_error(tmp_path: Path) -> None:
    config = tmp_path / "bad.toml"
    config.write_text("port = [\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_settings({"data_dir": tmp_path}, environ={}, config_file=config)


def test_every_setting_is_documented() -> None:
    import dataclasses

    from gitreg.settings import NOT_SETTINGS, Settings

    doc = (Path(__file__).parents[2] / "docs" / "configuration.md").read_text()
    missing = [
        f.name
        for f in dataclasses.fields(Settings)
        if f.name not in NOT_SETTINGS and f"`{f.name}`" not in doc
    ]
    assert missing == []
