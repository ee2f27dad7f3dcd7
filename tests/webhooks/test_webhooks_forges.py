"""Each forge's documented deliveries, read into what gitreg acts on.

The fixtures in tests/fixtures/webhooks follow the forges' documented payloads;
these tests pin how each one is interpreted (tags, ping, release, ignored).
"""

from __future__ import annotations

import json

import pytest
from starlette.datastructures import Headers

from gitreg.errors import BadRequest
from gitreg.webhooks.bitbucket import Bitbucket
from gitreg.webhooks.events import Delivery, Forge, TagChange
from gitreg.webhooks.gitea import Gitea
from gitreg.webhooks.github import GitHub
from gitreg.webhooks.gitlab import GitLab
from tests.support.webhooks import delivery

FORGES: dict[str, Forge] = {
    "github": GitHub(),
    "gitlab": GitLab(),
    "gitea": Gitea(),
    "bitbucket": Bitbucket(),
}


def read(forge: str, fixture: str, **kwargs: str) -> tuple[Forge, Headers, dict[str, object]]:
    prepared = delivery(forge, fixture, **kwargs)
    return FORGES[forge], Headers(prepared.headers), json.loads(prepared.body)


def interpret(forge: str, fixture: str, **kwargs: str) -> Delivery:
    impl, headers, payload = read(forge, fixture, **kwargs)
    return impl.read(headers, payload)


@pytest.mark.parametrize(
    ("forge", "fixture", "action"),
    [
        ("github", "push-tag-created", "created"),
        ("github", "push-tag-deleted", "deleted"),
        ("github", "push-tag-moved", "moved"),
        ("github", "create-tag", "created"),
        ("github", "delete-tag", "deleted"),
        ("gitlab", "tag-push-created", "created"),
        ("gitlab", "tag-push-deleted", "deleted"),
        ("gitlab", "tag-push-moved", "moved"),
        ("gitea", "push-tag-created", "created"),
        ("gitea", "push-tag-deleted", "deleted"),
        ("gitea", "push-tag-moved", "moved"),
        ("gitea", "create-tag", "created"),
        ("gitea", "delete-tag", "deleted"),
        ("gitea", "forgejo-push-tag-created", "created"),
        ("bitbucket", "cloud-push-tag-created", "created"),
        ("bitbucket", "cloud-push-tag-deleted", "deleted"),
        ("bitbucket", "cloud-push-tag-moved", "moved"),
        ("bitbucket", "dc-refs-changed-tag-created", "created"),
        ("bitbucket", "dc-refs-changed-tag-deleted", "deleted"),
        ("bitbucket", "dc-refs-changed-tag-moved", "moved"),
    ],
)
def test_tag_events(forge: str, fixture: str, action: str) -> None:
    got = interpret(forge, fixture, tag="v1.4.0")
    assert got.kind == "tags"
    assert got.changes == (TagChange("v1.4.0", action),)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("forge", "fixture"),
    [("github", "release-published"), ("gitlab", "release-create"), ("gitea", "release-published")],
)
def test_release_events_name_their_tag(forge: str, fixture: str) -> None:
    got = interpret(forge, fixture, tag="v2.0.0")
    assert got.kind == "release"
    assert [c.tag for c in got.changes] == ["v2.0.0"]


@pytest.mark.parametrize(
    ("forge", "fixture"), [("github", "ping"), ("bitbucket", "dc-diagnostics-ping")]
)
def test_pings(forge: str, fixture: str) -> None:
    assert interpret(forge, fixture).kind == "ping"


@pytest.mark.parametrize(
    ("forge", "fixture"),
    [
        ("github", "push-branch"),
        ("github", "issues-opened"),
        ("gitlab", "push-branch"),
        ("gitea", "push-branch"),
        ("bitbucket", "cloud-push-branch"),
    ],
)
def test_branch_pushes_and_other_events_are_ignored(forge: str, fixture: str) -> None:
    assert interpret(forge, fixture).kind == "ignore"


@pytest.mark.parametrize(
    ("forge", "fixture", "repo"),
    [
        ("github", "push-tag-created", "Acme/terraform-aws-vpc"),
        ("gitlab", "tag-push-created", "platform/terraform-aws-vpc"),
        ("gitea", "push-tag-created", "ops/net"),
        ("bitbucket", "cloud-push-tag-created", "workspace/net"),
        ("bitbucket", "dc-refs-changed-tag-created", "PLAT/net"),
    ],
)
def test_repository_identity_comes_from_the_documented_field(
    forge: str, fixture: str, repo: str
) -> None:
    impl, _, payload = read(forge, fixture, repo=repo)
    assert impl.repository(payload) == repo


@pytest.mark.parametrize(
    ("forge", "fixture", "header", "value"),
    [
        ("github", "push-tag-created", "X-GitHub-Delivery", "gh-1"),
        ("gitlab", "tag-push-created", "Idempotency-Key", "gl-1"),
        ("gitea", "push-tag-created", "X-Gitea-Delivery", "gt-1"),
        ("gitea", "forgejo-push-tag-created", "X-Forgejo-Delivery", "fj-1"),
        ("bitbucket", "cloud-push-tag-created", "X-Request-UUID", "bb-1"),
        ("bitbucket", "dc-refs-changed-tag-created", "X-Request-Id", "bbdc-1"),
    ],
)
def test_delivery_ids(forge: str, fixture: str, header: str, value: str) -> None:
    impl, headers, _ = read(forge, fixture, delivery_id=value)
    assert headers[header] == value
    assert impl.delivery_id(headers) == value


def test_gitlab_without_idempotency_key_uses_event_uuid() -> None:
    headers = {"x-gitlab-event-uuid": "abc"}
    assert GitLab().delivery_id(headers) == "abc"


def test_gitlab_release_delete_is_ignored() -> None:
    impl, headers, payload = read("gitlab", "release-create")
    payload["action"] = "delete"
    assert impl.read(headers, payload).kind == "ignore"


def test_github_release_edit_is_ignored() -> None:
    impl, headers, payload = read("github", "release-published")
    payload["action"] = "edited"
    assert impl.read(headers, payload).kind == "ignore"


def test_hostile_tag_names_are_dropped() -> None:
    """A tag with '..' or a leading '-' never reaches a job description."""
    assert interpret("github", "push-tag-created", tag="../../etc").kind == "ignore"
    assert interpret("gitlab", "tag-push-created", tag="-rf").kind == "ignore"


def test_bitbucket_cloud_push_without_details_still_syncs() -> None:
    """Tags made in Bitbucket's web UI have arrived with an empty `changes` list."""
    impl, headers, payload = read("bitbucket", "cloud-push-tag-created")
    payload["push"]["changes"] = []  # type: ignore[index]
    got = impl.read(headers, payload)
    assert got.kind == "tags"
    assert got.changes == ()


def test_malformed_fields_are_bad_requests() -> None:
    impl, headers, payload = read("github", "push-tag-created")
    payload["ref"] = ["refs/tags/v1"]
    with pytest.raises(BadRequest):
        impl.read(headers, payload)
    impl, headers, payload = read("bitbucket", "dc-refs-changed-tag-created")
    payload["changes"] = "everything"
    with pytest.raises(BadRequest):
        impl.read(headers, payload)


def test_describe_is_one_readable_line() -> None:
    got = interpret("github", "push-tag-created", tag="v1.0.0")
    assert got.describe() == "github push: created v1.0.0"
