"""Git ingestion hardening.

Real git repositories, real dulwich transports, and a stand-in `ssh` on PATH
that either runs the git command locally or connects and then sends nothing.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from gitreg.app import create_app
from gitreg.errors import BadRequest, ForgeError, GitError, UpstreamError
from gitreg.git.backend import DulwichBackend
from gitreg.git.remotes import normalise_remote
from gitreg.providers.forges import Asset, release_source
from gitreg.services import Services
from gitreg.settings import load_settings
from gitreg.upstream.client import require_https
from gitreg.upstream.hosts import refused_address
from tests.support.gitrepo import GitRepo, git, simple_module
from tests.support.webhooks import delivery

PACKAGE = Path(__file__).resolve().parents[2] / "gitreg"

# -- no git subprocess, so no argument injection through refs -------------------------


def test_gitreg_starts_no_subprocess() -> None:
    """Refs could only inject arguments into git subprocesses; gitreg has none: git is
    dulwich in-process, and refs never reach a command line. (dulwich itself
    starts only `ssh`, see the ssh tests below.)"""
    offenders = [
        f"{path.relative_to(PACKAGE)}:{number}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"\b(subprocess|os\.system|os\.popen|os\.exec\w*|pty\.spawn)\b", line)
    ]
    assert offenders == []


# -- remotes, and every other outbound URL, refuse metadata addresses ----------------

# 169.254.169.254 (cloud metadata) as the C resolver also reads it, and 0.0.0.0.
METADATA_SPELLINGS = [
    "169.254.169.254",
    "2852039166",
    "0xa9fea9fe",
    "0251.0376.0251.0376",
    "169.254.43518",
    "0xa9.0xfe.0xa9.0xfe",
    "[::ffff:169.254.169.254]",
    "[::ffff:a9fe:a9fe]",
    "[fe80::1]",
    "0",
    "0.0.0.0",
    "[::]",
    "224.0.0.1",
]


@pytest.mark.parametrize("host", METADATA_SPELLINGS)
def test_metadata_addresses_in_any_spelling_are_refused_as_remotes(host: str) -> None:
    urls = [f"https://{host}/acme/vpc.git", f"ssh://git@{host}/acme/vpc.git"]
    if not host.startswith("["):
        urls.append(f"git@{host}:acme/vpc.git")
    for url in urls:
        with pytest.raises(BadRequest, match="refused address"):
            normalise_remote(url, allow_local=False, allow_http=False)


def test_literal_addresses_are_read_like_the_resolver_reads_them() -> None:
    resolved = socket.getaddrinfo("2852039166", 443, type=socket.SOCK_STREAM)[0][4][0]
    assert resolved == "169.254.169.254"  # why decimal spellings must be checked at all
    assert str(refused_address("2852039166")) == "169.254.169.254"
    assert str(refused_address("[::ffff:169.254.169.254]")) == "169.254.169.254"
    for allowed in ("github.com", "10.1.2.3", "127.0.0.1", "2001:db8::1", "1234", "0x-host"):
        assert refused_address(allowed) is None, allowed
    for garbage in ("1\x00", "\ud800", "é", "", "[]"):
        assert refused_address(garbage) is None, repr(garbage)


@pytest.mark.parametrize("host", METADATA_SPELLINGS)
def test_mirror_and_forge_downloads_refuse_the_same_spellings(host: str, tmp_path: Path) -> None:
    with pytest.raises(UpstreamError, match="refused upstream URL"):
        require_https(f"https://{host}/v1/providers/")

    reached: list[str] = []

    def redirect(request: httpx.Request) -> httpx.Response:
        if request.url.host == "api.github.com":
            return httpx.Response(302, headers={"location": f"https://{host}/latest/x.zip"})
        reached.append(str(request.url))
        return httpx.Response(200, content=b"metadata credentials")

    settings_ = load_settings({"data_dir": tmp_path}, environ={})
    source = release_source(settings_, "github", "acme/x", httpx.MockTransport(redirect))
    asset = Asset("x.zip", 1, "https://api.github.com/repos/acme/x/releases/assets/1", True)
    # Refused by gitreg, or for some spellings already by httpx's URL parser.
    with pytest.raises(ForgeError, match=r"refusing|Invalid"):
        source.download(asset, io.BytesIO(), 1000)
    assert reached == []


@pytest.mark.parametrize(
    "url",
    [
        "ssh://-oProxyCommand=touch%20/tmp/gitreg-pwned/r.git",
        "ssh://-oProxyCommand=x@git.example.com/r.git",
        "https://-x.example.com/r.git",
        "git@-oProxyCommand:r.git",
    ],
)
def test_option_shaped_hosts_and_users_are_refused(url: str) -> None:
    """ssh gets `[user@]host` as an argument; dulwich refuses a leading '-' only
    when fetching, with an error that is not a GitError. Refused at registration."""
    with pytest.raises(BadRequest, match="starting with '-'"):
        normalise_remote(url, allow_local=True, allow_http=True)


@pytest.mark.parametrize("url", ["https://[::1", "ssh://[git.example.com/x.git", "https://a]b/x"])
def test_malformed_urls_are_bad_requests(url: str) -> None:
    with pytest.raises(BadRequest):
        normalise_remote(url, allow_local=False, allow_http=False)


HOSTS = st.one_of(
    st.sampled_from([*METADATA_SPELLINGS, "github.com", "-o", "a@b", "[", "::", "ex ample"]),
    st.text(max_size=20),
)
REMOTES = st.one_of(
    st.text(max_size=60),
    st.builds(
        lambda scheme, user, host, path: f"{scheme}{user}{host}{path}",
        st.sampled_from(["https://", "ssh://", "http://", "git://", "ext::", "file://", "", "-"]),
        st.sampled_from(["", "git@", "-oProxyCommand=x@", "a:b@"]),
        HOSTS,
        st.sampled_from(["/acme/vpc.git", ":acme/vpc.git", "", "/../../etc", ":/x"]),
    ),
)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(REMOTES)
def test_any_accepted_network_remote_is_safe(text: str) -> None:
    """Whatever is typed as a remote: refused with a BadRequest, or a https/ssh
    remote whose host is neither option-shaped nor a refused address."""
    try:
        remote = normalise_remote(text, allow_local=False, allow_http=False)
    except BadRequest:
        return
    assert not remote.startswith("-") and "::" not in remote.split("/", 1)[0]
    if "://" in remote:
        parts = urlsplit(remote)
        assert parts.scheme.lower() in ("https", "ssh", "git+ssh", "ssh+git")
        host, user = parts.hostname or "", parts.username or ""
    else:
        user, _, rest = remote.rpartition("@")
        host = rest.split(":", 1)[0]
    assert host and not host.startswith("-") and not user.startswith("-")
    assert refused_address(host) is None


# -- a remote that connects and then sends nothing ------------------------------------

FAKE_SSH = """#!/bin/sh
# Stands in for ssh: dulwich runs `ssh [options] HOST 'git-upload-pack PATH'`.
echo $$ >> "{pids}"
if [ -e "{hang}" ]; then
    exec sleep 600  # connected, never answers
fi
if [ -e "{fail}" ]; then
    echo "ssh: connect to host: Connection refused" >&2
    exit 255
fi
for command; do :; done
exec sh -c "$command"
"""


@dataclass
class FakeSsh:
    hang: Path
    fail: Path
    pids: Path

    def started(self) -> list[int]:
        if not self.pids.exists():
            return []
        return [int(line) for line in self.pids.read_text().split()]

    def kill_all(self) -> None:
        for pid in self.started():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, 9)


@pytest.fixture
def fake_ssh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeSsh]:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake = FakeSsh(tmp_path / "hang", tmp_path / "fail", tmp_path / "ssh.pids")
    script = bindir / "ssh"
    script.write_text(FAKE_SSH.format(hang=fake.hang, fail=fake.fail, pids=fake.pids))
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    yield fake
    fake.kill_all()


def _served_repo(make_repo: Callable[[str], GitRepo], tmp_path: Path) -> Path:
    work = make_repo("work")
    simple_module(work)
    work.commit()
    work.tag("v1.0.0", annotated=True)
    bare = tmp_path / "served" / "vpc.git"
    bare.parent.mkdir()
    git(tmp_path, "clone", "-q", "--bare", str(work.path), str(bare))
    return bare


def _watchdogs() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "gitreg-git-watchdog"]


# dulwich leaves its Protocol object unclosed when the ssh side fails before the
# ref advertisement (`get_refs` outside `with proto`); it closes itself, with a
# ResourceWarning, when the error's traceback is dropped. Not gitreg's leak.
DULWICH_UNCLOSED = pytest.mark.filterwarnings("ignore:unclosed Protocol:ResourceWarning")


@DULWICH_UNCLOSED
def test_ssh_remote_that_sends_nothing_is_abandoned(fake_ssh: FakeSsh, tmp_path: Path) -> None:
    fake_ssh.hang.touch()
    backend = DulwichBackend(timeout=1)
    url = "ssh://git.example.test/srv/vpc.git"
    with pytest.raises(GitError, match=r"cannot list tags .*remote sent nothing for 1s"):
        backend.remote_tags(url)
    with pytest.raises(GitError, match=r"cannot fetch .*remote sent nothing for 1s"):
        backend.fetch(url, tmp_path / "mirror.git")
    assert len(fake_ssh.started()) == 2
    for pid in fake_ssh.started():  # killed and reaped, not left sleeping
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert backend.tags(tmp_path / "mirror.git") == ([], [])


def test_ssh_remote_still_fetches_through_the_watchdog(
    fake_ssh: FakeSsh, make_repo: Callable[[str], GitRepo], tmp_path: Path
) -> None:
    bare = _served_repo(make_repo, tmp_path)
    backend = DulwichBackend(timeout=5)
    url = f"ssh://git.example.test{bare}"
    assert set(backend.remote_tags(url)) == {"v1.0.0"}
    backend.fetch(url, tmp_path / "mirror.git")
    tags, problems = backend.tags(tmp_path / "mirror.git")
    assert [t.name for t in tags] == ["v1.0.0"] and not problems
    for watchdog in _watchdogs():  # each connection's watchdog ends with it
        watchdog.join(5)
    assert _watchdogs() == []


@DULWICH_UNCLOSED
def test_ssh_remote_that_refuses_is_a_git_error(fake_ssh: FakeSsh, tmp_path: Path) -> None:
    fake_ssh.fail.touch()
    with pytest.raises(GitError, match="cannot fetch"):
        DulwichBackend(timeout=5).fetch("ssh://git.example.test/x.git", tmp_path / "m.git")


def test_https_remote_that_sends_nothing_times_out(tmp_path: Path) -> None:
    """The TCP connection is accepted (by the kernel's backlog) and then
    nothing comes back, not even a TLS handshake: http.timeout applies."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        url = f"https://127.0.0.1:{silent.getsockname()[1]}/acme/vpc.git"
        with pytest.raises(GitError, match="cannot fetch"):
            DulwichBackend(timeout=1).fetch(url, tmp_path / "mirror.git")


# -- a hanging git server never delays a webhook answer -------------------------------

SECRET = "w5-secret"


@pytest.fixture
def serving(tmp_path: Path, fake_ssh: FakeSsh) -> Iterator[tuple[TestClient, Services]]:
    flags = {
        "data_dir": tmp_path / "data",
        "job_workers": 1,
        "reconcile_interval": 0,
        "git_timeout": 120,  # the hang lasts until the test ends it
    }
    app = create_app(load_settings(flags, environ={}))
    svc: Services = app.state.services
    record = svc.index.add_repo("ssh://git.example.test/srv/hello.git", "acme/hello", SECRET)
    svc.index.add_module(record.id, "acme", "hello", "null", "", "")
    with TestClient(app, base_url="https://testserver") as client:
        try:
            yield client, svc
        finally:
            fake_ssh.hang.unlink(missing_ok=True)
            fake_ssh.fail.touch()  # later attempts fail at once instead of hanging
            fake_ssh.kill_all()


@DULWICH_UNCLOSED
def test_deliveries_are_answered_while_the_git_server_hangs(
    serving: tuple[TestClient, Services], fake_ssh: FakeSsh
) -> None:
    client, svc = serving
    fake_ssh.hang.touch()
    first = delivery("github", "push-tag-created", repo="acme/hello", secret=SECRET)
    assert client.post(first.route, content=first.body, headers=first.headers).status_code == 202
    deadline = time.monotonic() + 30
    while not fake_ssh.started():  # the worker is now blocked inside the fetch
        assert time.monotonic() < deadline, "the job never started its fetch"
        time.sleep(0.02)
    second = delivery("gitea", "push-tag-created", repo="acme/hello", tag="v1.1.0", secret=SECRET)
    started = time.monotonic()
    answer = client.post(second.route, content=second.body, headers=second.headers)
    elapsed = time.monotonic() - started
    assert answer.status_code == 202, answer.text
    assert elapsed < 2.0, f"answered in {elapsed:.2f}s while git hangs"
    states = sorted(j.state for j in svc.job_queue.store.jobs())
    assert states == ["queued", "running"]  # stored before the answer; git runs elsewhere


# -- archives are served from the blob store, never rebuilt on request ---------------


def test_archives_are_served_without_git(
    tmp_path: Path, make_repo: Callable[[str], GitRepo]
) -> None:
    flags = {"data_dir": tmp_path / "data", "job_workers": 0, "reconcile_interval": 0}
    app = create_app(load_settings(flags, environ={}))
    svc: Services = app.state.services
    repo = make_repo("vpc")
    simple_module(repo)
    repo.commit()
    repo.tag("v1.0.0")
    record = svc.index.add_repo(str(repo.path), "acme/vpc")
    svc.index.add_module(record.id, "acme", "vpc", "aws", "", "")
    svc.publisher.sync_repo(record)
    module = svc.index.find_module("acme", "vpc", "aws")
    assert module is not None
    [version] = svc.index.versions(module.id)
    blob = svc.blobs.local_file(version.archive_sha256)
    assert blob is not None  # the default store keeps blobs in DATA_DIR
    stored, stored_mtime = blob.read_bytes(), blob.stat().st_mtime_ns
    # Neither the mirror nor the source exists any more: nothing could rebuild it.
    for gone in (svc.publisher.mirror_path(record), repo.path):
        for entry in sorted(gone.rglob("*"), reverse=True):
            entry.unlink() if not entry.is_dir() or entry.is_symlink() else entry.rmdir()
        gone.rmdir()
    with TestClient(app, base_url="https://testserver") as client:
        location = client.get("/v1/modules/acme/vpc/aws/1.0.0/download").headers["x-terraform-get"]
        path = urlsplit(location).path
        for _ in range(3):
            answer = client.get(path)
            assert answer.status_code == 200 and answer.content == stored
    assert blob.stat().st_mtime_ns == stored_mtime
    assert json.loads(json.dumps(version.archive_sha256)) in path
