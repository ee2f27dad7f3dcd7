"""The config file's tables: each is a typed section of `Settings`, parsed once
when the settings are loaded, with the unknown-key check inside every one."""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from gitreg import settings as settings_module
from gitreg.auth.cli import show_grants
from gitreg.auth.grants import Grant
from gitreg.auth.scopes import Scope
from gitreg.cli import main
from gitreg.errors import ConfigError
from gitreg.server.cli import _export_settings
from gitreg.services import build_services
from gitreg.setting_names import KeyCheck, KeyCollector
from gitreg.settings import SECTIONS, Settings, load_settings

ROOT = Path(__file__).resolve().parents[2]
GRANT = '[[grants]]\ngroup = "g"\nnamespace = "platform"\nscope = "publish"\n'
FORGE = '[forges.ghe]\nkind = "github"\napi_url = "https://ghe.example/api/v3"\n'


def _run(
    tmp_path: Path, toml: str, capsys: pytest.CaptureFixture[str], *argv: str
) -> tuple[int, str, str]:
    config = tmp_path / "gitreg.toml"
    config.write_text(toml)
    data = tmp_path / "data"
    code = main([*(argv or ["grants"]), "--data-dir", str(data), "--config", str(config)])
    out, err = capsys.readouterr()
    assert not data.exists()  # refused before anything was opened
    return code, out, err


def test_every_table_is_a_section() -> None:
    assert set(SECTIONS) == {"grants", "forges", "upstreams", "module_proxy"}


@pytest.mark.parametrize(
    ("toml", "name", "hint"),
    [
        ('[[grants]]\ngroup = "g"\nnamespace = "*"\nscpoe = "read"\n', "grants.scpoe", "scope"),
        ('[forges.github]\ntokn = "env:T"\n', "forges.github.tokn", "token"),
        (
            '[[module_proxy]]\nhost = "r.io"\nnamespace = ["a"]\n',
            "module_proxy.namespace",
            "namespaces",
        ),
    ],
)
def test_an_unknown_key_in_each_table_stops_with_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], toml: str, name: str, hint: str
) -> None:
    code, out, err = _run(tmp_path, toml, capsys)
    config = tmp_path / "gitreg.toml"
    prefix = name.rpartition(".")[0]
    line = f"unknown setting {name!r} in {config} (did you mean '{prefix}.{hint}'?)"
    assert (code, out, err) == (2, "", f"gitreg: error: {line}\n")


def test_upstreams_take_any_hostname_as_a_key(tmp_path: Path) -> None:
    config = tmp_path / "gitreg.toml"
    config.write_text('[upstreams]\n"registry.opentofu.org" = "https://tofu.example/"\n')
    settings = load_settings({"data_dir": tmp_path / "data"}, {}, config)
    assert settings.upstreams == {"registry.opentofu.org": "https://tofu.example"}


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ("grants = 1\n", "grants must be an array of tables"),
        ('grants = ["g"]\n', "[[grants]] entry 1 must be a table"),
        ('[[grants]]\ngroup = "g"\nnamespace = "a"\nscope = "owner"\n', "entry 1: scope must"),
        ('forges = "github"\n', "[forges] must be a table of tables"),
        ("[forges]\nghe = 1\n", "[forges.ghe] must be a table"),
        ('[forges.ghe]\napi_url = "https://x"\n', "[forges.ghe] kind must be one of"),
        ('[forges.ghe]\nkind = "github"\nhosts = "ghe.example"\n', "hosts must be a list"),
        ('[forges.ghe]\nkind = "github"\nallow_http = "no"\n', "allow_http must be true or"),
        ('[forges.ghe]\nkind = "github"\napi_url = "http://x"\n', "api_url must be an https"),
        ('upstreams = "r.io=https://x"\n', "[upstreams] must be a table"),
        ('[upstreams]\n"r.io" = "http://plain.example"\n', "must be an https:// URL"),
        ('[upstreams]\n"r.io" = 1\n', "[upstreams] upstream for 'r.io' must be"),
        ('[upstreams]\n"not a host" = "https://x"\n', "[upstreams]"),
        ('module_proxy = "r.io"\n', "array of tables"),
        ("module_proxy = [1]\n", "entries must be tables"),
        ('[[module_proxy]]\nhost = "r.io"\n', "namespaces must be a non-empty list"),
    ],
)
def test_a_malformed_table_stops_every_command_with_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], toml: str, message: str
) -> None:
    for argv in (["grants"], ["modules"], ["doctor"]):
        code, out, err = _run(tmp_path, toml, capsys, *argv)
        assert (code, out) == (2, ""), argv
        assert err.startswith("gitreg: error: ") and err.count("\n") == 1, err
        assert message in err


def test_a_malformed_table_also_fails_load_settings_itself(tmp_path: Path) -> None:
    config = tmp_path / "gitreg.toml"
    config.write_text('[[grants]]\ngroup = "g"\nnamespace = "a"\nscope = "owner"\n')
    with pytest.raises(ConfigError, match="scope must be") as raised:
        load_settings({"data_dir": tmp_path}, {}, config)
    assert raised.value.user_input  # exit 2, as for any refused input


def test_the_doctor_lists_unknown_names_before_a_malformed_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The unknown key is often why the table is malformed: the names come first.
    code, out, _ = _run(tmp_path, '[forges.ghe]\napi_ur = "https://x"\n', capsys, "doctor")
    assert code == 2
    assert "FAIL settings: unknown setting 'forges.ghe.api_ur'" in out


def test_each_table_is_parsed_once_when_the_settings_are_loaded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    calls: dict[str, int] = {}

    def counted(name: str) -> Any:
        parse = SECTIONS[name]

        def wrapper(raw: object, keys: KeyCheck) -> Any:
            calls[name] = calls.get(name, 0) + 1
            return parse(raw, keys)

        return wrapper

    for name in list(SECTIONS):
        monkeypatch.setitem(settings_module.SECTIONS, name, counted(name))
    config = tmp_path / "gitreg.toml"
    config.write_text(GRANT + FORGE)
    settings = load_settings({"data_dir": tmp_path / "data"}, {}, config)
    assert calls == dict.fromkeys(SECTIONS, 1)
    services = build_services(settings)  # sign-in, the mirror, the module proxy, ...
    services.close()
    assert show_grants(settings, "g") == 0
    assert calls == dict.fromkeys(SECTIONS, 1)
    assert settings.grants == (Grant("g", "platform", Scope.publish),)
    assert settings.forges["ghe"].api_url == "https://ghe.example/api/v3"
    assert "publish on namespace platform" in capsys.readouterr().out


def test_consumers_read_the_typed_values() -> None:
    settings = Settings(grants=(Grant("ops", "*", Scope.admin),))
    assert show_grants(settings, None) == 0
    assert Settings().forges.keys() == {"github", "gitlab"}


def test_serve_workers_get_the_same_tables(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "gitreg.toml"
    config.write_text(
        GRANT + FORGE + '[upstreams]\n"r.io" = "https://up.example"\n'
        '[[module_proxy]]\nhost = "registry.terraform.io"\nnamespaces = ["*"]\n'
    )
    settings = load_settings({"data_dir": tmp_path / "data", "port": 9443}, {}, config)
    environ: dict[str, str] = {}
    monkeypatch.setattr(os, "environ", environ)
    _export_settings(settings)
    assert not {"GITREG_GRANTS", "GITREG_FORGES", "GITREG_UPSTREAMS"} & set(environ)
    assert load_settings(environ=environ) == settings  # as a worker rebuilds them


def _tables(value: Mapping[str, Any]) -> list[tuple[str, Any]]:
    return [(name, value.get(name)) for name in SECTIONS if name in value]


def test_every_table_in_the_docs_has_only_known_keys() -> None:
    blocks = [
        (path.name, tomllib.loads(block))
        for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
        for block in re.findall(r"```toml\n(.*?)```", path.read_text(), re.S)
    ]
    tables = [(where, name, raw) for where, value in blocks for name, raw in _tables(value)]
    assert {name for _, name, _ in tables} == set(SECTIONS)
    for where, name, raw in tables:
        keys = KeyCollector(where)
        SECTIONS[name](raw, keys)
        assert keys.found == [], (where, name)
