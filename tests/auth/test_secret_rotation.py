"""URL-signing keys shared through the database: a rotation made by
one process is used by the others without a restart, and a URL signed by one
`gitreg serve` is accepted by another on the same database and secret key."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from gitreg.auth.signed_urls import ACTIVATE_AFTER, KEYS_NAME, UrlSigner
from gitreg.auth.tokens import new_token, token_hash
from gitreg.errors import Forbidden
from gitreg.services import Services
from gitreg.storage.protocols import SecretStore
from gitreg.storage.secrets import file_secret_store
from tests.support.gitrepo import GitRepo, simple_module
from tests.support.provider_dist import make_services
from tests.support.server import RunningServer, cli

PATH = "/archives/abc.tar.gz"


def _query(signed: str) -> dict[str, str]:
    return dict(part.split("=", 1) for part in signed.split("&"))


def _signer_knowing_only(tmp_path: Path, keys: bytes, line: int | None = None) -> UrlSigner:
    """A signer holding a copy of some keys (all, or the one on `line`)."""
    copy = file_secret_store(tmp_path / f"copy-{time.monotonic_ns()}")
    lines = keys.decode().splitlines(keepends=True)
    copy.put(KEYS_NAME, "".join(lines if line is None else [lines[line]]).encode())
    return UrlSigner(copy, ttl=600)


@pytest.fixture
def key(tmp_path: Path) -> Path:
    path = tmp_path / "secret.key"
    cli(tmp_path, "secret", "generate-key", str(path))
    return path


def test_rotation_by_another_process_is_used_without_restart(tmp_path: Path, key: Path) -> None:
    data = tmp_path / "data"
    first, second = (make_services(data, secret_key_file=key) for _ in range(2))
    try:
        a, b = first.access.signer, second.access.signer
        old_url = _query(a.sign(PATH))
        b.verify(PATH, old_url)  # one key, shared through the database
        before = first.secrets.get(KEYS_NAME)
        assert before is not None
        cli(data, "secret", "rotate", "--secret-key-file", str(key))
        # Each learns the new key at its next periodic look (the server's
        # lifespan task makes one a second), without a restart.
        a.reload_if_rotated(now=time.monotonic() + 2)
        new_url = _query(a.sign(PATH, now=time.time() + ACTIVATE_AFTER + 1))
        with pytest.raises(Forbidden):  # B has not looked yet
            b.verify(PATH, new_url)
        b.reload_if_rotated(now=time.monotonic() + 2)
        b.verify(PATH, new_url)
        b.verify(PATH, old_url)  # the previous key keeps verifying until expiry
        with pytest.raises(Forbidden):  # and it really is a new key
            _signer_knowing_only(tmp_path, before).verify(PATH, new_url)
        # Right after a rotation, replicas keep signing with the previous key,
        # which every replica knows, until the new one is ACTIVATE_AFTER old.
        _signer_knowing_only(tmp_path, before).verify(PATH, _query(a.sign(PATH)))
        assert not (data / "secrets").exists()  # nothing of it on disk
    finally:
        first.close()
        second.close()


def _publish_private_module(svc: Services, repo: GitRepo) -> str:
    simple_module(repo, "team")
    repo.commit()
    repo.tag("v1.0.0")
    record = svc.index.add_repo(str(repo.path), "team/vpc")
    svc.index.add_module(record.id, "team", "vpc", "aws", "", "")
    svc.publisher.sync_repo(record)
    svc.auth.set_namespace_private("team", True)
    token = new_token()
    svc.auth.add_token(token_hash(token), token[:12], "read", ["team"], "", None)
    return token


def _archive_url(server: RunningServer, token: str) -> str:
    with httpx.Client(verify=server.ssl_context(), timeout=30) as client:
        answer = client.get(
            f"{server.url}/v1/modules/team/vpc/aws/1.0.0/download",
            headers={"Authorization": f"Bearer {token}"},
        )
    assert answer.status_code == 204, answer.text
    parts = urlsplit(answer.headers["x-terraform-get"])
    assert "signature=" in parts.query
    return f"{parts.path}?{parts.query}"


def _fetch(server: RunningServer, url: str) -> httpx.Response:
    with httpx.Client(verify=server.ssl_context(), timeout=30) as client:
        return client.get(server.url + url)


def _new_key_only(store: SecretStore, tmp_path: Path) -> UrlSigner:
    keys = store.get(KEYS_NAME)
    assert keys is not None
    return _signer_knowing_only(tmp_path, keys, line=0)


@pytest.mark.slow
def test_url_signed_by_one_server_is_accepted_by_another(
    tmp_path: Path,
    key: Path,
    make_repo: Callable[[str], GitRepo],
    servers: Callable[..., RunningServer],
) -> None:
    data = tmp_path / "data"
    svc = make_services(data, secret_key_file=key)
    try:
        token = _publish_private_module(svc, make_repo("vpc"))
    finally:
        svc.close()
    one = servers(data, "--secret-key-file", str(key))
    two = servers(data, "--secret-key-file", str(key))
    url = _archive_url(one, token)
    served = _fetch(two, url)
    assert served.status_code == 200
    assert served.content == _fetch(one, url).content
    assert _fetch(two, url.split("?")[0]).status_code == 403

    cli(data, "secret", "rotate", "--secret-key-file", str(key))
    svc = make_services(data, secret_key_file=key)
    try:
        new_only = _new_key_only(svc.secrets, tmp_path)
    finally:
        svc.close()
    deadline = time.monotonic() + 30
    while True:  # until server one signs with the new key (ACTIVATE_AFTER)
        url = _archive_url(one, token)
        try:
            new_only.verify(url.split("?")[0], _query(url.split("?")[1]))
            break
        except Forbidden:
            assert time.monotonic() < deadline, "server one never signed with the new key"
            time.sleep(0.5)
    assert _fetch(two, url).status_code == 200  # two knows it already: no restart
    assert not (data / "secrets").exists()
