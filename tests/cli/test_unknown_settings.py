"""A name that is no setting stops gitreg instead of being ignored:
a mistyped `read_defualt = "token"` must not leave a registry public."""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import tomllib
from pathlib import Path

import pytest

from gitreg import setting_names
from gitreg.cli import build_parser, main
from gitreg.errors import ConfigError
from gitreg.settings import NOT_SETTINGS, Settings, load_settings

ROOT = Path(__file__).resolve().parents[2]
FIELDS = [f.name for f in dataclasses.fields(Settings) if f.name not in NOT_SETTINGS]


def _load(tmp_path: Path, toml: str, environ: dict[str, str] | None = None) -> Settings:
    config = tmp_path / "gitreg.toml"
    config.write_text(toml)
    return load_settings({"data_dir": tmp_path / "data"}, environ or {}, config)


def test_an_unknown_key_in_the_file_is_refused_with_the_closest_name(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as raised:
        _load(tmp_path, 'read_defualt = "token"\n')
    config = tmp_path / "gitreg.toml"
    assert str(raised.value) == (
        f"unknown setting 'read_defualt' in {config} (did you mean 'read_default'?)"
    )
    assert raised.value.user_input  # exit 2, as for any refused input


def test_an_unknown_variable_is_refused_naming_the_environment(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as raised:
        load_settings({"data_dir": tmp_path}, {"GITREG_READ_DEFUALT": "token"})
    assert str(raised.value) == (
        "unknown setting 'GITREG_READ_DEFUALT' in the environment"
        " (did you mean 'GITREG_READ_DEFAULT'?)"
    )


@pytest.mark.parametrize(
    ("toml", "environ", "message"),
    [
        ("colour = 1\n", {}, "unknown setting 'colour' in {config}"),
        ("", {"GITREG_ZZZ": "1"}, "unknown setting 'GITREG_ZZZ' in the environment"),
    ],
)
def test_no_hint_when_nothing_is_close(
    tmp_path: Path, toml: str, environ: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        _load(tmp_path, toml, environ)
    assert str(raised.value) == message.format(config=tmp_path / "gitreg.toml")


@pytest.mark.parametrize(
    ("toml", "name", "hint"),
    [
        ('[forges.ghe]\nkind = "github"\napi_ur = "https://x"\n', "forges.ghe.api_ur", "api_url"),
        ('[[module_proxy]]\nhots = "a.example"\n', "module_proxy.hots", "host"),
        ('[module_proxy]\nnamespace = ["a"]\n', "module_proxy.namespace", "namespaces"),
        ('[[grants]]\ngroup = "g"\nnamespace = "*"\nscoep = "read"\n', "grants.scoep", "scope"),
        ("[mirror]\nallow = 1\n", "mirror", "mirror_allow"),
    ],
)
def test_an_unknown_key_in_a_table_is_refused(
    tmp_path: Path, toml: str, name: str, hint: str
) -> None:
    prefix = name.rpartition(".")[0]
    suggestion = f"{prefix}.{hint}" if prefix else hint
    with pytest.raises(ConfigError, match=re.escape(f"'{name}' in ")) as raised:
        _load(tmp_path, toml)
    assert str(raised.value).endswith(f"(did you mean '{suggestion}'?)")


def test_every_table_key_gitreg_reads_is_accepted(tmp_path: Path) -> None:
    settings = _load(
        tmp_path,
        'read-default = "token"\n'  # a dash for an underscore, as before
        "[[grants]]\n"
        'group = "g"\nnamespace = "*"\nscope = "read"\n'
        "[forges.ghe]\n"
        'kind = "github"\napi_url = "https://ghe.example/api/v3"\ntoken = "env:GHE_TOKEN"\n'
        'ca_file = "/etc/ca.pem"\nhosts = ["ghe.example"]\nallow_http = false\n'
        "[[module_proxy]]\n"
        'host = "registry.terraform.io"\nurl = "https://mirror.example"\nnamespaces = ["*"]\n'
        "[upstreams]\n"
        '"registry.terraform.io" = "https://artifactory.example/terraform"\n',
    )
    assert settings.read_default == "token" and settings.unknown_settings == ()


def test_every_toml_example_in_the_docs_is_accepted() -> None:
    blocks = [
        (path, block)
        for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
        for block in re.findall(r"```toml\n(.*?)```", path.read_text(), re.S)
    ]
    assert len(blocks) >= 5
    for path, block in blocks:
        assert setting_names.in_file(tomllib.loads(block), path.name, FIELDS) == [], block


@pytest.mark.parametrize(
    "name",
    [
        "GITREG_CONFIG",  # the config file itself
        "GITREG_TOKEN",  # `gitreg provider publish --url`
        "GITREG_URL",  # hooks/post-receive
        "GITREG_HOSTNAME",  # deploy/compose.yml
        "GITREG_TEST_CACHE",  # the test suite
        "GITREG_BENCH_NO_WAIT",  # the benchmarks
    ],
)
def test_variables_of_gitregs_own_tools_are_not_settings_but_allowed(
    tmp_path: Path, name: str
) -> None:
    value = str(tmp_path / "none.toml") if name == "GITREG_CONFIG" else "x"
    if name == "GITREG_CONFIG":
        Path(value).write_text("")
    load_settings({"data_dir": tmp_path}, {name: value})


def test_a_variable_an_env_reference_names_is_allowed(tmp_path: Path) -> None:
    environ = {"GITREG_WEBHOOK_SECRET": "env:GITREG_HOOK_KEY", "GITREG_HOOK_KEY": "s3cr3t"}
    load_settings({"data_dir": tmp_path}, environ)
    forge = '[forges.ghe]\nkind = "github"\ntoken = "env:GITREG_GHE"\n'
    _load(tmp_path, forge, {"GITREG_GHE": "t"})
    with pytest.raises(ConfigError, match="'GITREG_HOOK_KEY' in the environment"):
        load_settings({"data_dir": tmp_path}, {"GITREG_HOOK_KEY": "s3cr3t"})


def test_every_gitreg_variable_gitreg_and_its_tools_read_is_allowed() -> None:
    """The code, the git hook, the deployment files, the benchmarks and the
    test support read no `GITREG_*` variable a start would refuse."""
    known = {setting_names.ENV_PREFIX + name.upper() for name in FIELDS}
    refused = set()
    for folder in ("gitreg", "hooks", "deploy", "bench", "tests/support"):
        for path in (ROOT / folder).rglob("*"):
            if not path.is_file() or path.suffix == ".pyc" or path.name == "setting_names.py":
                continue
            for name in re.findall(r"GITREG_[A-Z0-9_]+", path.read_text(errors="replace")):
                if name.endswith("_") or name.startswith(setting_names.NOT_SETTINGS_PREFIXES):
                    continue  # a prefix, or a name of the tests' own
                if name not in known | setting_names.NOT_SETTINGS_VARIABLES:
                    refused.add(f"{path.relative_to(ROOT)}: {name}")
    assert sorted(refused) == []


def _leaf_commands() -> list[list[str]]:
    """Every command, with a placeholder for each argument it requires."""
    found = []

    def walk(parser: argparse.ArgumentParser, words: list[str]) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, [*words, name])
                return
        argv = list(words)
        for action in parser._actions:
            value = str(sorted(action.choices)[0]) if action.choices else "1"
            if not action.option_strings:
                argv.append(value)
            elif action.required:
                argv += [action.option_strings[0], value]
        for group in parser._mutually_exclusive_groups:
            if group.required:
                first = group._group_actions[0]
                argv += [first.option_strings[0], *(["a/b/c"] if first.nargs != 0 else [])]
        found.append(argv)

    walk(build_parser(), [])
    return found


@pytest.mark.parametrize("argv", _leaf_commands(), ids=" ".join)
def test_every_command_stops_with_one_line_and_exit_2(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
) -> None:
    config = tmp_path / "strict.toml"
    # The doctor's checks reach nothing on the network; any other command that
    # got past the names would stop at the bad port rather than run.
    valid = 'mirror_allow = ""\n' + ("port = 0\n" if argv != ["doctor"] else "")
    config.write_text('read_defualt = "token"\n' + valid)
    data = tmp_path / "data"
    code = main([*argv, "--data-dir", str(data), "--config", str(config)])
    out, err = capsys.readouterr()
    line = f"unknown setting 'read_defualt' in {config} (did you mean 'read_default'?)"
    assert code == 2
    if argv == ["doctor"]:  # the doctor reports, then exits as every command does
        assert f"FAIL settings: {line}" in out.splitlines()
    else:
        assert (out, err) == ("", f"gitreg: error: {line}\n")
        assert not data.exists()
    monkeypatch.setenv("GITREG_READ_DEFUALT", "token")
    config.write_text(valid)
    assert main([*argv, "--data-dir", str(data), "--config", str(config)]) == 2
    assert "'GITREG_READ_DEFUALT' in the environment" in "".join(capsys.readouterr())


def test_doctor_lists_every_unknown_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "gitreg.toml"
    config.write_text(
        'mirror_allow = ""\nread_defualt = "token"\n[forges.ghe]\napi_ur = "https://x"\n'
    )
    monkeypatch.setenv("GITREG_MAX_CONECTIONS", "10")
    code = main(["doctor", "--json", "--data-dir", str(tmp_path / "d"), "--config", str(config)])
    checks = {c["check"]: c for c in json.loads(capsys.readouterr().out)["checks"]}
    assert code == 2
    assert checks["settings"] == {
        "check": "settings",
        "status": "FAIL",
        "message": f"unknown setting 'read_defualt' in {config} (did you mean 'read_default'?);"
        f" unknown setting 'forges.ghe.api_ur' in {config} (did you mean 'forges.ghe.api_url'?);"
        " unknown setting 'GITREG_MAX_CONECTIONS' in the environment"
        " (did you mean 'GITREG_MAX_CONNECTIONS'?)",
    }
