"""A registry with public and private modules, a hosted provider name, and a
TestClient that speaks HTTPS (the token cookie is Secure)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from gitreg.app import create_app
from gitreg.auth.tokens import new_token, token_hash
from gitreg.services import Services
from gitreg.settings import load_settings
from tests.catalog.test_extraction import full_module
from tests.support.gitrepo import GitRepo, simple_module

BASE = "https://registry.example.com"
HTML = {"accept": "text/html,application/xhtml+xml"}


@dataclass
class Ui:
    client: TestClient
    svc: Services

    def token(self, namespaces: list[str], scope: str = "read") -> str:
        token = new_token()
        self.svc.auth.add_token(token_hash(token), token[:12], scope, namespaces, "", None)
        self.svc.cache.invalidate()
        return token

    def sign_in(self, token: str) -> None:
        """Present `token` through the form, as a browser does."""
        form = self.client.get("/ui/token")
        csrf = form.cookies.get("gitreg_ui_csrf") or self.client.cookies["gitreg_ui_csrf"]
        answer = self.client.post("/ui/token", data={"csrf": csrf, "token": token})
        assert answer.status_code == 303, answer.text


def publish(svc: Services, repo: GitRepo, namespace: str, name: str, system: str) -> None:
    record = svc.index.add_repo(str(repo.path), "")
    svc.index.add_module(record.id, namespace, name, system, "", "")
    svc.publisher.sync_repo(record)


@pytest.fixture
def ui(tmp_path: Path, make_repo: Callable[[str], GitRepo]) -> Iterator[Ui]:
    settings = load_settings({"data_dir": tmp_path / "data", "public_url": BASE}, environ={})
    app = create_app(settings)
    svc: Services = app.state.services
    for namespace, name in [("acme", "vpc"), ("acme", "network"), ("secret", "vault")]:
        repo = make_repo(f"{namespace}-{name}")
        if name == "vpc":
            full_module(repo)
        else:
            simple_module(repo, f"hidden_{namespace}")
            repo.write("README.md", f"# {namespace} {name}\n\nThe {namespace} {name} module.\n")
        repo.commit()
        repo.tag("v1.0.0")
        repo.write("extra.tf", "# 1.1.0\n")
        repo.commit()
        repo.tag("v1.1.0")
        publish(svc, repo, namespace, name, "aws")
    svc.auth.set_namespace_private("secret", True)
    svc.cache.invalidate()
    with TestClient(app, base_url="https://testserver", follow_redirects=False) as client:
        client.headers.update(HTML)
        yield Ui(client, svc)
