"""The documentation document of one module version.

`extract` takes the files `tree.read_doc_files` read and returns a JSON-able
dict, stored once with the version and never rewritten (like the archive).
Its shape is the public registry's v1 module record (`root`, `submodules`,
`examples`, each with `path`, `readme`, `empty`, `inputs`, `outputs`,
`dependencies`, `provider_dependencies`, `resources`), plus what the public
API does not carry: `readme_html` per module, `required_version`,
`changelog_html`, the source and commit, and `problems` (files that did not
parse or were left out). `DOCS_FORMAT` changes only with a new shape, so
`gitreg reindex` can tell which documents to rebuild.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import Any

from gitreg.catalog.hcl import add_file, empty_module, parse_file
from gitreg.catalog.readme import Links, changelog_section, first_prose, plain_text, render, web_url
from gitreg.catalog.tree import NESTED

# 2: README HTML kept (sanitised), links into the version's pages;
# 3: variables' nullable and deprecated, moved and removed blocks (the semver guard)
DOCS_FORMAT = 3
_READMES = ("README.md", "README.markdown", "README")


@dataclass(frozen=True)
class Origin:
    """Where a version came from: the remote, the commit and the module's
    directory inside the repository ("" for the root)."""

    remote: str
    commit: str
    subdir: str
    version: str
    page: str = ""  # the version's UI path (gitreg/catalog/paths.py): "" links to the forge only


def extract(files: dict[str, bytes], origin: Origin, notes: list[str]) -> dict[str, Any]:
    web = web_url(origin.remote)
    problems = list(notes)
    modules: dict[str, dict[str, Any]] = {"": empty_module("")}
    for path in sorted(files):
        directory = posixpath.dirname(path)
        module = modules.setdefault(directory, empty_module(directory))
        if path.lower().endswith(".tf"):
            _add_tf(module, path, files[path], problems)
    for directory, module in modules.items():
        _add_readme(module, directory, files, origin, web)
    root = modules.pop("")
    changelog = _changelog(files, origin, web)
    return {
        "format": DOCS_FORMAT,
        "source": web or origin.remote,
        "source_remote": origin.remote,
        "commit": origin.commit,
        "subdir": origin.subdir,
        "root": root,
        "submodules": [m for p, m in modules.items() if p.startswith(NESTED[0] + "/")],
        "examples": [m for p, m in modules.items() if p.startswith(NESTED[1] + "/")],
        "changelog_html": changelog,
        "problems": problems,
    }


def search_text(document: dict[str, Any]) -> str:
    """The words search looks at beyond the address: README text
    and input/output names of every module in the version."""
    parts: list[str] = []
    for module in [document["root"], *document["submodules"], *document["examples"]]:
        parts.append(plain_text(module.get("readme_html", "")))
        parts.extend(i["name"] for i in module["inputs"])
        parts.extend(o["name"] for o in module["outputs"])
    return " ".join(p for p in parts if p)


def description(document: dict[str, Any]) -> str:
    """A one-line description: the README's first paragraph of prose, as text."""
    return first_prose(str(document["root"].get("readme_html", "")))[:300]


def _add_tf(module: dict[str, Any], path: str, raw: bytes, problems: list[str]) -> None:
    try:
        parsed = parse_file(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        # Reported in the version's metadata; the version publishes anyway.
        problems.append(f"{path}: not valid HCL: {exc}")
        return
    add_file(module, parsed)


def _add_readme(
    module: dict[str, Any], directory: str, files: dict[str, bytes], origin: Origin, web: str
) -> None:
    prefix = f"{directory}/" if directory else ""
    text = next(
        (files[prefix + n].decode("utf-8", "replace") for n in _READMES if prefix + n in files),
        "",
    )
    module["readme"] = text  # the Markdown as written, as the public v1 API gives it
    in_repo = posixpath.join(origin.subdir, directory) if origin.subdir else directory
    module["readme_html"] = render(text, _links(origin, web, in_repo)) if text else ""


def _changelog(files: dict[str, bytes], origin: Origin, web: str) -> str:
    section = changelog_text(files, origin.version)
    links = _links(origin, web, origin.subdir)
    return render(section, links, "changelog-") if section else ""


def _links(origin: Origin, web: str, directory: str) -> Links:
    return Links(directory, web, origin.commit, origin.page, origin.subdir)


def is_changelog(path: str) -> bool:
    """Whether `changelog_text` looks at this file (a top-level `changelog.tf`
    too: it is read for the interface, and its name matches)."""
    return "/" not in path and path.lower().startswith(("changelog", "changes"))


def changelog_text(files: dict[str, bytes], version: str) -> str:
    """The Markdown of `version`'s CHANGELOG section, or "": the one part of a
    document that depends on the version (gitreg/catalog/reuse.py)."""
    for name in sorted(files):
        if is_changelog(name):
            section = changelog_section(files[name].decode("utf-8", "replace"), version)
            if section:
                return section
    return ""
