"""`/v1/providers/NS/TYPE[/VERSION]` for providers published with `gitreg
provider publish`: versions, platforms, protocols, key ids."""

from __future__ import annotations

from pathlib import Path

import pytest

from gitreg.services import build_services
from gitreg.settings import load_settings
from tests.cli.test_yank import _publish_providers, _registry, _run


def test_provider_records(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    data = tmp_path / "data"
    _publish_providers(capsys, tmp_path, ["--data-dir", str(data)], ["1.0.0", "1.1.0"])
    assert _run(capsys, "provider", "yank", "acme/null", "1.0.0", "--data-dir", str(data))[0] == 0
    with _registry(data) as client:
        latest = client.get("/v1/providers/acme/null").json()
        assert latest["id"] == "acme/null/1.1.0" and latest["versions"] == ["1.1.0"]
        assert latest["platforms"] == [{"os": "linux", "arch": "amd64"}]
        assert latest["protocols"] and len(latest["signing_key_ids"]) == 1
        assert set(latest) >= {"namespace", "name", "version", "published_at", "docs"}
        # A yanked version leaves the lists but answers by exact version.
        yanked = client.get("/v1/providers/acme/null/1.0.0").json()
        assert yanked["version"] == "1.0.0" and yanked["yanked"] is True
        assert client.get("/v1/providers/acme/null/9.9.9").json() == {
            "errors": ["provider acme/null 9.9.9 not found"]
        }
        assert client.get("/v1/providers/acme/null/versions").status_code == 200
        assert client.get("/v1/providers/acme/nothing").status_code == 404


def test_source_is_the_repository_address_or_left_out(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Clients such as Dependabot read `source` as a URL: never `upload` or `cli`."""
    data = tmp_path / "data"
    _publish_providers(capsys, tmp_path, ["--data-dir", str(data)], ["1.0.0"])
    with _registry(data) as client:
        uploaded = client.get("/v1/providers/acme/null").json()
        assert uploaded["version"] == "1.0.0" and "source" not in uploaded
        assert "source" not in client.get("/v1/providers/acme/null/1.0.0").json()
    svc = build_services(load_settings({"data_dir": data}, environ={}))
    try:
        repo = svc.index.add_repo(
            "git@github.com:acme/terraform-provider-null.git", "acme/terraform-provider-null"
        )
        svc.provider_publisher.store.add_provider("acme", "null", repo_id=repo.id, forge="github")
    finally:
        svc.close()
    with _registry(data) as client:
        found = client.get("/v1/providers/acme/null").json()
        assert found["source"] == "https://github.com/acme/terraform-provider-null"
        page = client.get("/providers/acme/null", headers={"accept": "text/html"}).text
        assert 'href="https://github.com/acme/terraform-provider-null"' in page
