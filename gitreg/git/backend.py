"""Fetching remotes into bare mirrors and reading tags and trees, with dulwich.

Each registered repository has a bare mirror under `<data-dir>/git/`. A fetch
asks the remote only for objects the mirror lacks (incremental), then makes the
mirror's tags match the remote's. Objects are never garbage-collected, so a
version published from a tag that later moves or disappears still has its
commit and tree here. Nothing is ever checked out.
"""

from __future__ import annotations

import contextlib
import shutil
import threading
import time
import traceback
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Protocol

from dulwich.client import (
    LocalGitClient,
    SSHGitClient,
    SubprocessSSHVendor,
    SubprocessWrapper,
    get_transport_and_path,
)
from dulwich.config import ConfigDict, ConfigFile
from dulwich.errors import GitProtocolError, HangupException, NotGitRepository
from dulwich.file import FileLocked
from dulwich.object_store import ObjectStoreGraphWalker
from dulwich.objects import Commit, ObjectID, Tag
from dulwich.refs import Ref
from dulwich.repo import Repo

from gitreg.archives.build import ArchiveLimits, ArchiveReport, ObjectSource, build_archive
from gitreg.archives.cache import SubtreeCache
from gitreg.archives.format import CLASSIC
from gitreg.errors import GitError, MirrorLocked, storage_full
from gitreg.git.leftovers import remove_leftovers
from gitreg.git.sessions import MirrorSessions
from gitreg.git.trees import TreeReader

TAG_PREFIX = Ref(b"refs/tags/")
PEELED = b"^{}"


@contextlib.contextmanager
def _mirror_errors(action: str) -> Iterator[None]:
    """dulwich's lock, transport and file errors as one-line GitErrors, never a
    traceback, so the publisher records them as the repository's sync error."""
    try:
        yield
    except FileLocked as exc:
        lock = exc.lockfilename
        name = lock.decode(errors="replace") if isinstance(lock, bytes) else lock
        raise MirrorLocked(f"{action}: mirror file is locked ({name} exists)") from exc
    except (GitProtocolError, HangupException, NotGitRepository, OSError) as exc:
        # A full disk is the operator's "free space and retry", not this
        # repository's problem: jobs keep it queued.
        if (full := storage_full(exc, f"{action}: the git mirror")) is not None:
            # dulwich leaves a lock file whose close met ENOSPC to its `__del__`;
            # drop the frames holding it now, not whenever this chain is dropped.
            traceback.clear_frames(exc.__traceback__)
            raise full from exc
        raise GitError(f"{action}: {exc}") from exc


@dataclass(frozen=True)
class TagRef:
    """A tag in a mirror, peeled to its commit."""

    name: str
    tag_sha: str  # the ref's own target: an annotated tag object or the commit
    commit_sha: str
    tree_sha: str
    commit_time: int


@dataclass(frozen=True)
class TagProblem:
    name: str
    reason: str


class GitBackend(Protocol):
    """What the publisher needs from git."""

    def fetch(self, url: str, mirror: Path) -> None: ...

    def remove_leftovers(self, mirror: Path) -> list[str]: ...

    def remote_tags(self, url: str) -> dict[str, str]: ...

    def tags(self, mirror: Path) -> tuple[list[TagRef], list[TagProblem]]: ...

    def subtree(self, mirror: Path, tree_sha: str, subdir: str) -> str | None: ...

    def subtrees(
        self, mirror: Path, wanted: Iterable[tuple[str, str]]
    ) -> dict[tuple[str, str], str | None]:
        """`subtree` for many (tree sha, subdir) pairs on one open mirror."""
        ...

    def module_dirs(self, mirror: Path, tree_shas: Iterable[str], pattern: str) -> dict[str, str]:
        """Directories matching a `--modules` pattern in any of the trees, each with
        why it is not a module ("" when it is one: it holds a .tf file)."""
        ...

    def archive(
        self,
        mirror: Path,
        tree_sha: str,
        out: BinaryIO,
        mtime: int,
        limits: ArchiveLimits,
        builder: str = CLASSIC,
        subdir: str = "",
        cache: SubtreeCache | None = None,
    ) -> ArchiveReport:
        """The archive of a tree; with `subdir`, `tree_sha` is that directory's
        tree and the archive holds it alone, under its path. With
        `cache`, directories of the previous build are written from it
        (gitreg/archives/cache.py)."""
        ...

    def objects(self, mirror: Path) -> contextlib.AbstractContextManager[ObjectSource]:
        """`mirror`'s objects for the block's reads: what the catalog reads
        documentation through (gitreg/catalog/tree.py, provider_tree.py), so
        git/ does not need to know what documentation is."""
        ...

    def session(self, mirror: Path) -> contextlib.AbstractContextManager[None]:
        """Reads of `mirror` on this thread share one open repository until the
        block ends (gitreg/git/sessions.py)."""
        ...


class DulwichBackend:
    """`GitBackend` on dulwich: one code path for local, https and ssh remotes."""

    def __init__(self, timeout: float = 120.0, max_pack_bytes: int = 2 * 1024**3) -> None:
        self._config = ConfigDict()
        # dulwich reads http.timeout for its urllib3 pool.
        self._config.set((b"http",), b"timeout", str(int(timeout)).encode())
        self._timeout = timeout
        self._max_pack_bytes = max_pack_bytes
        self._sessions = MirrorSessions()

    def _open_mirror(self, mirror: Path) -> Repo:
        if not (mirror / "HEAD").is_file():
            _create_mirror(mirror)
        return MirrorRepo(str(mirror))

    def _client(self, url: str) -> tuple[typing.Any, str]:
        try:
            return get_transport_and_path(url, config=self._config)
        except ValueError as exc:
            raise GitError(f"cannot use remote {url}: {exc}") from exc

    def _watch_ssh(self, client: typing.Any, deadline: float) -> None:
        """The fetch limits for ssh remotes: dulwich reads the ssh process's pipe with no
        timeout, so a server that connects and then sends nothing would hold
        a worker thread forever. The process is killed instead when it is
        silent for `timeout` seconds or runs past `deadline`."""
        if isinstance(client, SSHGitClient) and isinstance(client.ssh_vendor, SubprocessSSHVendor):
            client.ssh_vendor = _WatchedSSHVendor(self._timeout, deadline)

    def remote_tags(self, url: str) -> dict[str, str]:
        """`git ls-remote --tags`: tag name -> the sha the ref points at."""
        client, path = self._client(url)
        self._watch_ssh(client, time.monotonic() + self._timeout * 10)
        try:
            refs = client.get_refs(path)
        except (GitError, GitProtocolError, HangupException, NotGitRepository, OSError) as exc:
            raise GitError(f"cannot list tags of {url}: {exc}") from exc
        return _tag_refs(getattr(refs, "refs", refs))

    def fetch(self, url: str, mirror: Path) -> None:
        """Bring the mirror's objects and tags up to date with the remote."""
        with _mirror_errors(f"cannot fetch {url}"):
            repo = self._open_mirror(mirror)
            try:
                self._fetch_into(url, repo)
            finally:
                repo.close()

    def _fetch_into(self, url: str, repo: Repo) -> None:
        client, path = self._client(url)
        deadline = time.monotonic() + self._timeout * 10
        self._watch_ssh(client, deadline)
        limit_pack(client, self._max_pack_bytes, deadline)
        try:
            result = client.fetch(path, repo, ref_prefix=[TAG_PREFIX])
        except GitError as exc:  # the pack limit or the ssh watchdog stopped it
            raise GitError(f"cannot fetch {url}: {exc}") from exc
        remote = {
            Ref(TAG_PREFIX + name.encode()): ObjectID(sha.encode())
            for name, sha in _tag_refs(result.refs).items()
        }
        local = {Ref(TAG_PREFIX + name): sha for name, sha in repo.refs.as_dict(TAG_PREFIX).items()}
        for gone in local.keys() - remote.keys():
            del repo.refs[gone]
        for ref, sha in remote.items():
            if local.get(ref) != sha and sha in repo.object_store:
                repo.refs[ref] = sha

    def remove_leftovers(self, mirror: Path) -> list[str]:
        """Stale lock and partial pack files of a killed fetch; only call it
        while holding the repository's lock (see gitreg.git.leftovers)."""
        return remove_leftovers(mirror)

    def tags(self, mirror: Path) -> tuple[list[TagRef], list[TagProblem]]:
        with _mirror_errors(f"cannot read the tags of mirror {mirror}"):
            return self._tags(mirror)

    def _tags(self, mirror: Path) -> tuple[list[TagRef], list[TagProblem]]:
        repo = self._open_mirror(mirror)
        found: list[TagRef] = []
        problems: list[TagProblem] = []
        try:
            for raw_name in sorted(repo.refs.keys(base=TAG_PREFIX)):
                try:
                    name = raw_name.decode("utf-8")
                except UnicodeDecodeError:
                    problems.append(TagProblem(repr(raw_name), "tag name is not UTF-8"))
                    continue
                sha = repo.refs[Ref(TAG_PREFIX + raw_name)]
                peeled = _peel(repo, sha)
                if isinstance(peeled, str):
                    problems.append(TagProblem(name, peeled))
                    continue
                found.append(
                    TagRef(
                        name=name,
                        tag_sha=sha.decode(),
                        commit_sha=peeled.id.decode(),
                        tree_sha=peeled.tree.decode(),
                        commit_time=peeled.commit_time,
                    )
                )
        finally:
            repo.close()
        return found, problems

    def subtree(self, mirror: Path, tree_sha: str, subdir: str) -> str | None:
        """The sha of `subdir` inside a tree, or None if it is not a directory there."""
        with self._sessions.reading(mirror, self._open_mirror) as repo:
            return TreeReader(repo.object_store).subtree(tree_sha, subdir)

    def subtrees(
        self, mirror: Path, wanted: Iterable[tuple[str, str]]
    ) -> dict[tuple[str, str], str | None]:
        with self._sessions.reading(mirror, self._open_mirror) as repo:
            reader = TreeReader(repo.object_store)
            return {(tree, subdir): reader.subtree(tree, subdir) for tree, subdir in wanted}

    def module_dirs(self, mirror: Path, tree_shas: Iterable[str], pattern: str) -> dict[str, str]:
        with self._sessions.reading(mirror, self._open_mirror) as repo:
            return TreeReader(repo.object_store).matching_dirs(tree_shas, pattern)

    def archive(
        self,
        mirror: Path,
        tree_sha: str,
        out: BinaryIO,
        mtime: int,
        limits: ArchiveLimits,
        builder: str = CLASSIC,
        subdir: str = "",
        cache: SubtreeCache | None = None,
    ) -> ArchiveReport:
        with self._sessions.reading(mirror, self._open_mirror) as repo:
            return build_archive(
                repo.object_store,
                tree_sha.encode(),
                out,
                mtime=mtime,
                limits=limits,
                builder=builder,
                prefix=subdir,
                cache=cache,
            )

    @contextlib.contextmanager
    def objects(self, mirror: Path) -> Iterator[ObjectSource]:
        with self._sessions.reading(mirror, self._open_mirror) as repo:
            yield repo.object_store

    def session(self, mirror: Path) -> contextlib.AbstractContextManager[None]:
        """Keep `mirror` open for this thread's reads until the block ends (one sync)."""
        return self._sessions.session(mirror, self._open_mirror)


class MirrorRepo(Repo):
    """A bare mirror that holds only tags.

    dulwich tells a remote what we already have from `refs/heads/*`; a mirror
    has no branches, so without this every fetch would ask for the whole
    repository again and store it as one more full pack. The peeled tag
    commits are what the mirror has, so they are offered as the haves and a
    fetch brings only new objects (found by bench/git_backends.py).
    """

    def get_config(self) -> ConfigFile:
        # No multi-pack-index: gitreg's fetches never write one, and with the
        # option on (git's default) dulwich stats `objects/pack/multi-pack-index`
        # on every object lookup to see whether one appeared, a good part of a read
        # from a pack (docs/performance.md, "Mirrors read without a
        # multi-pack-index"). A mirror that had one is read through its packs'
        # own indexes, which every pack has. In memory only: nothing is written.
        config = super().get_config()
        config.set((b"core",), b"multiPackIndex", False)
        return config

    def get_graph_walker(self, heads: list[ObjectID] | None = None) -> ObjectStoreGraphWalker:
        if heads is None:
            heads = []
            for sha in self.refs.as_dict(TAG_PREFIX).values():
                peeled = _peel(self, sha) if sha in self.object_store else None
                if isinstance(peeled, Commit):
                    heads.append(peeled.id)
        return super().get_graph_walker(heads)


def _create_mirror(mirror: Path) -> None:
    """A new bare mirror, made beside its place and renamed into it.

    dulwich writes HEAD after `objects/`, so a process killed half-way
    through `init_bare` in place would leave a directory dulwich cannot
    open, and every later sync would fail. Made aside, a mirror is whole or
    absent. Callers hold the repository's lock, so a half-made one (the
    `.partial` directory, or a mirror without HEAD that an earlier gitreg
    made in place, which nothing was fetched into: fetches start after HEAD
    exists) is stale and removed.
    """
    partial = mirror.with_name(mirror.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    if mirror.is_dir():
        shutil.rmtree(mirror)
    partial.mkdir(parents=True)
    MirrorRepo.init_bare(str(partial)).close()
    partial.rename(mirror)


def limit_pack(client: typing.Any, max_bytes: int, deadline: float) -> None:
    """Stop a fetch whose pack grows past `max_bytes` or that runs past `deadline`.

    dulwich's `fetch` streams the pack through `fetch_pack(..., pack_data)`, so
    counting there catches a hostile or runaway remote before the disk fills.
    The local-path client copies objects without a pack; its size is the
    operator's own repository.
    """
    if isinstance(client, LocalGitClient):
        return
    original = client.fetch_pack

    def counted_fetch_pack(
        path: typing.Any,
        determine_wants: typing.Any,
        graph_walker: typing.Any,
        pack_data: Callable[[bytes], object],
        **kwargs: typing.Any,
    ) -> typing.Any:
        received = 0

        def counting(chunk: bytes) -> object:
            nonlocal received
            received += len(chunk)
            if received > max_bytes:
                raise GitError(f"pack from remote exceeds {max_bytes} bytes; fetch abandoned")
            if time.monotonic() > deadline:
                raise GitError("fetch took too long; abandoned")
            return pack_data(chunk)

        return original(path, determine_wants, graph_walker, counting, **kwargs)

    client.fetch_pack = counted_fetch_pack


class _Watchdog:
    """Calls `kill` once the watched process is silent for `idle` seconds or
    runs past `deadline` (monotonic), unless stopped first."""

    def __init__(self, kill: Callable[[], None], idle: float, deadline: float) -> None:
        self._kill = kill
        self._idle = idle
        self._deadline = deadline
        self._last = time.monotonic()
        self._done = threading.Event()
        self.fired = ""
        threading.Thread(target=self._watch, name="gitreg-git-watchdog", daemon=True).start()

    def touch(self) -> None:
        self._last = time.monotonic()

    def stop(self) -> None:
        self._done.set()

    def _watch(self) -> None:
        while True:
            now = time.monotonic()
            if now >= self._deadline:
                self.fired = "fetch took too long"
            elif now >= self._last + self._idle:
                self.fired = f"remote sent nothing for {self._idle:g}s"
            elif self._done.wait(min(self._deadline, self._last + self._idle) - now):
                return
            else:
                continue
            if not self._done.is_set():
                with contextlib.suppress(OSError):
                    self._kill()
            return


class _WatchedProcess(SubprocessWrapper):
    """dulwich's ssh connection, with every read feeding a `_Watchdog`."""

    def __init__(self, inner: SubprocessWrapper, idle: float, deadline: float) -> None:
        # Not `super().__init__`: that would put a second reader on the same pipe.
        self.proc = inner.proc
        self._inner = inner
        self._dog = _Watchdog(inner.proc.kill, idle, deadline)
        self.write = inner.write
        self.read = self._read

    def _read(self, size: int | None = -1) -> bytes:
        data = self._inner.read(size)
        if self._dog.fired:
            self.close()  # reap the killed process now; dulwich may not close on errors
            raise GitError(f"{self._dog.fired}; abandoned (git_timeout)")
        self._dog.touch()
        return data

    def close(self, timeout: int | None = 60) -> None:
        self._dog.stop()
        self._inner.close(timeout)


class _WatchedSSHVendor(SubprocessSSHVendor):
    def __init__(self, idle: float, deadline: float) -> None:
        self._idle = idle
        self._deadline = deadline

    def run_command(
        self,
        host: str,
        command: bytes,
        username: str | None = None,
        port: int | None = None,
        password: str | None = None,
        key_filename: str | None = None,
        ssh_command: str | None = None,
        protocol_version: int | None = None,
    ) -> SubprocessWrapper:
        inner = super().run_command(
            host,
            command,
            username=username,
            port=port,
            password=password,
            key_filename=key_filename,
            ssh_command=ssh_command,
            protocol_version=protocol_version,
        )
        return _WatchedProcess(inner, self._idle, self._deadline)


def _tag_refs(refs: Mapping[bytes, bytes | None]) -> dict[str, str]:
    """Tag refs of a ref advertisement, without the `^{}` peeled duplicates."""
    tags: dict[str, str] = {}
    for ref, sha in refs.items():
        if not ref.startswith(TAG_PREFIX) or ref.endswith(PEELED) or sha is None:
            continue
        try:
            tags[ref[len(TAG_PREFIX) :].decode("utf-8")] = sha.decode()
        except UnicodeDecodeError:
            continue
    return tags


def _peel(repo: Repo, sha: bytes) -> Commit | str:
    """Follow annotated tags to a commit; a string says why that failed."""
    obj = repo[sha]
    for _ in range(10):
        if isinstance(obj, Commit):
            return obj
        if not isinstance(obj, Tag):
            return f"tag points at a {obj.type_name.decode()}, not a commit"
        obj = repo[obj.object[1]]
    return "tag chain too long"
