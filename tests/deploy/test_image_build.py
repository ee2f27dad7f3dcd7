"""The image's build steps, run the way the image runs them.

No container daemon runs here, so the build stage of deploy/Dockerfile is a
script, deploy/build-image.sh; this test copies exactly the files the
Dockerfile copies, runs the script into a fresh virtualenv, and then uses that
virtualenv as the container would: `gitreg-entrypoint gitreg serve` configured
by GITREG_* variables only, probed with the image's own HEALTHCHECK command.
The fresh virtualenv installs gitreg's dependencies from the package index
(pip's cache makes repeated runs quick).
"""

from __future__ import annotations

import os
import shutil
import ssl
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from dockerfile_parse import DockerfileParser

from tests.support.server import free_port

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
STARTUP_SECONDS = 60.0


def _context_files() -> list[str]:
    """What the build stage COPYs from the build context."""
    parser = DockerfileParser(str(ROOT / "deploy" / "Dockerfile"))
    files: list[str] = []
    for instruction in parser.structure:
        if instruction["instruction"] == "FROM" and files:
            break  # the runtime stage copies from the build stage only
        if instruction["instruction"] == "COPY":
            files += instruction["value"].split()[:-1]
    return files


@pytest.fixture(scope="module")
def prefix(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("image")
    src = root / "src"
    for name in _context_files():
        source, target = ROOT / name, src / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, target)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PYTHON"] = sys.executable
    build = subprocess.run(
        ["sh", str(src / "deploy" / "build-image.sh"), str(src), str(root / "opt")],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    assert build.stdout.strip().endswith("gitreg 0.1.0")
    return root / "opt"


def _env(prefix: Path, home: Path, **settings: str) -> dict[str, str]:
    """The container's environment: no PYTHONPATH, so nothing comes from this checkout."""
    return {"PATH": f"{prefix / 'bin'}:/usr/bin:/bin", "HOME": str(home), **settings}


def _healthcheck(prefix: Path, env: dict[str, str]) -> int:
    command = [str(prefix / "bin" / "gitreg-healthcheck")]
    return subprocess.run(
        command, env=env, cwd=env["HOME"], capture_output=True, timeout=30
    ).returncode


@pytest.fixture
def serve(prefix: Path, tmp_path: Path) -> Iterator[Callable[..., dict[str, str]]]:
    started: list[subprocess.Popen[bytes]] = []

    def start(**settings: str) -> dict[str, str]:
        env = _env(prefix, tmp_path, GITREG_DATA_DIR=str(tmp_path / "data"), **settings)
        command = [str(prefix / "bin" / name) for name in ("gitreg-entrypoint", "gitreg")]
        with (tmp_path / "serve.log").open("ab") as log:
            process = subprocess.Popen(
                [*command, "serve"], env=env, cwd=tmp_path, stdout=log, stderr=log
            )
        started.append(process)
        deadline = time.monotonic() + STARTUP_SECONDS
        while _healthcheck(prefix, env) != 0:
            assert process.poll() is None, (tmp_path / "serve.log").read_text()
            assert time.monotonic() < deadline, (tmp_path / "serve.log").read_text()
            time.sleep(0.2)
        return env

    yield start
    for process in started:
        process.terminate()
        process.wait(timeout=30)


def test_the_virtualenv_holds_its_own_gitreg(prefix: Path, tmp_path: Path) -> None:
    python = str(prefix / "bin" / "python")
    code = "import gitreg; print(gitreg.__file__)"
    where = subprocess.run(
        [python, "-c", code],
        env=_env(prefix, tmp_path),
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert Path(where.stdout.strip()).is_relative_to(prefix)
    version = subprocess.run(
        [str(prefix / "bin" / "gitreg"), "--version"],
        env=_env(prefix, tmp_path),
        cwd=tmp_path,
        text=True,
        capture_output=True,
    )
    assert version.stdout.strip() == "gitreg 0.1.0"


def test_serve_from_gitreg_variables_behind_a_proxy(
    prefix: Path, tmp_path: Path, serve: Callable[..., dict[str, str]]
) -> None:
    port = str(free_port())
    env = serve(
        GITREG_HOST="127.0.0.1",
        GITREG_PORT=port,
        GITREG_NO_TLS="true",
        GITREG_PUBLIC_URL="https://registry.example.com",
    )
    for path in ("/healthz", "/readyz"):
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as answer:
            assert answer.status == 200
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/.well-known/terraform.json") as answer:
        assert b'"modules.v1"' in answer.read()
    # The entrypoint sent temporary files to the data volume (read-only root).
    assert (tmp_path / "data" / "tmp").is_dir()
    assert _healthcheck(prefix, env) == 0
    assert _healthcheck(prefix, {**env, "GITREG_PORT": str(free_port())}) == 1


def test_the_healthcheck_verifies_the_local_ca_by_default(
    prefix: Path, tmp_path: Path, serve: Callable[..., dict[str, str]]
) -> None:
    port = str(free_port())
    env = serve(GITREG_HOST="127.0.0.1", GITREG_PORT=port)
    ca = tmp_path / "data" / "tls" / "ca.pem"
    context = ssl.create_default_context(cafile=str(ca))
    with urllib.request.urlopen(f"https://127.0.0.1:{port}/healthz", context=context) as answer:
        assert answer.status == 200
    # Plain HTTP to the TLS port is not an answer from /healthz.
    assert _healthcheck(prefix, {**env, "GITREG_NO_TLS": "true"}) == 1


def test_the_entrypoint_reads_secret_files_into_variables(prefix: Path, tmp_path: Path) -> None:
    secret = tmp_path / "s3_secret"
    secret.write_text("s3cr3t\n")
    code = "import os; print(repr(os.environ.get('AWS_SECRET_ACCESS_KEY')), "
    code += "'AWS_SECRET_ACCESS_KEY_FILE' in os.environ, os.environ['TMPDIR'])"
    env = _env(
        prefix, tmp_path, AWS_SECRET_ACCESS_KEY_FILE=str(secret), GITREG_DATA_DIR=str(tmp_path)
    )
    entrypoint = str(prefix / "bin" / "gitreg-entrypoint")
    result = subprocess.run(
        [entrypoint, "python", "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True
    )
    assert result.stdout.split() == ["'s3cr3t'", "False", str(tmp_path / "tmp")]
    env["PGPASSWORD_FILE"] = str(tmp_path / "missing")
    refused = subprocess.run(
        [entrypoint, "true"], env=env, cwd=tmp_path, capture_output=True, text=True
    )
    assert refused.returncode == 1
    assert "PGPASSWORD_FILE" in refused.stderr
