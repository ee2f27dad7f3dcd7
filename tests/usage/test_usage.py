"""Who uses what, end to end: real downloads through a real
`gitreg serve` by two signed-in people in different groups, an operator token
and nobody, flushed by the server, then the API, the CLI and the web UI give
the same per-version, per-person and per-team numbers; old days fall out of the
window; only publishers of the namespace see any of it; names are inert HTML."""

from __future__ import annotations

import datetime
import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gitreg.auth.store import Identity, SessionRecord
from gitreg.auth.tokens import new_token, token_hash
from gitreg.errors import BadRequest
from gitreg.services import build_services
from gitreg.settings import load_settings
from gitreg.usage.cli import _shown
from gitreg.usage.service import check_days, parse_version_filter
from gitreg.usage.store import DownloadRow
from tests.support.gitrepo import GitRepo, released_module
from tests.support.server import RunningServer, cli, start_server
from tests.ui.test_ui_xss import assert_inert

ALICE = "alice@example.com"
BOB = 'bob"><script>alert(1)</script>@example.com'  # an IdP may send anything
CI = "<img src=x onerror=alert(1)> nightly CI"
USAGE = "/v1/modules/platform/vpc/aws/usage"


@dataclass
class Registry:
    server: RunningServer
    data: Path
    tokens: dict[str, str]

    def get(self, path: str, token: str = "", cookie: str = "") -> tuple[int, str, Any]:
        headers = {"Accept": "text/html" if cookie or not path.startswith("/v1/") else "*/*"}
        if token:
            headers["Authorization"] = f"Bearer {self.tokens[token]}"
        if cookie.startswith("session-"):  # signed in through the identity provider
            headers["Cookie"] = f"__Host-gitreg_session={self.tokens[cookie]}"
        elif cookie:
            headers["Cookie"] = f"gitreg_ui_token={self.tokens[cookie]}"
        request = urllib.request.Request(self.server.url + path, headers=headers)
        try:
            with urllib.request.urlopen(
                request, context=self.server.ssl_context(), timeout=10
            ) as answer:
                return answer.status, answer.read().decode(), answer.headers
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode(), error.headers


def _tokens(data: Path) -> dict[str, str]:
    """Sign-in tokens as `terraform login` makes them, and operator tokens."""
    svc = build_services(load_settings({"data_dir": data}, environ={}))
    made: dict[str, str] = {}
    people = {
        "alice": (Identity("sub-alice", ALICE, ("platform-team", "sre")), {"platform": "read"}),
        "bob": (Identity("sub-bob", BOB, ("platform-team", "data")), {"*": "admin"}),
    }
    for name, (who, grants) in people.items():
        made[name] = new_token()
        expires = time.time() + 3600
        svc.auth.add_login_token(
            token_hash(made[name]), made[name][:12], grants, who, "login", expires
        )
    operators = {
        "ci": ("read", [], CI),
        "publisher": ("publish", ["platform"], "release bot"),
        "reader": ("read", ["platform"], "reader"),
        "other": ("publish", ["acme"], "acme publisher"),
    }
    for name, (scope, namespaces, description) in operators.items():
        made[name] = new_token()
        svc.auth.add_token(
            token_hash(made[name]), made[name][:12], scope, namespaces, description, None
        )
    for name, scope in (("session-publisher", "publish"), ("session-reader", "read")):
        made[name] = new_token()  # a session id: random, kept hashed
        grants = {"platform": scope}
        record = SessionRecord(name, f"{name}@example.com", (), grants, "c" * 43, time.time(), 2e9)
        svc.auth.create_session(token_hash(made[name]), record)
    module = svc.index.find_module("platform", "vpc", "aws")
    assert module is not None
    old = (datetime.datetime.now(datetime.UTC).date() - datetime.timedelta(days=40)).isoformat()
    alice_id = max(t.id for t in svc.auth.tokens() if t.email == ALICE)
    svc.downloads.store.add_downloads(
        [DownloadRow("module", module.id, "1.0.0", old, alice_id, 50)]
    )
    svc.close()
    return made


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    root = tmp_path_factory.mktemp("usage")
    data = root / "data"
    repo = released_module(GitRepo(root / "vpc"))
    for tag in ("v1.1.0", "v2.0.0"):
        repo.write("main.tf", f'output "v" {{\n  value = "{tag}"\n}}\n')
        repo.commit(tag)
        repo.tag(tag)
    cli(data, "repo", "add", str(repo.path), "--module", "platform/vpc/aws")
    secret = released_module(GitRepo(root / "secret"))
    cli(data, "repo", "add", str(secret.path), "--module", "secret/vpc/aws")
    cli(data, "namespace", "set", "secret", "--private")
    cli(data, "module", "deprecate", "platform/vpc/aws", "1.0.0", "--reason", "use 2.x")
    tokens = _tokens(data)
    server = start_server(data, "--reconcile-interval", "0")
    found = Registry(server, data, tokens)
    try:
        downloads = [
            ("alice", "1.0.0"),
            ("alice", "v1.0.0"),  # the same version as Terraform may write it
            ("alice", "1.1.0"),
            ("bob", "1.1.0"),
            ("bob", "2.0.0"),
            ("ci", "1.0.0"),
            ("", "1.0.0"),
        ]
        for who, version in downloads:
            status, _, _ = found.get(f"/v1/modules/platform/vpc/aws/{version}/download", who)
            assert status == 204, (who, version)
        deadline = time.monotonic() + 30  # a few flush intervals on a busy machine
        while _total(found) != 7:
            assert time.monotonic() < deadline, found.get(USAGE, "publisher")[1]
            time.sleep(0.5)
        yield found
    finally:
        server.stop()


def _total(registry: Registry) -> int:
    status, body, _ = registry.get(USAGE, "publisher")
    assert status == 200, body
    total = json.loads(body)["downloads"]
    assert isinstance(total, int)
    return total


def _names(rows: list[dict[str, Any]]) -> list[tuple[str, int]]:
    return [(r["name"], r["downloads"]) for r in rows]


@pytest.mark.slow
def test_per_version_person_and_team_for_1x_in_30_days(registry: Registry) -> None:
    status, body, headers = registry.get(USAGE + "?versions=1&days=30", "publisher")
    assert status == 200 and headers["Cache-Control"] == "private, no-store"
    found = json.loads(body)
    assert found["module"] == "platform/vpc/aws" and found["downloads"] == 6
    assert found["per_version"] == [
        {"version": "1.0.0", "downloads": 4},
        {"version": "1.1.0", "downloads": 2},
    ]
    assert [(p["name"], p["kind"], p["downloads"]) for p in found["people"]] == [
        (ALICE, "person", 3),
        ("anonymous", "anonymous", 1),
        (BOB, "person", 1),
        (CI, "token", 1),
    ]
    assert found["people"][0]["versions"] == [
        {"version": "1.0.0", "downloads": 2},
        {"version": "1.1.0", "downloads": 1},
    ]
    # Alice and Bob are both in platform-team: it counts both of them.
    teams = [(t["name"], t["people"], t["downloads"]) for t in found["teams"]]
    assert teams == [("platform-team", 2, 4), ("sre", 1, 3), ("data", 1, 1)]


def test_filters_and_the_window(registry: Registry) -> None:
    every = json.loads(registry.get(USAGE, "bob")[1])  # admin everywhere may see it
    assert every["days"] == 30 and every["downloads"] == 7
    assert {"version": "2.0.0", "downloads": 1} in every["per_version"]
    # The rows of 40 days ago count only in a window that reaches them.
    wide = json.loads(registry.get(USAGE + "?versions=1.0&days=60", "publisher")[1])
    assert wide["per_version"] == [{"version": "1.0.0", "downloads": 54}]
    assert _names(wide["people"])[0] == (ALICE, 52)
    ranged = json.loads(registry.get(USAGE + "?versions=%3E%3D1.1.0%2C%3C3", "publisher")[1])
    assert [v["version"] for v in ranged["per_version"]] == ["1.1.0", "2.0.0"]
    assert json.loads(registry.get(USAGE + "?days=1", "publisher")[1])["downloads"] == 7
    for bad in ("?days=0", "?days=366", "?days=x", "?versions=%3D%3E1"):
        status, body, _ = registry.get(USAGE + bad, "publisher")
        assert status == 400 and json.loads(body)["errors"], bad


def test_only_publishers_of_the_namespace_see_it(registry: Registry) -> None:
    assert registry.get(USAGE)[0] == 401
    for token in ("alice", "reader", "ci", "other"):
        status, body, _ = registry.get(USAGE, token)
        assert status == 403 and "alice" not in body, token
    # A private namespace's module and one that does not exist answer alike.
    for path in ("/v1/modules/secret/vpc/aws/usage", "/v1/modules/nobody/vpc/aws/usage"):
        assert registry.get(path)[0] == 401
        assert [registry.get(path, t)[0] for t in ("publisher", "reader")] == [403, 403]
    assert registry.get("/v1/modules/platform/nothing/aws/usage", "publisher")[0] == 404
    assert registry.get("/v1/modules/secret/vpc/aws/usage", "bob")[0] == 200


def test_the_cli_answers_as_the_api(registry: Registry) -> None:
    args = ("module", "usage", "platform/vpc/aws", "--versions", "1")
    printed = json.loads(cli(registry.data, *args, "--json").stdout)
    assert printed == json.loads(registry.get(USAGE + "?versions=1", "publisher")[1])
    text = cli(registry.data, *args, "--days", "60").stdout
    assert "platform-team" in text and ALICE in text and "(operator token)" in text
    assert "56 downloads" in text  # 6 of this month and 50 of 40 days ago
    failed = cli(registry.data, *args, "--days", "400", check=False)
    assert failed.returncode != 0 and "between 1 and 365" in failed.stderr


def test_the_usage_tab_and_page_for_publishers_only(registry: Registry) -> None:
    page = "/modules/platform/vpc/aws/1.0.0"
    # A read and a publish token for the same namespace: never the same cached page.
    viewers = [("reader", False), ("publisher", True), ("reader", False)]
    viewers += [("session-reader", False), ("session-publisher", True), ("alice", False)]
    for cookie, shown in viewers:
        status, html, _ = registry.get(page, cookie=cookie)
        assert status == 200
        assert ('id="tab-usage"' in html) is shown, cookie
        link = 'href="/modules/platform/vpc/aws/usage?versions=1.0.0">Who still uses it</a>'
        assert (link in html) is shown, cookie
    status, html, headers = registry.get("/modules/platform/vpc/aws/usage", cookie="publisher")
    assert status == 200 and headers["Cache-Control"] == "private, no-store"
    assert_inert(html, "usage page")
    assert "platform-team" in html and ALICE in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "<script>alert" not in html
    assert "&lt;img src=x onerror=alert(1)&gt; nightly CI" in html
    status, html, _ = registry.get("/modules/platform/vpc/aws/usage?versions=1.0.0", cookie="bob")
    assert status == 200 and "<td>1.0.0</td><td>4</td>" in html and "2.0.0" not in html
    assert registry.get("/modules/platform/vpc/aws/usage", cookie="session-publisher")[0] == 200
    for bad in ("0", "366", "12345", "x", "%C2%B2", ""):  # "²" passes str.isdigit()
        path = f"/modules/platform/vpc/aws/usage?days={bad}"
        assert registry.get(path, cookie="publisher")[0] == 400, bad
    for cookie in ("reader", "alice", "other", "session-reader"):
        status, html, _ = registry.get("/modules/platform/vpc/aws/usage", cookie=cookie)
        assert status == 404 and ALICE not in html, cookie
    status, html, _ = registry.get("/modules/platform/vpc/aws/usage")
    assert status == 404 and "platform-team" not in html


def test_version_filters_prefixes_and_constraints() -> None:
    cases = {
        "1": ["1.0.0", "1.2.0-rc1", "1.20.3"],  # a prefix of numbers, not "= 1.0.0"
        "1.2": ["1.2.0-rc1"],
        "1.20.3": ["1.20.3"],
        ">= 1.0, < 2": ["1.0.0", "1.20.3"],  # Terraform: prereleases only when named
        "= 1.2.0-rc1": ["1.2.0-rc1"],
        "~> 1.2.0-rc1": [],
    }
    versions = ["0.1.0", "1.0.0", "1.2.0-rc1", "1.20.3", "10.0.0", "not-a-version"]
    for text, allowed in cases.items():
        wanted = parse_version_filter(text)
        got = [v for v in versions if wanted.allows(v)]
        assert got == allowed, text
    assert parse_version_filter("").allows("anything")  # no filter: every stored version
    for bad in ("1.x", "v1", "=> 1", "1.2.3.4"):
        with pytest.raises(BadRequest):
            parse_version_filter(bad)
    for days in (0, 366, -1):
        with pytest.raises(BadRequest, match="between 1 and 365"):
            check_days(days)
    assert check_days(1) == 1 and check_days(365) == 365


def test_the_cli_prints_names_without_terminal_escapes() -> None:
    assert _shown("eve\x1b]0;owned\x07@example.com\u009b") == "eve?]0;owned?@example.com?"
    assert _shown("zoë@example.com") == "zoë@example.com"
