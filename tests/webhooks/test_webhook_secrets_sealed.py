"""Webhook secrets sealed with the operator's key: never plaintext
in the database, and real signed GitHub deliveries still verify, for secrets
registered with the key and for plaintext ones from before it."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

from starlette.testclient import TestClient

from gitreg.app import create_app
from gitreg.repositories.service import RepoSource, module_link
from gitreg.settings import load_settings
from gitreg.storage.sealing import generate_key_file
from tests.support.gitrepo import GitRepo, simple_module
from tests.support.provider_dist import make_services
from tests.support.webhooks import delivery

OLD_SECRET = "plaintext-before-the-key"
NEW_SECRET = "registered-with-the-key"


def _tagged(make_repo: Callable[[str], GitRepo], name: str) -> GitRepo:
    repo = make_repo(name)
    simple_module(repo, output=name)
    repo.commit()
    repo.tag("v1.0.0")
    return repo


def _stored_secrets(db: Path) -> list[str]:
    conn = sqlite3.connect(db)
    try:
        return [row[0] for row in conn.execute("SELECT webhook_secret FROM repos ORDER BY id")]
    finally:
        conn.close()


def test_sealed_webhook_secrets_verify_real_deliveries(
    tmp_path: Path, make_repo: Callable[[str], GitRepo]
) -> None:
    data = tmp_path / "data"
    before = make_services(data)  # no key yet: stored as it always was
    try:
        before.repositories.add(
            RepoSource(str(_tagged(make_repo, "old").path), "acme/old", OLD_SECRET),
            module_link("acme/old/null", "", ""),
            fetch_first=False,
        )
    finally:
        before.close()
    assert _stored_secrets(data / "index.sqlite3") == [OLD_SECRET]

    key = tmp_path / "secret.key"
    generate_key_file(key)
    flags = {"data_dir": data, "job_workers": 0, "reconcile_interval": 0, "secret_key_file": key}
    app = create_app(load_settings(flags, environ={}))
    svc = app.state.services
    svc.repositories.add(
        RepoSource(str(_tagged(make_repo, "new").path), "acme/new", NEW_SECRET),
        module_link("acme/new/null", "", ""),
        fetch_first=False,
    )
    stored = _stored_secrets(data / "index.sqlite3")
    assert all(value.startswith("enc:v1:") for value in stored)  # the old one sealed at start
    conn = sqlite3.connect(data / "index.sqlite3")
    dump = "\n".join(conn.iterdump())
    conn.close()
    assert OLD_SECRET not in dump and NEW_SECRET not in dump

    with TestClient(app, base_url="https://testserver") as client:
        for forge_repo, secret in (("acme/old", OLD_SECRET), ("acme/new", NEW_SECRET)):
            good = delivery("github", "push-tag-created", repo=forge_repo, secret=secret)
            answer = client.post(good.route, content=good.body, headers=good.headers)
            assert answer.status_code == 202, answer.text
            bad = delivery("github", "push-tag-created", repo=forge_repo, secret="not-it")
            answer = client.post(bad.route, content=bad.body, headers=bad.headers)
            assert answer.status_code == 401 and answer.json()["errors"]
        assert len(svc.job_queue.store.jobs()) == 2
