"""Real git repositories made with the git CLI inside a test's tmp_path."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

GIT_ENV = {
    "GIT_AUTHOR_NAME": "Test",
    "GIT_AUTHOR_EMAIL": "test@example.com",
    "GIT_COMMITTER_NAME": "Test",
    "GIT_COMMITTER_EMAIL": "test@example.com",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
}


def git(cwd: Path, *args: str, env: dict[str, str] | None = None) -> str:
    result = subprocess.run(
        ["git", *args],
        cwd=cwd,
        env={**os.environ, **GIT_ENV, **(env or {})},
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout.strip()


class GitRepo:
    """A working repository; `bare_remote()` gives a bare copy to push to."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.mkdir(parents=True, exist_ok=True)
        git(path, "init", "-q", "-b", "main")

    def write(self, relpath: str, text: str) -> None:
        target = self.path / relpath
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)

    def commit(self, message: str = "change", date: str = "2024-01-02T03:04:05Z") -> str:
        git(self.path, "add", "-A")
        env = {"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
        git(self.path, "commit", "-q", "--allow-empty", "-m", message, env=env)
        return git(self.path, "rev-parse", "HEAD")

    def tag(
        self, name: str, annotated: bool = False, ref: str = "HEAD", force: bool = False
    ) -> None:
        args = ["tag"]
        if force:
            args.append("-f")
        if annotated:
            args += ["-a", "-m", f"release {name}"]
        git(self.path, *args, "--", name, ref)

    def delete_tag(self, name: str) -> None:
        git(self.path, "tag", "-d", "--", name)

    def rev(self, ref: str) -> str:
        return git(self.path, "rev-parse", ref)


def simple_module(repo: GitRepo, output: str = "hello") -> None:
    """A root module with one variable and one output."""
    repo.write(
        "main.tf",
        'variable "greeting" {\n  default = "' + output + '"\n}\n\n'
        'output "greeting" {\n  value = var.greeting\n}\n',
    )
    repo.write("README.md", "# test module\n")


def released_module(repo: GitRepo, tag: str = "v1.0.0") -> GitRepo:
    """`simple_module`, committed and tagged: the smallest publishable repository."""
    simple_module(repo)
    repo.commit()
    repo.tag(tag)
    return repo
