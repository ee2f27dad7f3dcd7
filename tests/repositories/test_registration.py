"""Registration is one transaction; `gitreg repo remove` and `gitreg repo set`.

Real git repositories, the real CLI (`python -m gitreg`), and the real app
in-process for what terraform sees over HTTP.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from gitreg.app import create_app
from gitreg.services import build_services
from gitreg.settings import load_settings
from tests.support.gitrepo import GitRepo, simple_module
from tests.support.server import cli
from tests.support.webhooks import delivery

SECRET = "s3cret-for-tests"


def _tagged(make_repo: Callable[[str], GitRepo], name: str, *tags: str) -> GitRepo:
    repo = make_repo(name)
    simple_module(repo, output=name)
    repo.write("vpc/main.tf", 'output "vpc" {\n  value = "vpc"\n}\n')
    repo.commit()
    for tag in tags:
        repo.tag(tag)
    return repo


def _repos(data_dir: Path) -> list[dict[str, Any]]:
    return list(json.loads(cli(data_dir, "repo", "list", "--json").stdout))


def _modules(data_dir: Path) -> dict[str, list[str]]:
    rows = json.loads(cli(data_dir, "modules", "--json").stdout)
    return {r["address"]: [v["version"] for v in r["versions"]] for r in rows}


def _mirrors(data_dir: Path) -> list[str]:
    git_dir = data_dir / "git"
    return sorted(p.name for p in git_dir.iterdir()) if git_dir.exists() else []


def _fails(data_dir: Path, *args: str) -> str:
    result = cli(data_dir, *args, check=False)
    assert result.returncode != 0, result.stdout
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gitreg: error: "), result.stderr
    return lines[0]


@pytest.fixture
def app_client(data_dir: Path) -> Iterator[Callable[[], TestClient]]:
    """The real app in-process on the same data dir the CLI writes."""
    clients: list[TestClient] = []

    def start(**settings: Any) -> TestClient:
        flags = {"data_dir": data_dir, "job_workers": 0, "reconcile_interval": 0, **settings}
        client = TestClient(create_app(load_settings(flags, environ={})), "https://testserver")
        clients.append(client.__enter__())
        return client

    yield start
    for client in clients:
        client.__exit__(None, None, None)


# -- a failed registration leaves nothing ----------------------------------------


def test_repo_add_with_a_wrong_url_leaves_nothing_and_can_be_retried(
    data_dir: Path, tmp_path: Path, make_repo: Callable[[str], GitRepo]
) -> None:
    repo = _tagged(make_repo, "hello", "v1.0.0")
    error = _fails(data_dir, "repo", "add", str(tmp_path / "typo"), "--module", "acme/hello/null")
    assert "cannot fetch" in error
    assert _repos(data_dir) == []
    assert _modules(data_dir) == {}
    assert _mirrors(data_dir) == []  # no mirror, no staging directory left behind
    cli(data_dir, "repo", "add", str(repo.path), "--module", "acme/hello/null")
    assert _modules(data_dir) == {"acme/hello/null": ["1.0.0"]}
    [row] = _repos(data_dir)
    assert row["url"] == str(repo.path) and row["modules"] == ["acme/hello/null"]


def test_refused_module_link_leaves_no_repository(
    data_dir: Path, make_repo: Callable[[str], GitRepo]
) -> None:
    first = _tagged(make_repo, "first", "v1.0.0")
    second = _tagged(make_repo, "second", "v1.0.0")
    cli(data_dir, "repo", "add", str(first.path), "--module", "acme/hello/null", "--no-sync")
    error = _fails(
        data_dir, "repo", "add", str(second.path), "--module", "acme/hello/null", "--no-sync"
    )
    assert "already registered" in error
    assert [r["url"] for r in _repos(data_dir)] == [str(first.path)]


def test_refused_provider_link_leaves_no_repository(data_dir: Path) -> None:
    add = ["repo", "add", "--provider", "acme/thing", "--forge", "github", "--no-sync"]
    cli(data_dir, *add[:2], "https://github.com/acme/terraform-provider-thing", *add[2:])
    error = _fails(data_dir, *add[:2], "https://github.com/acme/other", *add[2:])
    assert "already registered with another repository" in error
    assert [r["url"] for r in _repos(data_dir)] == [
        "https://github.com/acme/terraform-provider-thing"
    ]


def test_webhook_auto_registration_refused_half_way_leaves_no_repository(
    data_dir: Path,
    tmp_path: Path,
    make_repo: Callable[[str], GitRepo],
    app_client: Callable[..., TestClient],
) -> None:
    # acme/greeting/null is taken by another repository, so the auto-registration
    # of acme/terraform-null-greeting is refused after its repository row was due.
    taken = _tagged(make_repo, "elsewhere", "v1.0.0")
    cli(data_dir, "repo", "add", str(taken.path), "--module", "acme/greeting/null", "--no-sync")
    client = app_client(
        webhook_secret="org-secret",
        auto_register_owners="acme",
        auto_register_remote=str(tmp_path / "forge" / "{forge_repo}"),
    )
    prepared = delivery(
        "github", "push-tag-created", repo="acme/terraform-null-greeting", secret="org-secret"
    )
    answer = client.post(prepared.route, content=prepared.body, headers=prepared.headers)
    assert answer.status_code == 409, answer.text
    assert answer.json()["errors"]
    assert [r["url"] for r in _repos(data_dir)] == [str(taken.path)]


def test_repo_add_no_sync_still_checks_the_url_policy(data_dir: Path) -> None:
    error = _fails(
        data_dir, "repo", "add", "http://127.0.0.1:9/x.git", "--module", "a/b/c", "--no-sync"
    )
    assert "http" in error
    assert _repos(data_dir) == []


# -- repo remove ---------------------------------------------------------------------


def test_repo_remove_refuses_while_versions_are_published(
    data_dir: Path, make_repo: Callable[[str], GitRepo]
) -> None:
    repo = _tagged(make_repo, "hello", "v1.0.0")
    cli(data_dir, "repo", "add", str(repo.path), "--module", "acme/hello/null")
    error = _fails(data_dir, "repo", "remove", "acme/hello/null")
    assert "1 published version" in error and "--keep-versions" in error
    assert len(_repos(data_dir)) == 1
    assert _modules(data_dir) == {"acme/hello/null": ["1.0.0"]}


def test_repo_remove_keep_versions_unregisters_but_keeps_serving(
    data_dir: Path, make_repo: Callable[[str], GitRepo], app_client: Callable[..., TestClient]
) -> None:
    repo = _tagged(make_repo, "hello", "v1.0.0")
    add = ["repo", "add", str(repo.path), "--module", "acme/hello/null"]
    cli(data_dir, *add, "--forge-repo", "acme/hello", "--webhook-secret", SECRET)
    assert _mirrors(data_dir) == ["1.git"]
    removed = cli(data_dir, "repo", "remove", str(repo.path), "--keep-versions")
    assert "keep serving" in removed.stdout
    assert _repos(data_dir) == []
    assert _mirrors(data_dir) == []
    repo.tag("v1.1.0")
    assert "was removed" in _fails(data_dir, "sync", "acme/hello/null")
    assert cli(data_dir, "sync").returncode == 0  # nothing left to sync
    client = app_client()
    listed = client.get("/v1/modules/acme/hello/null/versions")
    assert listed.status_code == 200, listed.text
    assert [v["version"] for v in listed.json()["modules"][0]["versions"]] == ["1.0.0"]
    download = client.get("/v1/modules/acme/hello/null/1.0.0/download")
    assert download.status_code == 204, download.text
    archive = client.get(download.headers["X-Terraform-Get"])
    assert archive.status_code == 200 and archive.content
    # Webhooks for it are now an unknown repository: answered as a wrong signature,
    # so no answer tells which names are registered.
    prepared = delivery("github", "push-tag-created", repo="acme/hello", secret=SECRET)
    answer = client.post(prepared.route, content=prepared.body, headers=prepared.headers)
    assert answer.status_code == 401, answer.text
    assert answer.json() == {"errors": ["github signature or token does not match"]}


def test_repo_remove_without_versions_removes_everything(
    data_dir: Path, make_repo: Callable[[str], GitRepo]
) -> None:
    repo = _tagged(make_repo, "hello")  # no tags: nothing published
    cli(data_dir, "repo", "add", str(repo.path), "--module", "acme/hello/null")
    assert _mirrors(data_dir) == ["1.git"]
    cli(data_dir, "repo", "remove", "acme/hello/null")
    assert _repos(data_dir) == [] and _modules(data_dir) == {} and _mirrors(data_dir) == []
    assert "not registered" in _fails(data_dir, "repo", "remove", "acme/hello/null")
    # The same address can be registered again from scratch.
    repo.tag("v2.0.0")
    cli(data_dir, "repo", "add", str(repo.path), "--module", "acme/hello/null")
    assert _modules(data_dir) == {"acme/hello/null": ["2.0.0"]}


def test_repo_remove_by_module_refuses_when_the_repository_feeds_more(
    data_dir: Path, make_repo: Callable[[str], GitRepo]
) -> None:
    repo = _tagged(make_repo, "mono")
    for name in ("one", "two"):
        cli(data_dir, "repo", "add", str(repo.path), "--module", f"acme/{name}/null", "--no-sync")
    assert "also feeds acme/two/null" in _fails(data_dir, "repo", "remove", "acme/one/null")
    cli(data_dir, "repo", "remove", str(repo.path))
    assert _repos(data_dir) == [] and _modules(data_dir) == {}


# -- repo set -------------------------------------------------------------------------


def test_repo_set_tag_prefix_and_subdir_are_used_by_the_next_sync(
    data_dir: Path, make_repo: Callable[[str], GitRepo]
) -> None:
    repo = _tagged(make_repo, "mono", "vpc/v1.0.0")
    cli(data_dir, "repo", "add", str(repo.path), "--module", "acme/vpc/aws")
    assert _modules(data_dir) == {"acme/vpc/aws": []}  # vpc/v1.0.0 is no version without a prefix
    cli(data_dir, "repo", "set", "acme/vpc/aws", "--tag-prefix", "vpc/", "--subdir", "vpc")
    cli(data_dir, "sync")
    [row] = json.loads(cli(data_dir, "modules", "--json").stdout)
    assert (row["subdir"], row["tag_prefix"]) == ("vpc", "vpc/")
    assert [v["tag"] for v in row["versions"]] == ["vpc/v1.0.0"]
    assert "invalid subdirectory" in _fails(
        data_dir, "repo", "set", "acme/vpc/aws", "--subdir", ".."
    )


def test_repo_set_remote_is_fetched_and_used_and_keeps_published_versions(
    data_dir: Path, tmp_path: Path, make_repo: Callable[[str], GitRepo]
) -> None:
    old = _tagged(make_repo, "old", "v1.0.0")
    new = _tagged(make_repo, "new", "v1.0.0", "v1.1.0")
    cli(data_dir, "repo", "add", str(old.path), "--module", "acme/hello/null")
    published = _modules(data_dir)["acme/hello/null"]
    before = json.loads(cli(data_dir, "modules", "--json").stdout)[0]["versions"][0]
    error = _fails(data_dir, "repo", "set", "acme/hello/null", "--remote", str(tmp_path / "typo"))
    assert "cannot fetch" in error
    assert [r["url"] for r in _repos(data_dir)] == [str(old.path)]
    cli(data_dir, "repo", "set", "acme/hello/null", "--remote", str(new.path))
    assert [r["url"] for r in _repos(data_dir)] == [str(new.path)]
    synced = cli(data_dir, "sync").stdout
    assert "acme/hello/null 1.1.0" in synced and "conflict" in synced
    row = json.loads(cli(data_dir, "modules", "--json").stdout)[0]
    assert published == ["1.0.0"]
    assert [v["version"] for v in row["versions"]] == ["1.0.0", "1.1.0"]
    assert row["versions"][0] == before  # immutable: 1.0.0 still from the old remote


def test_repo_remove_drops_pending_jobs_and_waits_for_a_running_one(
    data_dir: Path, make_repo: Callable[[str], GitRepo]
) -> None:
    repo = _tagged(make_repo, "hello")
    cli(data_dir, "repo", "add", str(repo.path), "--module", "acme/hello/null", "--no-sync")
    svc = build_services(load_settings({"data_dir": data_dir}, environ={}))
    try:
        [record] = svc.index.repos()
        svc.job_queue.submit(record.id, "sync", "cli", "first")
        running = svc.job_queue.store.claim("test-worker", time.time(), 600)
        assert running is not None
        svc.job_queue.submit(record.id, "sync", "cli", "second")  # queued behind it
        assert "is syncing this repository" in _fails(data_dir, "repo", "remove", str(repo.path))
        assert len(_repos(data_dir)) == 1
        assert svc.job_queue.store.finish(running.id, "test-worker", time.time(), "{}")
        cli(data_dir, "repo", "remove", str(repo.path))
        assert svc.job_queue.store.jobs() == [] and svc.index.repos() == []
    finally:
        svc.close()
