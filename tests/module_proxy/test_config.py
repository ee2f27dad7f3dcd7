"""`[[module_proxy]]` tables: which namespaces are proxied, and refused settings."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gitreg.errors import ConfigError
from gitreg.module_proxy.options import proxy_options
from gitreg.settings import load_settings


def _options(tmp_path: Path, toml: str) -> Any:
    path = tmp_path / "gitreg.toml"
    path.write_text(toml)
    return proxy_options(load_settings({"data_dir": tmp_path}, {}, path))


def test_listed_namespaces_win_over_the_wildcard(tmp_path: Path) -> None:
    options = _options(
        tmp_path,
        '[[module_proxy]]\nhost = "registry.terraform.io"\nnamespaces = ["*"]\n\n'
        '[[module_proxy]]\nhost = "registry.opentofu.org"\nurl = "https://mirror.example/"\n'
        'namespaces = ["CloudPosse"]\n',
    )
    assert options.upstream_for("cloudposse").host == "registry.opentofu.org"
    assert options.upstream_for("anyone").host == "registry.terraform.io"
    assert options.base_url("registry.opentofu.org") == "https://mirror.example"
    assert options.base_url("registry.terraform.io") == "https://registry.terraform.io"


def test_no_tables_proxy_nothing(tmp_path: Path) -> None:
    assert _options(tmp_path, "").upstream_for("terraform-aws-modules") is None


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ('[[module_proxy]]\nhost = "x y"\nnamespaces = ["a"]\n', "host"),
        ('[[module_proxy]]\nhost = "r.io"\nurl = "http://r.io"\nnamespaces = ["a"]\n', "https"),
        ('[[module_proxy]]\nhost = "r.io"\n', "namespaces"),
        ('module_proxy = "r.io"\n', "array of tables"),
    ],
)
def test_bad_tables_stop_start_up(tmp_path: Path, toml: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        _options(tmp_path, toml)
