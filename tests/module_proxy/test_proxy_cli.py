"""`gitreg modules prefetch|proxied|import` and `gitreg mirror export`, run as a user would."""

from __future__ import annotations

import json
from pathlib import Path

from tests.module_proxy.conftest import MODULE, Upstream, ca_pem
from tests.support.server import cli


def _data_dir(root: Path, upstream: Upstream, name: str = "data") -> Path:
    data_dir = root / name
    data_dir.mkdir()
    (data_dir / "gitreg.toml").write_text(
        "[[module_proxy]]\n"
        'host = "registry.terraform.io"\n'
        f'url = "{upstream.registry_url}"\n'
        f'namespaces = ["{MODULE[0]}", "nested"]\n'
    )
    return data_dir


def _configuration(root: Path) -> Path:
    config = root / "config"
    (config / "sub").mkdir(parents=True)
    (config / "main.tf").write_text(
        'module "vpc" {\n  source  = "registry.example.com/terraform-aws-modules/vpc/aws"\n'
        '  version = "~> 1.2"\n}\n\nmodule "local" {\n  source = "./sub"\n}\n'
    )
    (config / "sub" / "main.tf").write_text(
        'module "other" {\n  source = "someone/else/aws"\n  version = "1.0.0"\n}\n'
    )
    return config


def test_prefetch_caches_matching_and_nested_versions(tmp_path: Path, upstream: Upstream) -> None:
    # v1.3.0 calls nested/child/aws, itself proxied: prefetch follows the call.
    upstream.work.write("nested.tf", 'module "c" {\n  source = "nested/child/aws"\n}\n')
    upstream.work.commit("1.3.0")
    upstream.work.tag("v1.3.0")
    upstream.push()
    upstream.registry.modules[MODULE]["1.3.0"] = upstream.location("v1.3.0")
    upstream.registry.modules[("nested", "child", "aws")] = {"0.1.0": upstream.location()}
    upstream.registry.modules[MODULE]["2.0.0"] = upstream.location()  # outside ~> 1.2
    data_dir = _data_dir(tmp_path, upstream)
    env = {"SSL_CERT_FILE": str(ca_pem(tmp_path))}
    out = cli(data_dir, "modules", "prefetch", str(_configuration(tmp_path)), env=env).stdout
    assert "cached 3 module version(s), 0 failed" in out
    assert "someone/else/aws is not in a proxied namespace" in out
    listed = json.loads(cli(data_dir, "modules", "proxied", "--json").stdout)
    assert sorted((v["module_key"], v["version"]) for v in listed["versions"]) == [
        ("registry.terraform.io/nested/child/aws", "0.1.0"),
        ("registry.terraform.io/terraform-aws-modules/vpc/aws", "1.2.0"),
        ("registry.terraform.io/terraform-aws-modules/vpc/aws", "1.3.0"),
    ]
    assert listed["moved_tags"] == []


def test_moved_tags_are_reported_by_proxied_check(tmp_path: Path, upstream: Upstream) -> None:
    data_dir = _data_dir(tmp_path, upstream)
    env = {"SSL_CERT_FILE": str(ca_pem(tmp_path))}
    cli(data_dir, "modules", "prefetch", str(_configuration(tmp_path)), env=env)
    upstream.work.write("main.tf", "# moved\n")
    upstream.work.commit("moved")
    upstream.work.tag("v1.2.0", annotated=True, force=True)
    upstream.push()
    checked = cli(data_dir, "modules", "proxied", "--check", env=env, check=False)
    assert checked.returncode == 1
    assert "moved: registry.terraform.io/terraform-aws-modules/vpc/aws 1.2.0" in checked.stdout
    assert "is kept" in checked.stdout


def test_export_then_import_serves_in_an_air_gapped_gitreg(
    tmp_path: Path, upstream: Upstream
) -> None:
    data_dir = _data_dir(tmp_path, upstream)
    env = {"SSL_CERT_FILE": str(ca_pem(tmp_path))}
    cli(data_dir, "modules", "prefetch", str(_configuration(tmp_path)), env=env)
    exported = cli(data_dir, "mirror", "export", str(tmp_path / "export")).stdout
    assert "exported 1 cached module version(s)" in exported
    inside = _data_dir(tmp_path, upstream, "inside")
    loaded = cli(inside, "modules", "import", str(tmp_path / "export")).stdout
    assert "imported 1 module version(s)" in loaded
    again = cli(inside, "modules", "import", str(tmp_path / "export")).stdout
    assert "1 already cached here were kept" in again
    before = json.loads(cli(data_dir, "modules", "proxied", "--json").stdout)["versions"]
    after = json.loads(cli(inside, "modules", "proxied", "--json").stdout)["versions"]
    assert after == before


def test_a_tampered_export_is_refused(tmp_path: Path, upstream: Upstream) -> None:
    data_dir = _data_dir(tmp_path, upstream)
    env = {"SSL_CERT_FILE": str(ca_pem(tmp_path))}
    cli(data_dir, "modules", "prefetch", str(_configuration(tmp_path)), env=env)
    cli(data_dir, "mirror", "export", str(tmp_path / "export"))
    for archive in (tmp_path / "export" / "modules" / "archives").iterdir():
        archive.write_bytes(b"not the archive")
    inside = _data_dir(tmp_path, upstream, "inside")
    refused = cli(inside, "modules", "import", str(tmp_path / "export"), check=False)
    assert refused.returncode != 0 and "does not match its sha256" in refused.stderr
    assert json.loads(cli(inside, "modules", "proxied", "--json").stdout)["versions"] == []


def test_modules_alone_and_modules_list_still_list_own_modules(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    cli(data_dir, "jobs", "reconcile")  # an empty registry: listing needs one
    plain = cli(data_dir, "modules", "--json").stdout
    assert json.loads(plain) == json.loads(cli(data_dir, "modules", "list", "--json").stdout)
