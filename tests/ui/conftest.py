"""A registry for the web UI's tests: public and private modules, providers,
mirrored providers and proxied modules, and a TestClient that speaks HTTPS
(the token cookie is Secure) and asks for HTML as a browser does."""

from __future__ import annotations

import html
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.testclient import TestClient

from gitreg.app import create_app
from gitreg.auth.tokens import new_token, token_hash
from gitreg.cli import main
from gitreg.mirror.store import MirrorPackage
from gitreg.module_proxy.store import ProxiedVersion
from gitreg.services import Services
from gitreg.settings import load_settings
from tests.catalog.test_extraction import full_module
from tests.support.gitrepo import GitRepo, simple_module
from tests.support.oidc_browser import browse
from tests.support.oidc_provider import RunningProvider, oidc_provider
from tests.support.provider_dist import make_dist, public_armor, publisher_key

BASE = "https://registry.example.com"
HTML = {"accept": "text/html,application/xhtml+xml"}
# What a reader without access to `secret` must never find in any answer.
SECRET_WORDS = ("secret", "vault", "classified", "hidden_secret")


@dataclass
class Ui:
    client: TestClient
    svc: Services

    def token(self, namespaces: list[str], scope: str = "read") -> str:
        token = new_token()
        self.svc.auth.add_token(token_hash(token), token[:12], scope, namespaces, "", None)
        self.svc.cache.invalidate()
        return token

    def csrf(self) -> str:
        self.client.get("/ui/token")
        return str(self.client.cookies["gitreg_ui_csrf"])

    def sign_in(self, token: str) -> None:
        """Present `token` through the form, as a browser does."""
        answer = self.client.post("/ui/token", data={"csrf": self.csrf(), "token": token})
        assert answer.status_code == 303, answer.text


def publish(svc: Services, repo: GitRepo, namespace: str, name: str, system: str) -> None:
    record = svc.index.add_repo(str(repo.path), "")
    svc.index.add_module(record.id, namespace, name, system, "", "")
    svc.publisher.sync_repo(record)


def _providers(tmp_path: Path, data: Path) -> None:
    """acme/null (public) and secret/vault (private) through the real CLI."""
    key = tmp_path / "publisher.asc"
    key.write_bytes(public_armor(publisher_key()))
    for namespace, type_ in (("acme", "null"), ("secret", "vault")):
        assert main(["key", "add", namespace, str(key), "--data-dir", str(data)]) == 0
        dist = make_dist(type_, "1.0.0", ["linux_amd64"], b"binary" * 50, publisher_key())
        directory = dist.write(tmp_path / f"dist-{type_}")
        args = ["provider", "publish", f"{namespace}/{type_}", "1.0.0", str(directory)]
        assert main([*args, "--data-dir", str(data)]) == 0


def _mirrored(svc: Services) -> None:
    for namespace in ("hashicorp", "secret"):
        svc.mirror._store.add_package(
            MirrorPackage(
                f"registry.terraform.io/{namespace}/random",
                "3.6.0",
                "linux_amd64",
                "terraform-provider-random_3.6.0_linux_amd64.zip",
                (namespace[0] * 64)[:64].replace("s", "5").replace("h", "a"),
                10,
                "h1:x",
                ("5.0",),
                "",
                "https://example.com/x.zip",
                1.0,
            )
        )
        svc.module_proxy._store.add_version(
            ProxiedVersion(
                f"registry.terraform.io/{namespace}/label/null",
                "0.25.0",
                "registry.terraform.io",
                namespace,
                "label",
                "null",
                "git::https://example.com/x.git?ref=0.25.0",
                "https://example.com/x.git",
                "0.25.0",
                "",
                "c" * 40,
                "d" * 64,
                10,
                1.0,
            )
        )


@pytest.fixture
def ui(
    tmp_path: Path, make_repo: Callable[[str], GitRepo], capsys: pytest.CaptureFixture[str]
) -> Iterator[Ui]:
    data = tmp_path / "data"
    _providers(tmp_path, data)
    capsys.readouterr()
    # No job threads: the fixture publishes its modules itself, and a reconcile
    # of the repositories a test adds would log into a closed capture stream
    # after the test.
    settings = load_settings({"data_dir": data, "public_url": BASE, "job_workers": 0}, environ={})
    app = create_app(settings)
    svc: Services = app.state.services
    for namespace, name in [("acme", "vpc"), ("acme", "network"), ("secret", "vault")]:
        repo = make_repo(f"{namespace}-{name}")
        if name == "vpc":
            full_module(repo)
        else:
            simple_module(repo, f"hidden_{namespace}")
            words = "classified" if namespace == "secret" else "open to all"
            repo.write("README.md", f"# {name}\n\nThe {namespace} {name} module, {words}.\n")
        repo.commit()
        repo.tag("v1.0.0")
        repo.write("extra.tf", "# 1.1.0\n")
        repo.commit()
        repo.tag("v1.1.0")
        publish(svc, repo, namespace, name, "aws")
    _mirrored(svc)
    svc.auth.set_namespace_private("secret", True)
    svc.cache.invalidate()
    with TestClient(app, base_url="https://testserver", follow_redirects=False) as client:
        client.headers.update(HTML)
        yield Ui(client, svc)


# Sign-in: a registry configured with the real test identity
# provider (tests/support/oidc_provider.py), whose people are alice
# (platform-team) and bob (other). The provider runs once per test module.
SESSION_COOKIE = "__Host-gitreg_session"
ALICE_READS_PLATFORM = (
    '[[grants]]\ngroup = "platform-team"\nnamespace = "platform"\nscope = "publish"\n'
)
BOB_ADMIN = '[[grants]]\ngroup = "other"\nnamespace = "*"\nscope = "admin"\n'


@pytest.fixture(scope="module")
def idp() -> Iterator[RunningProvider]:
    with oidc_provider(BASE + "/ui/sign-in/callback") as running:
        yield running


@dataclass
class SignInSite:
    """A registry with sign-in, and clients for the people of the test."""

    app: Starlette
    svc: Services

    def browser(self) -> TestClient:
        client = TestClient(self.app, base_url="https://testserver", follow_redirects=False)
        client.headers.update(HTML)
        return client  # requests need no lifespan; the fixture's client runs the one

    def callback_url(self, client: TestClient, login: str) -> str:
        """Start a sign-in in `client` and complete it at the provider; the
        callback URL the provider sends the browser to (not visited yet)."""
        callback = BASE + "/ui/sign-in/callback"
        visit = browse(self.start(client), login, None, until=lambda u: u.startswith(callback))
        assert visit.status == 0, visit.text[:300]
        return visit.url.removeprefix(BASE)

    def start(self, client: TestClient, next_path: str = "/") -> str:
        """Press "Sign in with ..." on the sign-in page (its hidden `next`
        included); the issuer's authorization URL it answers with."""
        page = client.get("/ui/sign-in", params={"next": next_path})
        assert page.status_code == 200, page.text
        form = {name: _hidden(page.text, name) for name in ("csrf", "next")}
        start = client.post("/ui/sign-in", data=form)
        assert start.status_code == 303, start.text
        return str(start.headers["location"])

    def sign_in(self, client: TestClient, login: str) -> dict[str, list[str]]:
        """The callback answer's headers (several Set-Cookie among them)."""
        answer = client.get(self.callback_url(client, login))
        assert answer.status_code == 303, answer.text
        found: dict[str, list[str]] = {}
        for name, value in answer.headers.multi_items():
            found.setdefault(name.lower(), []).append(value)
        return found

    def csrf(self, client: TestClient) -> str:
        page = client.get("/ui/tokens")
        assert page.status_code == 200, page.text
        return _hidden(page.text, "csrf")


def _hidden(page: str, name: str) -> str:
    """The value of the form field `name` in `page` (as the template writes it)."""
    marker = f'name="{name}" value="'
    start = page.index(marker) + len(marker)
    return html.unescape(page[start : page.index('"', start)])


@pytest.fixture
def make_site(
    tmp_path: Path, make_repo: Callable[[str], GitRepo], idp: RunningProvider
) -> Iterator[Callable[[str], SignInSite]]:
    apps: list[TestClient] = []

    def make(grants: str) -> SignInSite:
        data = tmp_path / f"data-{len(apps)}"
        config = tmp_path / f"gitreg-{len(apps)}.toml"
        config.write_text(grants)
        env = idp.gitreg_env()
        settings = load_settings({"data_dir": data, "public_url": BASE}, env, config)
        app = create_app(settings)
        svc: Services = app.state.services
        for namespace in ("acme", "platform"):
            repo = make_repo(f"{namespace}-{len(apps)}")
            simple_module(repo, f"hello_{namespace}")
            repo.commit()
            repo.tag("v1.0.0")
            publish(svc, repo, namespace, "vpc", "aws")
        svc.auth.set_namespace_private("platform", True)
        svc.cache.invalidate()
        lifespan = TestClient(app, base_url="https://testserver").__enter__()
        apps.append(lifespan)
        return SignInSite(app, svc)

    yield make
    for client in apps:
        client.__exit__(None, None, None)
