"""Directories already written by an earlier build, kept for the next.

Between neighbouring tags of a repository almost every directory is unchanged: the
same tree sha at the same path. Its part of the tar stream is then the same entries,
the same names left out and the same counts; only the mtime in each header differs
(every entry has the tag's commit time). A build therefore records, for every
directory it walked, the finished entries (gitreg/archives/format.py `TarEntry`: the
content and the header around its mtime), and a later build that meets the same
directory at the same path writes those entries again without reading a tree or a
blob or checking a name (docs/performance.md "Publishing at scale").

The bytes are those of a walk: the walk's order is full-path order, so a directory's
entries are one contiguous run; the entries are written through the same
`TarStream.entry` calls as a cold build, so the compressor sees the same chunks;
a test builds with and without the cache and compares (tests/archives/test_archive_cache.py).

Bound: only the directories used by the last build are kept (a generation), and
nothing of a build whose content is over `max_bytes`; so a build holds at most its
own content plus the previous build's, each at most `max_bytes`.
"""

from __future__ import annotations

from dataclasses import dataclass

from gitreg.archives.format import TarEntry

__all__ = ["DEFAULT_CACHE_BYTES", "DirRecord", "SubtreeCache"]

# The content of a large module (thousands of files, tens of MB) fits with room
# to spare; a worker process holds at most twice this (the last build's
# directories and the current one's) on top of its own memory.
DEFAULT_CACHE_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class DirRecord:
    """What one directory (a tree sha at one path) added to a build."""

    entries: tuple[TarEntry, ...]
    skipped: tuple[str, ...]  # "path: reason", as ArchiveReport.skipped
    files: int
    total_bytes: int
    nbytes: int  # what keeping the entries costs (TarEntry.nbytes summed)
    # The directories under it, each kept as well: a build that writes this
    # directory from the cache keeps them for the next build too.
    below: tuple[tuple[bytes, bytes], ...]


class SubtreeCache:
    """Directories of the last build, by (tree sha, path prefix with its `/`).

    Keyed by path as well as by tree: the names in the entries and in the
    `skipped` lines, and whether a symlink stays inside the root, depend on it.
    The limits are part of what a directory's walk decided, so the cache
    serves one set of limits and forgets everything when they change. The
    builder does not matter: it only changes the gzip layer, not the tar entries.
    """

    def __init__(self, max_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        self.max_bytes = max_bytes
        self._limits: object = None
        self._last: dict[tuple[bytes, bytes], DirRecord] = {}
        self._now: dict[tuple[bytes, bytes], DirRecord] = {}
        self._now_bytes = 0
        self._files: dict[object, TarEntry] = {}  # the last build's files, by TarEntry.key
        self.hits = 0
        self.misses = 0

    def start(self, limits: object) -> None:
        """A build with `limits` begins."""
        if limits != self._limits:
            self.clear()
            self._limits = limits
        self._now, self._now_bytes = {}, 0

    def get(self, sha: bytes, prefix: bytes) -> DirRecord | None:
        found = self._now.get((sha, prefix)) or self._last.get((sha, prefix))
        if found is None:
            self.misses += 1
            return None
        self.hits += 1
        self._now[(sha, prefix)] = found
        for key in found.below:
            below = self._now.get(key) or self._last.get(key)
            if below is not None:
                self._now[key] = below
        return found

    def file(self, key: object) -> TarEntry | None:
        """A file the last build wrote, by what it was made from (TarEntry.key): in a
        directory that changed, most files did not."""
        return self._files.get(key)

    def recording(self) -> bool:
        """Whether the build in progress still fits: once it does not, it stops
        keeping its entries (so memory stays one blob at a time, as without a cache)."""
        return self.max_bytes > 0 and self._now_bytes <= self.max_bytes

    def count(self, nbytes: int) -> None:
        """The build in progress wrote `nbytes` more (new entries or a replayed directory)."""
        self._now_bytes += nbytes

    def put(self, sha: bytes, prefix: bytes, record: DirRecord) -> None:
        if self.recording():
            self._now[(sha, prefix)] = record

    def finish(self, written: list[TarEntry]) -> None:
        """The build ended (or failed) having written `written` (while it recorded):
        its directories and files become the ones kept."""
        if self.recording():
            self._last = self._now
            self._files = {e.key: e for e in written if e.key is not None}
        else:
            self._last, self._files = {}, {}
        self._now, self._now_bytes = {}, 0

    def clear(self) -> None:
        self._last, self._now, self._now_bytes, self._files = {}, {}, 0, {}
