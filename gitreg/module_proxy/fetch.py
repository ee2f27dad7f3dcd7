"""Fetch one ref of a public module's repository and build its archive.

The ref is fetched at depth 1 into a fresh bare repository in a temporary
directory, with the same dulwich client, pack-size cap and deadline as
gitreg's own remotes (gitreg.git.backend). The archive is then built by
`build_archive`, the builder and limits of gitreg's own modules (no `.git`, no
symlink leaving the tree, capped size and file count, deterministic bytes), so
a proxied module passes the same rules.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, cast
from urllib.parse import urljoin

from dulwich.client import get_transport_and_path
from dulwich.config import ConfigDict
from dulwich.errors import GitProtocolError, HangupException, NotGitRepository
from dulwich.objects import Commit, ObjectID, Tag, Tree
from dulwich.repo import Repo

from gitreg.archives.build import ArchiveLimits, build_archive
from gitreg.errors import ArchiveTooLarge, GitError, UpstreamError
from gitreg.git.backend import limit_pack
from gitreg.module_proxy.source import GitSource
from gitreg.storage.blobs import BlobStore
from gitreg.upstream.client import require_https

_HEX40 = frozenset("0123456789abcdef")


@dataclass(frozen=True)
class FetchLimits:
    timeout: float  # idle seconds per read; the whole fetch gets ten times this
    max_pack_bytes: int
    archive: ArchiveLimits


@dataclass(frozen=True)
class FetchedArchive:
    commit_sha: str
    sha256: str
    size: int
    skipped: tuple[str, ...]


def _client(url: str, timeout: float) -> tuple[Any, str]:
    config = ConfigDict()
    config.set((b"http",), b"timeout", str(max(int(timeout), 1)).encode())
    # Trust SSL_CERT_FILE like the provider mirror and Terraform (Go) do, so a
    # site's internal CA (or the test CA) works for git over https too.
    cafile = os.environ.get("SSL_CERT_FILE")
    if cafile:
        config.set((b"http",), b"sslCAInfo", cafile.encode())
    try:
        client, path = cast(tuple[Any, str], get_transport_and_path(url, config=config))
    except ValueError as exc:
        raise UpstreamError(f"cannot use repository {url}: {exc}") from exc
    _check_redirects(client)
    return client, path


_REDIRECTS = (301, 302, 303, 307, 308)


def _check_redirects(client: Any) -> None:
    """Follow redirects one hop at a time, each checked like the first URL.

    urllib3 would follow a git host's redirect to any address, including a
    cloud metadata service; here every hop must be https
    on an address gitreg may reach, as for the upstream registry's own URLs.
    """
    pool = getattr(client, "pool_manager", None)
    if pool is None:
        return
    original = pool.request

    def request(method: str, url: str, **kwargs: Any) -> Any:
        kwargs["redirect"] = False
        for _ in range(6):
            response = original(method, url, **kwargs)
            location = response.headers.get("Location")
            if response.status not in _REDIRECTS or not location:
                # dulwich rebases the repository URL on the final URL it reads here.
                response.url = url
                return response
            response.drain_conn()
            url = urljoin(url, location)
            require_https(url)
            if response.status == 303:
                method = "GET"
                kwargs.pop("body", None)
        raise UpstreamError(f"too many redirects fetching {url[:200]}")

    pool.request = request


def _wanted(refs: Mapping[bytes, bytes | None], ref: str) -> bytes:
    if ref and len(ref) == 40 and set(ref) <= _HEX40:
        return ref.encode()
    names = [f"refs/tags/{ref}", f"refs/heads/{ref}"] if ref else ["HEAD"]
    for name in names:
        sha = refs.get(name.encode())
        if sha:
            return sha
    raise UpstreamError(f"the repository has no tag or branch {ref or 'HEAD'!r}")


def remote_commit(source: GitSource, timeout: float) -> str | None:
    """The commit `source.ref` names upstream now (peeled), or None if it is gone."""
    client, path = _client(source.url, timeout)
    try:
        result = client.get_refs(path)
    except (GitError, GitProtocolError, HangupException, NotGitRepository, OSError) as exc:
        raise UpstreamError(f"cannot list the refs of {source.url}: {exc}") from exc
    refs: Mapping[bytes, bytes | None] = getattr(result, "refs", result)
    try:
        sha = _wanted(refs, source.ref)
    except UpstreamError:
        return None
    peeled = refs.get(f"refs/tags/{source.ref}^{{}}".encode()) if source.ref else None
    return (peeled or sha).decode()


def fetch_archive(
    source: GitSource, blobs: BlobStore, limits: FetchLimits, workdir: Path
) -> FetchedArchive:
    """Blocking: fetch `source` and store its archive. Nothing is stored on failure."""
    workdir.mkdir(parents=True, exist_ok=True)
    temp = Path(tempfile.mkdtemp(prefix="proxy-", dir=workdir))
    try:
        repo = Repo.init_bare(str(temp))
        try:
            commit = _fetch_commit(source, repo, limits)
            tree = _subtree_check(repo, commit, source)
            try:
                with blobs.writer() as sink:
                    report = build_archive(
                        repo.object_store,
                        tree,
                        cast(BinaryIO, sink),
                        mtime=commit.commit_time,
                        limits=limits.archive,
                    )
            except ArchiveTooLarge as exc:
                raise UpstreamError(f"{source.url} at {source.ref}: {exc}") from exc
            assert sink.result is not None
            return FetchedArchive(
                commit.id.decode(), sink.result.sha256, sink.result.size, tuple(report.skipped)
            )
        finally:
            repo.close()
    finally:
        shutil.rmtree(temp, ignore_errors=True)


def _fetch_commit(source: GitSource, repo: Repo, limits: FetchLimits) -> Commit:
    client, path = _client(source.url, limits.timeout)
    deadline = time.monotonic() + limits.timeout * 10
    limit_pack(client, limits.max_pack_bytes, deadline)
    chosen: list[bytes] = []

    def determine_wants(refs: Mapping[bytes, bytes | None], depth: int | None = None) -> list[Any]:
        # The ref advertisement may itself have dripped in slowly.
        if time.monotonic() > deadline:
            raise GitError("fetch took too long; abandoned")
        chosen.append(_wanted(refs, source.ref))
        return [ObjectID(chosen[0])]

    try:
        client.fetch(path, repo, determine_wants=determine_wants, depth=1)
    except (GitError, GitProtocolError, HangupException, NotGitRepository, OSError) as exc:
        raise UpstreamError(f"cannot fetch {source.url} at {source.ref!r}: {exc}") from exc
    if not chosen:
        raise UpstreamError(f"{source.url} advertised no refs")
    try:
        obj = repo[ObjectID(chosen[0])]
        for _ in range(10):  # a tag of a tag of ... a commit
            if not isinstance(obj, Tag):
                break
            obj = repo[obj.object[1]]
    except KeyError as exc:
        raise UpstreamError(f"{source.url}: the fetched pack lacks {exc}") from exc
    if not isinstance(obj, Commit):
        raise UpstreamError(f"{source.url}: {source.ref!r} does not name a commit")
    return obj


def _subtree_check(repo: Repo, commit: Commit, source: GitSource) -> bytes:
    """The commit's root tree, after checking the `//subdir` is a directory in it.
    The whole tree is archived, as for own modules in a subdirectory, so a
    module's relative `../` calls keep working (module-registry-protocol.md)."""
    tree = repo[commit.tree]
    for part in source.subdir.split("/") if source.subdir else []:
        if not isinstance(tree, Tree) or part.encode() not in tree:
            raise UpstreamError(f"{source.url}: no directory {source.subdir!r} at {source.ref}")
        mode, sha = tree[part.encode()]
        if mode & 0o170000 != 0o040000:
            raise UpstreamError(f"{source.url}: {source.subdir!r} is not a directory")
        tree = repo[sha]
    return bytes(commit.tree)
