"""Sign-in settings: GITREG_OIDC_* variables and their checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from gitreg.errors import ConfigError
from gitreg.settings import load_settings


def test_oidc_settings_come_from_their_variables(tmp_path: Path) -> None:
    settings = load_settings(
        {"data_dir": tmp_path},
        environ={
            "GITREG_OIDC_ISSUER": "https://idp.example.com/realms/acme",
            "GITREG_OIDC_CLIENT_ID": "gitreg",
            "GITREG_OIDC_CLIENT_SECRET": "env:IDP_SECRET",
            "GITREG_OIDC_SCOPES": "openid,email,groups",
            "GITREG_OIDC_GROUPS_CLAIM": "roles",
            "GITREG_LOGIN_TOKEN_TTL": "86400",
        },
    )
    assert settings.oidc_issuer == "https://idp.example.com/realms/acme"
    assert (settings.oidc_client_id, settings.oidc_client_secret) == ("gitreg", "env:IDP_SECRET")
    assert (settings.oidc_scopes, settings.oidc_groups_claim) == ("openid,email,groups", "roles")
    assert settings.login_token_ttl == 86400


def test_defaults_ask_only_for_scopes_every_issuer_knows(tmp_path: Path) -> None:
    settings = load_settings({"data_dir": tmp_path}, environ={})
    assert settings.oidc_issuer == ""
    assert settings.oidc_scopes == "openid profile email"
    assert settings.oidc_groups_claim == "groups"
    assert settings.login_token_ttl == 30 * 86400
    assert settings.session_ttl == 8 * 3600  # a working day: docs/ui.md, "Sign-in and tokens"


def test_session_ttl_comes_from_its_variable(tmp_path: Path) -> None:
    settings = load_settings({"data_dir": tmp_path}, environ={"GITREG_SESSION_TTL": "3600"})
    assert settings.session_ttl == 3600


def test_sign_in_limits_default_and_come_from_their_variables(tmp_path: Path) -> None:
    default = load_settings({"data_dir": tmp_path}, environ={})
    assert (default.sign_in_per_client, default.sign_in_pending_max) == (20, 10_000)
    env = {"GITREG_SIGN_IN_PER_CLIENT": "200", "GITREG_SIGN_IN_PENDING_MAX": "500"}
    settings = load_settings({"data_dir": tmp_path}, environ=env)
    assert (settings.sign_in_per_client, settings.sign_in_pending_max) == (200, 500)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"GITREG_OIDC_ISSUER": "http://idp.example.com"}, "must be an https URL"),
        ({"GITREG_OIDC_ISSUER": "ftp://idp.example.com"}, "must be an https URL"),
        ({"GITREG_OIDC_ISSUER": "https://idp.example.com/?x=1"}, "query or fragment"),
        ({"GITREG_OIDC_ISSUER": "https://idp.example.com"}, "needs oidc_client_id"),
        (
            {
                "GITREG_OIDC_ISSUER": "https://idp.example.com",
                "GITREG_OIDC_CLIENT_ID": "c",
                "GITREG_OIDC_SCOPES": "email profile",
            },
            "must include openid",
        ),
        ({"GITREG_LOGIN_TOKEN_TTL": "60"}, "login_token_ttl"),
        ({"GITREG_SESSION_TTL": "60"}, "session_ttl must be between 300 s and 30 days"),
        ({"GITREG_SESSION_TTL": str(31 * 86400)}, "session_ttl must be between"),
        ({"GITREG_SIGN_IN_PER_CLIENT": "0"}, "sign_in_per_client and sign_in_pending_max"),
        ({"GITREG_SIGN_IN_PENDING_MAX": "-1"}, "sign_in_per_client and sign_in_pending_max"),
    ],
)
def test_bad_sign_in_settings_stop_at_start(
    tmp_path: Path, env: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        load_settings({"data_dir": tmp_path}, environ=env)


def test_plain_http_is_allowed_only_to_this_machine(tmp_path: Path) -> None:
    env = {"GITREG_OIDC_ISSUER": "http://127.0.0.1:8080", "GITREG_OIDC_CLIENT_ID": "c"}
    assert load_settings({"data_dir": tmp_path}, environ=env).oidc_issuer.startswith("http://")


def test_a_bad_grants_table_stops_at_start(tmp_path: Path) -> None:
    config = tmp_path / "gitreg.toml"
    config.write_text('[[grants]]\ngroup = "g"\nnamespace = "a"\nscope = "owner"\n')
    with pytest.raises(ConfigError, match=r"\[\[grants\]\] entry 1: scope must be"):
        load_settings({"data_dir": tmp_path}, environ={}, config_file=config)
    assert not (tmp_path / "index.sqlite3").exists()  # refused before the index was opened
