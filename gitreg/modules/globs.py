"""`repo add --modules PATTERN`: every module directory of a monorepo, now and later.

The pattern is kept with the repository (`module_globs`). Each sync looks for the
directories matching it in the trees of all the repository's tags, and registers each
one not yet registered as the module NAMESPACE/<directory name>/SYSTEM, fed from that
directory (docs/modules.md "Monorepos"). A directory that appears in a later push is
registered by the sync that fetches it, webhook-triggered or not.

Tags are either shared (every module gets every `v*` tag: the tag pattern is empty) or
named per module by a pattern such as `{name}/v{version}`: module `vpc` then takes
the tags `vpc/v1.2.0`, i.e. the tag prefix `vpc/v`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from gitreg.addresses import check_subdir, module_address
from gitreg.errors import BadRequest, Conflict
from gitreg.git.backend import GitBackend, TagRef
from gitreg.storage.protocols import ModuleIndex
from gitreg.storage.records import RepoRecord
from gitreg.versions import unsafe_ref_reason

NAME = "{name}"
VERSION = "{version}"


def check_module_glob(pattern: str) -> str:
    """A relative directory pattern: `*`, `?` and `[...]` within components only."""
    cleaned = check_subdir(pattern)
    if not cleaned:
        raise BadRequest("--modules needs a directory pattern such as 'modules/*'")
    if "**" in cleaned:
        raise BadRequest(f"invalid module pattern {pattern!r}: '**' is not supported")
    return cleaned


def check_tag_pattern(pattern: str) -> str:
    """ "" (shared repository tags), or a pattern ending in {version} naming {name} once."""
    if not pattern:
        return ""
    prefix = pattern.removesuffix(VERSION)
    if prefix == pattern or prefix.count(NAME) != 1:
        raise BadRequest(
            f"invalid tag pattern {pattern!r}: it must contain {NAME} once and end with"
            f" {VERSION}, e.g. '{NAME}/v{VERSION}'"
        )
    rest = prefix.replace(NAME, "x")
    if "{" in rest or "}" in rest:
        raise BadRequest(f"invalid tag pattern {pattern!r}: only {NAME} and {VERSION} are known")
    if reason := unsafe_ref_reason(rest):
        raise BadRequest(f"invalid tag pattern {pattern!r}: {reason}")
    return pattern


def tag_prefix_for(tag_pattern: str, name: str) -> str:
    """The tag prefix of module `name`: `{name}/v{version}` gives `vpc/v` for vpc."""
    return tag_pattern.removesuffix(VERSION).replace(NAME, name)


def discover_modules(
    index: ModuleIndex,
    git: GitBackend,
    repo: RepoRecord,
    mirror: Path,
    tags: Sequence[TagRef],
) -> tuple[list[str], list[str]]:
    """Register the directories under the repository's patterns that are not modules
    yet; returns ("NS/NAME/SYSTEM (path)" registered, "pattern: path: reason" not)."""
    registered: list[str] = []
    ignored: list[str] = []
    globs = index.module_globs(repo.id)
    if not globs or not tags:
        return registered, ignored
    trees = [t.tree_sha for t in tags]
    for glob in globs:
        known = {m.subdir for m in index.modules_of_repo(repo.id)}
        found = git.module_dirs(mirror, trees, glob.pattern)
        for path, why in sorted(found.items()):
            if path in known:
                continue
            name = path.rsplit("/", 1)[-1]
            try:
                if why:
                    raise BadRequest(why)
                address = module_address(glob.namespace, name, glob.system)
                index.add_module(
                    repo.id,
                    address.namespace,
                    address.name,
                    address.system,
                    path,
                    tag_prefix_for(glob.tag_pattern, name),
                    glob.archive_scope,
                )
            except (BadRequest, Conflict) as exc:
                ignored.append(f"{glob.pattern}: {path}: {exc}")
                continue
            registered.append(f"{address} ({path})")
    return registered, ignored
