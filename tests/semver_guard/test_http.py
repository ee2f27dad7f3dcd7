"""`GET /v1/modules/NS/NAME/SYSTEM/VERSION/changes?from=`: answers, errors,
and a private namespace as invisible as through the rest of the browse API."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from gitreg.app import create_app
from gitreg.auth.tokens import new_token, token_hash
from gitreg.services import Services
from gitreg.settings import load_settings
from tests.semver_guard.test_publish import V1, WITH_EXTRA, WITHOUT_SIZE, release
from tests.support.gitrepo import GitRepo

PATH = "/v1/modules/acme/mod/aws/{}/changes"


@pytest.fixture
def api(
    tmp_path: Path, make_repo: Callable[[str], GitRepo]
) -> Iterator[tuple[TestClient, Services]]:
    app = create_app(load_settings({"data_dir": tmp_path / "data"}, environ={}))
    svc: Services = app.state.services
    repo = make_repo("mod")
    release(repo, V1, "v1.2.0")
    release(repo, WITHOUT_SIZE, "v1.3.0")
    release(repo, WITH_EXTRA, "v1.4.0")
    record = svc.index.add_repo(str(repo.path), "")
    svc.index.add_module(record.id, "acme", "mod", "aws", "", "")
    svc.publisher.sync_repo(record)
    with TestClient(app, base_url="https://testserver") as client:
        yield client, svc


def test_the_default_is_the_version_before(api: tuple[TestClient, Services]) -> None:
    client, _ = api
    answer = client.get(PATH.format("1.3.0"))
    assert answer.status_code == 200
    assert answer.headers["cache-control"] == "private, no-cache"
    body = answer.json()
    assert (body["module"], body["version"], body["from"]) == ("acme/mod/aws", "1.3.0", "1.2.0")
    assert body["counts"] == {"breaking": 1, "possibly_breaking": 0, "additive": 0, "other": 0}
    assert body["changes"] == [
        {
            "kind": "breaking",
            "module": "",
            "subject": "variable",
            "name": "size",
            "change": "removed",
            "detail": 'variable "size" removed',
        }
    ]
    assert body["label"] == "breaking change in a minor release" and body["baseline"] == "1.2.0"


def test_any_two_versions(api: tuple[TestClient, Services]) -> None:
    client, _ = api
    body = client.get(PATH.format("1.4.0"), params={"from": "1.2.0"}).json()
    assert {(c["kind"], c["name"]) for c in body["changes"]} == {("additive", "extra")}
    assert body["status"] == "compatible"  # its check: against 1.3.0, which lacked "size"
    first = client.get(PATH.format("1.2.0")).json()
    assert first["from"] is None and first["changes"] == [] and first["status"] == "first"
    assert client.get(PATH.format("v1.3.0")).json()["version"] == "1.3.0"


@pytest.mark.parametrize(
    ("version", "params", "status"),
    [
        ("9.9.9", {}, 404),
        ("1.3.0", {"from": "9.9.9"}, 404),
        ("not-a-version", {}, 400),
        ("1.3.0", {"from": "x" * 200}, 400),
        ("1.3.0", {"from": "1.x"}, 400),
    ],
)
def test_errors(
    api: tuple[TestClient, Services], version: str, params: dict[str, str], status: int
) -> None:
    client, _ = api
    answer = client.get(PATH.format(version), params=params)
    assert answer.status_code == status
    assert list(answer.json()) == ["errors"]


def test_an_unknown_module_is_404(api: tuple[TestClient, Services]) -> None:
    client, _ = api
    answer = client.get("/v1/modules/acme/nope/aws/1.0.0/changes")
    assert answer.status_code == 404 and "errors" in answer.json()


def test_a_private_namespace(api: tuple[TestClient, Services]) -> None:
    client, svc = api
    svc.auth.set_namespace_private("acme", True)
    other, reader = new_token(), new_token()
    svc.auth.add_token(token_hash(other), other[:12], "read", ["other"], "", None)
    svc.auth.add_token(token_hash(reader), reader[:12], "read", ["acme"], "", None)
    svc.cache.invalidate()
    anonymous = client.get(PATH.format("1.3.0"))
    assert anonymous.status_code == 401 and "size" not in anonymous.text
    wrong = client.get(PATH.format("1.3.0"), headers={"Authorization": f"Bearer {other}"})
    missing = client.get(
        "/v1/modules/acme/nope/aws/1.0.0/changes", headers={"Authorization": f"Bearer {other}"}
    )
    assert wrong.status_code == missing.status_code == 404 and "size" not in wrong.text
    allowed = client.get(PATH.format("1.3.0"), headers={"Authorization": f"Bearer {reader}"})
    assert allowed.status_code == 200 and allowed.json()["from"] == "1.2.0"
