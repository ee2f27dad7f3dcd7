"""Removing what a killed fetch leaves behind in a mirror.

dulwich writes a ref or a pack index through `<name>.lock` and renames it into
place, and writes a pack into a temporary file first. A process killed in
between (kill -9, OOM killer, power loss) leaves those files behind, and dulwich
then refuses that ref or index on every later fetch (`FileLocked`), so the
repository would never publish again.

gitreg owns its mirrors: only gitreg writes them, and it does so only while
holding the repository's flock (`gitreg.locks`), which the kernel drops when a
holder dies. So a caller holding that lock knows every such file is stale.
Call `remove_leftovers` only while holding it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from gitreg.errors import GitError

# Top-level files dulwich locks the same way as refs.
_TOP_LEVEL_LOCKS = ("HEAD.lock", "packed-refs.lock", "config.lock")


def remove_leftovers(mirror: Path) -> list[str]:
    """Delete stale lock files and partial packs; their paths relative to `mirror`."""
    if not mirror.is_dir():
        return []
    removed: list[str] = []
    for path in [*_lock_files(mirror), *_partial_packs(mirror / "objects")]:
        try:
            path.unlink()
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise GitError(f"cannot remove stale {path}: {exc.strerror}") from exc
        removed.append(str(path.relative_to(mirror)))
    return removed


def _lock_files(mirror: Path) -> Iterator[Path]:
    for name in _TOP_LEVEL_LOCKS:
        if (mirror / name).is_file():
            yield mirror / name
    for top in ("refs", "objects"):
        for folder, _dirs, files in os.walk(mirror / top):  # does not follow symlinks
            yield from (Path(folder, f) for f in files if f.endswith(".lock"))


def _partial_packs(objects: Path) -> Iterator[Path]:
    """Packs that were never finished.

    `objects/tmp_pack_*` (thin packs from the network), `objects/pack/tmp*`
    (packs from a local remote are written as `tmp<random>.pack`) and a
    `pack-<sha>.pack` without its `.idx` (killed between the rename and the
    index; dulwich ignores such a pack, and the next fetch writes it again).
    """
    if objects.is_dir():
        yield from (p for p in objects.iterdir() if p.name.startswith("tmp_pack_") and p.is_file())
    packs = objects / "pack"
    if not packs.is_dir():
        return
    names = {p.name for p in packs.iterdir()}
    for name in sorted(names):
        unfinished = name.endswith(".pack") and f"{name.removesuffix('.pack')}.idx" not in names
        if name.startswith("tmp") or unfinished:
            yield packs / name
