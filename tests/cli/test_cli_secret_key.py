"""`secret_key_file` from the command line: `gitreg secret
generate-key`, and every refusal is one clear line, never a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.server import cli, free_port


def _refused(result: subprocess.CompletedProcess[str], message: str) -> None:
    assert result.returncode == 1, result.stdout + result.stderr
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_generate_key_then_every_refusal_is_one_line(tmp_path: Path) -> None:
    data = tmp_path / "data"
    key, other = tmp_path / "k1", tmp_path / "k2"
    for path in (key, other):
        made = cli(data, "secret", "generate-key", str(path))
        assert "keep a copy" in made.stdout
        assert path.stat().st_mode & 0o777 == 0o600
    _refused(cli(data, "secret", "generate-key", str(key), check=False), "never overwrites")

    cli(data, "secret", "rotate", "--secret-key-file", str(key))  # seals the signing keys
    wrong = cli(data, "token", "list", "--secret-key-file", str(other), check=False)
    _refused(wrong, "the secret key does not match the database")
    by_env = cli(data, "token", "list", check=False, env={"GITREG_SECRET_KEY_FILE": str(other)})
    _refused(by_env, "the secret key does not match the database")
    _refused(cli(data, "token", "list", check=False), "same secret_key_file")
    key.chmod(0o644)
    _refused(cli(data, "token", "list", "--secret-key-file", str(key), check=False), "chmod 600")


@pytest.mark.parametrize("workers", ["1", "2"])
def test_serve_with_the_wrong_key_does_not_start(tmp_path: Path, workers: str) -> None:
    data = tmp_path / "data"
    key, other = tmp_path / "k1", tmp_path / "k2"
    cli(data, "secret", "generate-key", str(key))
    cli(data, "secret", "generate-key", str(other))
    cli(data, "secret", "rotate", "--secret-key-file", str(key))
    command = [sys.executable, "-m", "gitreg", "serve", "--data-dir", str(data), "--no-tls"]
    command += ["--port", str(free_port()), "--secret-key-file", str(other), "--workers", workers]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60)
    _refused(result, "the secret key does not match the database")
