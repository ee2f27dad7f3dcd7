"""`gitreg reindex`: document versions published before documentation existed.

Issue 13: versions published before extraction (or under an older document
format, `DOCS_FORMAT`) get their document from the repository's mirror, at
the commit they were published from. Each document is stored as soon as it
is made, and the work list is "versions without a current document", so an
interrupted run resumes where it stopped when started again. On a terminal a
progress bar is redrawn in place, as `gitreg mirror sync` does; otherwise one
line per version. It also rebuilds the search rows modules lack, which
`gitreg migrate-storage` does not copy (storage/copy.py, DERIVED_TABLES).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, TextIO

from gitreg.catalog.documenter import Published
from gitreg.catalog.extract import DOCS_FORMAT
from gitreg.catalog.provider_docs import PROVIDER_DOCS_FORMAT, tag_of
from gitreg.services import Services

_ALL = 1 << 62  # ids only: even a large registry's work list is small


class Bar:
    def __init__(self, out: TextIO, total: int, quiet: bool) -> None:
        self.out, self.total, self.quiet = out, total, quiet
        self.tty = out.isatty() and not quiet

    def step(self, done: int, label: str, ok: bool) -> None:
        if self.quiet:
            return
        if not self.tty:
            print(f"{done}/{self.total} {label}{'' if ok else ': failed (see log)'}", file=self.out)
            return
        width = 30
        filled = width * done // max(self.total, 1)
        bar = "#" * filled + " " * (width - filled)
        self.out.write(f"\r\x1b[K[{bar}] {done}/{self.total} {label}"[:200])
        if done == self.total:
            self.out.write("\n")
        self.out.flush()


def reindex(svc: Services, out: TextIO | None = None, quiet: bool = False) -> int:
    out = out or sys.stdout  # looked up per call: tests and callers swap sys.stdout
    missing = svc.catalog.missing_docs(DOCS_FORMAT, 0, _ALL)
    modules = {m.id: m for m in svc.index.modules()}
    bar = Bar(out, len(missing), quiet)
    failed = 0
    for done, item in enumerate(missing, 1):
        module = modules.get(item.module_id)
        found = svc.index.version_by_key(item.module_id, item.version_key)
        ok = False
        if module is not None and found is not None:
            repo = svc.index.repo(module.repo_id)
            version = Published(found.version, item.version_key, found.commit_sha, found.tree_sha)
            ok = svc.docs.document(svc.publisher.mirror_path(repo), repo, module, version)
        failed += not ok
        label = f"{module.address if module else item.module_id} {item.version_key}"
        bar.step(done, label, ok)
    failed += _providers(svc, out, quiet)
    searchable = svc.catalog.searchable_modules()
    rebuilt = sum(svc.docs.refresh_search(m) for m in modules.values() if m.id not in searchable)
    if rebuilt:
        svc.cache.invalidate()
    print(
        f"reindex: {len(missing) - failed} documented, {failed} failed"
        + (" (run again to retry them)" if failed else ""),
        file=out,
    )
    return 1 if failed else 0


def _providers(svc: Services, out: TextIO, quiet: bool) -> int:
    """Provider versions without documentation pages, read from their
    repository at the release tag (issue 13); versions of providers without a
    repository (uploads only) have nothing to read and are left alone."""
    store, documenter = svc.providers.store, svc.providers.documenter
    todo = []
    for item in svc.provider_docs.undocumented_provider_versions(PROVIDER_DOCS_FORMAT):
        provider = store.provider(item.provider_id)
        if provider.repo_id is not None:
            todo.append((provider, provider.repo_id, item))
    if not todo or documenter is None:
        return 0
    bar = Bar(out, len(todo), quiet)
    fetched: dict[int, Path] = {}
    failed = 0
    for done, (provider, repo_id, item) in enumerate(todo, 1):
        version = store.provider_version(provider.id, item.version)
        repo = svc.index.repo(repo_id)
        ok = version is not None and documenter.document(
            provider, repo, version, tag_of(item.source), fetched
        )
        failed += not ok
        bar.step(done, f"provider {provider.address} {item.version}", ok)
    svc.cache.invalidate()
    return failed


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    cmd = sub.add_parser(
        "reindex",
        parents=[common],
        help="extract documentation for versions published before it existed (resumable)",
    )
    cmd.add_argument("--quiet", action="store_true", help="print only the summary")
    cmd.set_defaults(handler=lambda svc, a: reindex(svc, quiet=a.quiet))
