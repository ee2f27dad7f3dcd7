"""The webhook endpoints over HTTP (in-process client).

Workers are off (`job_workers=0`): the tests see exactly what a delivery
stored, then run the queue themselves with `JobRunner.drain()`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from gitreg.app import create_app
from gitreg.audit.store import AuditQuery
from gitreg.auth.tokens import new_token, token_hash
from gitreg.jobs.store import JobRecord
from gitreg.services import Services
from gitreg.settings import load_settings
from gitreg.storage.records import RepoRecord
from tests.support.gitrepo import GitRepo, simple_module
from tests.support.webhooks import Prepared, delivery, hmac_hex

SECRET = "s3cret-for-tests"
FORGE_REPO = "acme/terraform-null-hello"


@dataclass
class Registry:
    svc: Services
    client: TestClient
    make_repo: Callable[[str], GitRepo]

    def repo(
        self, name: str = "hello", forge_repo: str = FORGE_REPO, secret: str = SECRET
    ) -> tuple[GitRepo, RepoRecord]:
        """A real git repository with one tagged version, registered (not yet synced)."""
        repo = self.make_repo(name)
        simple_module(repo, output=name)
        repo.commit()
        repo.tag("v1.0.0")
        record = self.svc.index.add_repo(str(repo.path), forge_repo, secret)
        self.svc.index.add_module(record.id, "acme", name, "null", "", "")
        return repo, record

    def token(self, scope: str, namespaces: list[str] | None = None) -> dict[str, str]:
        """An API token as an Authorization header."""
        token = new_token()
        self.svc.auth.add_token(token_hash(token), token[:12], scope, namespaces or [], "", None)
        self.svc.cache.invalidate()
        return {"Authorization": f"Bearer {token}"}

    def post(self, prepared: Prepared, route: str | None = None) -> Any:
        return self.client.post(
            route or prepared.route, content=prepared.body, headers=prepared.headers
        )

    def jobs(self) -> list[JobRecord]:
        return self.svc.job_queue.store.jobs()

    def drain(self) -> list[JobRecord]:
        svc = self.svc
        return svc.job_runner().drain()

    def versions(self, name: str = "hello") -> list[str]:
        answer = self.client.get(f"/v1/modules/acme/{name}/null/versions")
        return [v["version"] for v in answer.json()["modules"][0]["versions"]]


def _registry(
    tmp_path: Path, make_repo: Callable[[str], GitRepo], **settings: Any
) -> Iterator[Registry]:
    flags = {"data_dir": tmp_path / "data", "job_workers": 0, "reconcile_interval": 0, **settings}
    app = create_app(load_settings(flags, environ={}))
    with TestClient(app, base_url="https://testserver") as client:
        yield Registry(app.state.services, client, make_repo)


@pytest.fixture
def registry(tmp_path: Path, make_repo: Callable[[str], GitRepo]) -> Iterator[Registry]:
    yield from _registry(tmp_path, make_repo)


def assert_error(answer: Any, status: int) -> str:
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"] == "application/json"
    errors = answer.json()["errors"]
    assert isinstance(errors, list) and errors
    return str(errors[0])


# -- accepted deliveries -----------------------------------------------------


@pytest.mark.parametrize(
    ("forge", "fixture"),
    [
        ("github", "push-tag-created"),
        ("github", "create-tag"),
        ("gitlab", "tag-push-created"),
        ("gitea", "push-tag-created"),
        ("gitea", "forgejo-push-tag-created"),
        ("bitbucket", "cloud-push-tag-created"),
    ],
)
def test_signed_tag_event_is_stored_as_a_job_before_the_answer(
    registry: Registry, forge: str, fixture: str
) -> None:
    registry.repo()
    answer = registry.post(delivery(forge, fixture, repo=FORGE_REPO, secret=SECRET))
    assert answer.status_code == 202, answer.text
    assert answer.json()["status"] == "queued"
    [job] = registry.jobs()
    assert (job.state, job.source, job.kind) == ("queued", forge, "sync")
    assert "v1.0.0" in job.reason
    [done] = registry.drain()
    assert done.state == "done"
    assert registry.versions() == ["1.0.0"]


def test_bitbucket_data_center_names_project_and_slug(registry: Registry) -> None:
    registry.repo(forge_repo="PLAT/hello")
    prepared = delivery(
        "bitbucket", "dc-refs-changed-tag-created", repo="PLAT/hello", secret=SECRET
    )
    assert registry.post(prepared).status_code == 202


def test_forge_names_match_case_insensitively(registry: Registry) -> None:
    registry.repo(forge_repo="Acme/Terraform-Null-Hello")
    prepared = delivery(
        "github", "push-tag-created", repo="acme/terraform-null-hello", secret=SECRET
    )
    assert registry.post(prepared).status_code == 202


# -- authentication ----------------------------------------------------------


def test_missing_signature_is_refused(registry: Registry) -> None:
    registry.repo()
    assert_error(registry.post(delivery("github", "push-tag-created")), 401)
    assert registry.jobs() == []


@pytest.mark.parametrize("forge", ["github", "gitlab", "gitea", "bitbucket"])
def test_wrong_secret_is_refused(registry: Registry, forge: str) -> None:
    registry.repo()
    fixture = {
        "github": "push-tag-created",
        "gitlab": "tag-push-created",
        "gitea": "push-tag-created",
        "bitbucket": "cloud-push-tag-created",
    }[forge]
    assert_error(registry.post(delivery(forge, fixture, secret="not-the-secret")), 401)
    assert registry.jobs() == []


def test_tampered_body_is_refused(registry: Registry) -> None:
    registry.repo()
    prepared = delivery("github", "push-tag-created", secret=SECRET)
    prepared.body = prepared.body.replace(b"v1.0.0", b"v9.9.9")
    assert_error(registry.post(prepared), 401)


@pytest.mark.parametrize(
    ("forge", "fixture", "route"),
    [
        ("github", "push-tag-created", "/webhooks/gitlab"),
        ("github", "push-tag-created", "/webhooks/gitea"),
        ("gitlab", "tag-push-created", "/webhooks/github"),
        ("gitea", "push-tag-created", "/webhooks/bitbucket"),
        ("bitbucket", "cloud-push-tag-created", "/webhooks/github"),
    ],
)
def test_forge_headers_on_the_wrong_route_are_refused(
    registry: Registry, forge: str, fixture: str, route: str
) -> None:
    registry.repo()
    assert_error(registry.post(delivery(forge, fixture, secret=SECRET), route=route), 401)
    assert registry.jobs() == []


def test_repository_without_secret_refuses_everything(
    registry: Registry, caplog: pytest.LogCaptureFixture
) -> None:
    """Fail closed, even for a delivery 'signed' with the empty secret. The
    answer is a wrong signature's (a registered name is not told apart);
    the log says why."""
    registry.repo(secret="")
    registry.repo("other", forge_repo="acme/other")
    prepared = delivery("github", "push-tag-created")
    prepared.headers["X-Hub-Signature-256"] = "sha256=" + hmac_hex("", prepared.body)
    with caplog.at_level(logging.WARNING, logger="gitreg.webhooks"):
        refused = registry.post(prepared)
    assert "no webhook secret is configured for 'acme/terraform-null-hello'" in caplog.text
    wrong = registry.post(delivery("github", "push-tag-created", repo="acme/other", secret="x"))
    assert_error(refused, 401)
    assert_same_answer(refused, wrong)
    assert_error(registry.post(delivery("github", "ping", secret="")), 401)
    assert registry.jobs() == []


def test_global_default_secret_covers_repositories_without_one(
    tmp_path: Path, make_repo: Callable[[str], GitRepo]
) -> None:
    for registry in _registry(tmp_path, make_repo, webhook_secret="global-secret"):
        registry.repo(secret="")
        ok = delivery("github", "push-tag-created", secret="global-secret")
        assert registry.post(ok).status_code == 202
        assert_error(registry.post(delivery("github", "push-tag-created", secret=SECRET)), 401)


def test_own_secret_wins_over_the_default(
    tmp_path: Path, make_repo: Callable[[str], GitRepo]
) -> None:
    for registry in _registry(tmp_path, make_repo, webhook_secret="global-secret"):
        registry.repo(secret=SECRET)
        default = delivery("github", "push-tag-created", secret="global-secret")
        assert_error(registry.post(default), 401)
        assert (
            registry.post(delivery("github", "push-tag-created", secret=SECRET)).status_code == 202
        )


def test_secret_references_are_read_at_use(
    registry: Registry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret_file = tmp_path / "hook-secret"
    secret_file.write_text("from-a-file\n")
    registry.repo("one", forge_repo="acme/one", secret=f"file:{secret_file}")
    monkeypatch.setenv("GITREG_TEST_WEBHOOK_SECRET", "from-the-env")
    registry.repo("two", forge_repo="acme/two", secret="env:GITREG_TEST_WEBHOOK_SECRET")
    one = delivery("gitlab", "tag-push-created", repo="acme/one", secret="from-a-file")
    two = delivery("gitlab", "tag-push-created", repo="acme/two", secret="from-the-env")
    assert registry.post(one).status_code == 202
    assert registry.post(two).status_code == 202
    secret_file.write_text("rotated\n")
    assert_error(
        registry.post(
            delivery("gitlab", "tag-push-created", repo="acme/one", secret="from-a-file")
        ),
        401,
    )


# -- bad input ---------------------------------------------------------------


def test_oversize_body_is_refused_before_parsing(
    tmp_path: Path, make_repo: Callable[[str], GitRepo]
) -> None:
    for registry in _registry(tmp_path, make_repo, webhook_max_bytes=4096):
        registry.repo()
        big = b'{"pad": "' + b"x" * 10_000 + b'"}'
        headers = {
            "X-GitHub-Event": "push",
            "X-Hub-Signature-256": "sha256=" + hmac_hex(SECRET, big),
        }
        assert_error(registry.client.post("/webhooks/github", content=big, headers=headers), 413)

        def chunks() -> Iterator[bytes]:  # no Content-Length: the cap applies while reading
            for _ in range(10):
                yield b"x" * 1000

        answer = registry.client.post("/webhooks/github", content=chunks(), headers=headers)
        assert_error(answer, 413)


@pytest.mark.parametrize(
    "body",
    [
        b"payload=%7B%22ref%22%3A%22refs%2Ftags%2Fv1%22%7D",  # GitHub's form encoding
        b"not json at all",
        b"\xff\xfe\x00garbage",
        b"[1, 2, 3]",
        b'"a string"',
        b"[" * 100_000 + b"]" * 100_000,
        b"",
    ],
)
def test_non_json_bodies_are_refused(registry: Registry, body: bytes) -> None:
    registry.repo()
    headers = {"X-GitHub-Event": "push", "X-Hub-Signature-256": "sha256=" + hmac_hex(SECRET, body)}
    assert_error(registry.client.post("/webhooks/github", content=body, headers=headers), 400)


def test_malformed_payload_fields_are_400_after_authentication(registry: Registry) -> None:
    registry.repo()
    body = json.dumps({"ref": 12, "repository": {"full_name": FORGE_REPO}}).encode()
    headers = {"X-GitHub-Event": "push", "X-Hub-Signature-256": "sha256=" + hmac_hex(SECRET, body)}
    assert_error(registry.client.post("/webhooks/github", content=body, headers=headers), 400)
    headers["X-Hub-Signature-256"] = "sha256=" + hmac_hex("wrong", body)
    assert_error(registry.client.post("/webhooks/github", content=body, headers=headers), 401)


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE"])
def test_other_methods_get_a_json_405(registry: Registry, method: str) -> None:
    assert_error(registry.client.request(method, "/webhooks/github"), 405)


def test_repository_field_of_the_wrong_type_is_a_400(registry: Registry) -> None:
    body = json.dumps({"repository": {"full_name": ["x"]}}).encode()
    answer = registry.client.post("/webhooks/github", content=body)
    assert_error(answer, 400)


# -- ping, unknown events, unknown repositories ------------------------------


@pytest.mark.parametrize(
    ("forge", "fixture"),
    [
        ("github", "ping"),
        ("github", "issues-opened"),
        ("github", "push-branch"),
        ("gitlab", "push-branch"),
        ("gitea", "push-branch"),
        ("bitbucket", "cloud-push-branch"),
    ],
)
def test_ping_and_unused_events_are_2xx_and_change_nothing(
    registry: Registry, forge: str, fixture: str
) -> None:
    registry.repo()
    answer = registry.post(delivery(forge, fixture, secret=SECRET))
    assert answer.status_code == 200, answer.text
    assert answer.json()["status"] in ("ok", "ignored")
    assert registry.jobs() == []


def test_bitbucket_test_connection_needs_the_default_secret(
    tmp_path: Path, make_repo: Callable[[str], GitRepo]
) -> None:
    """Data Center's "Test connection" names no repository."""
    for registry in _registry(tmp_path, make_repo, webhook_secret="global-secret"):
        ping = delivery("bitbucket", "dc-diagnostics-ping", secret="global-secret")
        assert registry.post(ping).json() == {"message": "pong", "status": "ok"}
        assert_error(registry.post(delivery("bitbucket", "dc-diagnostics-ping", secret="x")), 401)


FIXTURES = {
    "github": "push-tag-created",
    "gitlab": "tag-push-created",
    "gitea": "push-tag-created",
    "bitbucket": "cloud-push-tag-created",
}


def assert_same_answer(first: Any, second: Any) -> None:
    """Status, body and headers alike (the request id aside, drawn per request)."""

    def seen(answer: Any) -> tuple[int, bytes, dict[str, str]]:
        headers = {k: v for k, v in answer.headers.items() if k != "x-request-id"}
        return answer.status_code, answer.content, headers

    assert seen(first) == seen(second)


@pytest.mark.parametrize("default", ["", "global-secret"], ids=["no-default", "default"])
@pytest.mark.parametrize("forge", sorted(FIXTURES))
def test_an_unregistered_repository_is_answered_as_a_wrong_signature(
    tmp_path: Path, make_repo: Callable[[str], GitRepo], forge: str, default: str
) -> None:
    """No answer tells which repository names are registered, whatever the
    delivery is signed with, short of the default secret itself. A name that
    auto-registration would take is no exception."""
    settings = {
        "webhook_secret": default,
        "auto_register_owners": "acme",
        "auto_register_remote": str(tmp_path / "forge" / "{forge_repo}"),
    }
    for registry in _registry(tmp_path, make_repo, **settings):
        registry.repo()
        wrong = registry.post(delivery(forge, FIXTURES[forge], secret="guess"))
        assert_error(wrong, 401)
        for name in ("acme/unknown", "acme/terraform-null-unknown", "mallory/x"):
            for secret in ("guess", SECRET, None):
                prepared = delivery(forge, FIXTURES[forge], repo=name, secret=secret)
                assert_same_answer(registry.post(prepared), wrong)
        assert registry.jobs() == []


def test_an_unregistered_repository_is_logged_for_the_operator(
    registry: Registry, caplog: pytest.LogCaptureFixture
) -> None:
    """The 401 does not say why: the log does, for the one who set the hook up."""
    with caplog.at_level(logging.INFO, logger="gitreg.webhooks"):
        registry.post(delivery("github", "push-tag-created", repo="acme/unknown", secret=SECRET))
    assert "repository 'acme/unknown' is not registered with gitreg" in caplog.text
    assert "gitreg repo add" in caplog.text


def test_unknown_repository_with_a_default_secret_still_needs_a_valid_signature(
    tmp_path: Path, make_repo: Callable[[str], GitRepo]
) -> None:
    for registry in _registry(tmp_path, make_repo, webhook_secret="global-secret"):
        bad = delivery("github", "push-tag-created", repo="acme/unknown", secret="guess")
        assert_error(registry.post(bad), 401)
        good = delivery("github", "push-tag-created", repo="acme/unknown", secret="global-secret")
        assert_error(registry.post(good), 404)


# -- idempotency -------------------------------------------------------------


def test_redelivery_with_the_same_id_is_a_no_op(registry: Registry) -> None:
    registry.repo()
    first = delivery("github", "push-tag-created", delivery_id="d-1", secret=SECRET)
    assert registry.post(first).status_code == 202
    again = registry.post(first)
    assert again.status_code == 200
    assert again.json()["status"] == "duplicate"
    assert len(registry.jobs()) == 1
    registry.drain()
    assert registry.post(first).json()["status"] == "duplicate"
    assert registry.drain() == []
    assert registry.versions() == ["1.0.0"]


def test_deliveries_for_one_repository_fold_into_one_queued_job(registry: Registry) -> None:
    registry.repo()
    for number in range(5):
        prepared = delivery("github", "push-tag-created", tag=f"v1.0.{number}", secret=SECRET)
        assert registry.post(prepared).status_code == 202
    [job] = registry.jobs()
    assert job.deliveries == 5
    assert "v1.0.4" in job.reason


def test_replay_of_an_ingested_tag_publishes_nothing_new(registry: Registry) -> None:
    registry.repo()
    registry.post(delivery("github", "push-tag-created", secret=SECRET))
    registry.drain()
    registry.post(delivery("github", "push-tag-created", secret=SECRET))  # new delivery id
    [job] = registry.drain()
    assert job.to_json()["result"]["published"] == []
    assert registry.versions() == ["1.0.0"]


@pytest.fixture
def impatient(tmp_path: Path, make_repo: Callable[[str], GitRepo]) -> Iterator[Registry]:
    """Retries without waiting, three attempts: a failing job fails for good in one drain."""
    yield from _registry(tmp_path, make_repo, job_backoff=0, job_max_attempts=3)


def test_redelivering_a_failed_delivery_retries_it(impatient: Registry) -> None:
    registry = impatient
    repo, _ = registry.repo()
    moved = repo.path.with_name("moved-away")
    repo.path.rename(moved)
    prepared = delivery("github", "push-tag-created", delivery_id="d-fail", secret=SECRET)
    registry.post(prepared)
    assert len(registry.drain()) == 3
    [job] = registry.jobs()
    assert (job.state, job.attempts) == ("failed", 3)
    assert "cannot fetch" in job.last_error
    moved.rename(repo.path)
    answer = registry.post(prepared)
    assert answer.json()["jobs"][0]["status"] == "requeued"
    [done] = registry.drain()
    assert done.state == "done"
    assert registry.versions() == ["1.0.0"]


# -- what is fetched ---------------------------------------------------------


def test_clone_url_in_the_payload_is_not_used(registry: Registry) -> None:
    _, record = registry.repo()
    decoy = registry.make_repo("decoy")
    simple_module(decoy, output="decoy")
    decoy.commit()
    decoy.tag("v6.6.6")
    prepared = delivery("github", "push-tag-created", tag="v6.6.6", secret=SECRET)
    payload = json.loads(prepared.body)
    for key in ("clone_url", "git_url", "ssh_url", "html_url"):
        payload["repository"][key] = str(decoy.path)
    prepared.body = json.dumps(payload).encode()
    prepared.headers["X-Hub-Signature-256"] = "sha256=" + hmac_hex(SECRET, prepared.body)
    assert registry.post(prepared).status_code == 202
    registry.drain()
    assert registry.versions() == ["1.0.0"]
    assert registry.svc.index.repos() == [registry.svc.index.repo(record.id)]


# -- tags that move or disappear ---------------------------------------------


def test_force_moved_tag_keeps_the_published_bytes_and_records_a_conflict(
    registry: Registry,
) -> None:
    repo, _ = registry.repo()
    registry.post(delivery("github", "push-tag-created", secret=SECRET))
    registry.drain()
    before = registry.client.get("/v1/modules/acme/hello/null/1.0.0/download")
    original = repo.rev("v1.0.0")
    repo.write("main.tf", "# rewritten\n")
    repo.commit("rewrite")
    repo.tag("v1.0.0", force=True)
    registry.post(
        delivery(
            "github", "push-tag-moved", before=original, after=repo.rev("v1.0.0"), secret=SECRET
        )
    )
    [job] = registry.drain()
    assert len(job.to_json()["result"]["conflicts"]) == 1
    after = registry.client.get("/v1/modules/acme/hello/null/1.0.0/download")
    assert after.headers["x-terraform-get"] == before.headers["x-terraform-get"]
    [conflict] = registry.svc.index.conflicts()
    assert conflict.published_commit == original


def test_deleted_tag_keeps_its_version_by_default(registry: Registry) -> None:
    repo, _ = registry.repo()
    registry.post(delivery("github", "push-tag-created", secret=SECRET))
    registry.drain()
    repo.delete_tag("v1.0.0")
    assert registry.post(delivery("github", "delete-tag", secret=SECRET)).status_code == 202
    registry.drain()
    assert registry.versions() == ["1.0.0"]


def test_deleted_tag_yanks_when_configured(
    tmp_path: Path, make_repo: Callable[[str], GitRepo]
) -> None:
    for registry in _registry(tmp_path, make_repo, yank_deleted_tags=True):
        repo, _ = registry.repo()
        repo.tag("v1.1.0")
        registry.post(delivery("gitlab", "tag-push-created", secret=SECRET))
        registry.drain()
        assert registry.versions() == ["1.0.0", "1.1.0"]
        repo.delete_tag("v1.0.0")
        registry.post(delivery("gitlab", "tag-push-deleted", secret=SECRET))
        [job] = registry.drain()
        assert job.to_json()["result"]["yanked"] == ["acme/hello/null 1.0.0"]
        assert registry.versions() == ["1.1.0"]
        # Yanked, not deleted: pinned users still download it.
        assert registry.client.get("/v1/modules/acme/hello/null/1.0.0/download").status_code == 204


# -- auto-registration -------------------------------------------------------


def test_auto_registration_by_naming_convention(
    tmp_path: Path, make_repo: Callable[[str], GitRepo]
) -> None:
    repo = make_repo("forge/acme/terraform-null-greeting")
    simple_module(repo)
    repo.commit()
    repo.tag("v0.1.0")
    template = str(tmp_path / "forge" / "{forge_repo}")
    for registry in _registry(
        tmp_path,
        make_repo,
        webhook_secret="org-secret",
        auto_register_owners="acme, other",
        auto_register_remote=template,
    ):
        prepared = delivery(
            "github",
            "push-tag-created",
            repo="acme/terraform-null-greeting",
            tag="v0.1.0",
            secret="org-secret",
        )
        assert registry.post(prepared).status_code == 202
        registry.drain()
        assert registry.versions("greeting") == ["0.1.0"]
        outsider = delivery(
            "github", "push-tag-created", repo="mallory/terraform-null-x", secret="org-secret"
        )
        assert_error(registry.post(outsider), 404)
        unconventional = delivery("github", "push-tag-created", repo="acme/x", secret="org-secret")
        assert_error(registry.post(unconventional), 404)


# -- hooks/post-receive endpoint ---------------------------------------------


def notify_body(repo: str = "acme/hello", ref: str = "refs/tags/v1.0.0") -> bytes:
    return json.dumps(
        {
            "repository": repo,
            "delivery": "x-1",
            "refs": [{"ref": ref, "old": "0" * 40, "new": "a" * 40}],
        }
    ).encode()


def test_notify_needs_a_token(registry: Registry) -> None:
    registry.repo(forge_repo="acme/hello")
    assert_error(registry.client.post("/webhooks/git", content=notify_body()), 401)
    bad = {"Authorization": "Bearer gitreg_not-a-real-token"}
    assert_error(registry.client.post("/webhooks/git", content=notify_body(), headers=bad), 401)
    read_only = registry.token("read", ["acme"])
    assert_error(
        registry.client.post("/webhooks/git", content=notify_body(), headers=read_only), 403
    )
    assert registry.jobs() == []


def test_notify_with_a_publish_token_queues_a_sync(registry: Registry) -> None:
    registry.repo(forge_repo="acme/hello")
    headers = registry.token("publish", ["acme"])
    answer = registry.client.post("/webhooks/git", content=notify_body(), headers=headers)
    assert answer.status_code == 202, answer.text
    [job] = registry.jobs()
    assert job.source == "hook" and "created v1.0.0" in job.reason
    again = registry.client.post("/webhooks/git", content=notify_body(), headers=headers)
    assert again.json()["status"] == "duplicate"
    branch = notify_body(ref="refs/heads/main")
    assert registry.client.post("/webhooks/git", content=branch, headers=headers).status_code == 200
    unknown = notify_body(repo="acme/nope")
    assert_error(registry.client.post("/webhooks/git", content=unknown, headers=headers), 404)


def test_notify_token_for_another_namespace_is_forbidden(registry: Registry) -> None:
    registry.repo(forge_repo="acme/hello")
    headers = registry.token("publish", ["other"])
    assert_error(registry.client.post("/webhooks/git", content=notify_body(), headers=headers), 403)
    assert registry.jobs() == []


def test_revoked_notify_token_stops_working(registry: Registry) -> None:
    registry.repo(forge_repo="acme/hello")
    headers = registry.token("publish", ["acme"])
    registry.svc.auth.revoke(registry.svc.auth.tokens()[-1].id)
    registry.svc.cache.invalidate()
    assert_error(registry.client.post("/webhooks/git", content=notify_body(), headers=headers), 401)


# -- admin endpoint ----------------------------------------------------------


def test_admin_endpoint_needs_a_registry_wide_admin_token(registry: Registry) -> None:
    assert_error(registry.client.get("/admin/jobs"), 401)
    assert_error(registry.client.get("/admin/jobs", headers=registry.token("publish")), 403)
    scoped = registry.token("admin", ["acme"])
    assert_error(registry.client.get("/admin/jobs", headers=scoped), 403)
    assert registry.client.get("/admin/jobs", headers=registry.token("admin")).status_code == 200


def test_admin_lists_and_retries_failed_jobs(impatient: Registry) -> None:
    registry = impatient
    repo, _ = registry.repo()
    admin = registry.token("admin")
    moved = repo.path.with_name("gone")
    repo.path.rename(moved)
    registry.post(delivery("github", "push-tag-created", secret=SECRET))
    registry.drain()
    listing = registry.client.get("/admin/jobs?state=failed", headers=admin).json()
    assert listing["counts"]["failed"] == 1
    [failed] = listing["jobs"]
    assert failed["repository"] == str(repo.path)
    assert "cannot fetch" in failed["last_error"]
    moved.rename(repo.path)
    retried = registry.client.post(f"/admin/jobs/{failed['id']}/retry", headers=admin)
    assert retried.status_code == 202
    registry.drain()
    shown = registry.client.get(f"/admin/jobs/{failed['id']}", headers=admin).json()
    assert shown["state"] == "done"
    assert shown["result"]["published"] == ["acme/hello/null 1.0.0"]
    unchanged = registry.client.post(f"/admin/jobs/{failed['id']}/retry", headers=admin)
    assert unchanged.json()["status"] == "unchanged"


@pytest.mark.parametrize(
    "path", ["/admin/jobs?state=bogus", "/admin/jobs?limit=-1", "/admin/jobs/abc", "/admin/jobs/99"]
)
def test_admin_bad_input_is_4xx_json(registry: Registry, path: str) -> None:
    admin = registry.token("admin")
    answer = registry.client.get(path, headers=admin)
    assert 400 <= answer.status_code < 500
    assert "errors" in answer.json()


def test_admin_shows_conflicts(registry: Registry) -> None:
    repo, _ = registry.repo()
    admin = registry.token("admin")
    registry.post(delivery("github", "push-tag-created", secret=SECRET))
    registry.drain()
    repo.write("main.tf", "# moved\n")
    repo.commit("moved")
    repo.tag("v1.0.0", force=True)
    registry.post(delivery("github", "push-tag-moved", secret=SECRET))
    registry.drain()
    [conflict] = registry.client.get("/admin/conflicts", headers=admin).json()["conflicts"]
    assert conflict["module"] == "acme/hello/null"
    assert conflict["tag"] == "v1.0.0"


def _publish_actor(registry: Registry) -> dict[str, str]:
    [row] = registry.svc.audit.entries(AuditQuery(action="module.publish"))
    return {"kind": row.actor_kind, "name": row.actor, "rule": row.rule}


def test_a_token_triggered_sync_names_the_token_in_its_audit_rows(registry: Registry) -> None:
    registry.repo(forge_repo="acme/hello")
    headers = registry.token("publish", ["acme"])
    token_id = registry.svc.auth.tokens()[-1].id
    answer = registry.client.post("/webhooks/git", content=notify_body(), headers=headers)
    assert answer.status_code == 202, answer.text
    [done] = registry.drain()
    assert done.state == "done"
    assert _publish_actor(registry) == {"kind": "token", "name": f"token #{token_id}", "rule": ""}


def test_a_webhook_triggered_sync_names_system_in_its_audit_rows(registry: Registry) -> None:
    registry.repo()
    registry.post(delivery("github", "push-tag-created", repo=FORGE_REPO, secret=SECRET))
    [done] = registry.drain()
    assert done.state == "done"
    assert _publish_actor(registry) == {"kind": "system", "name": "gitreg", "rule": ""}
