"""The browse API's records, in the public registry's v1 shape.

Field names follow registry.terraform.io's `/v1/modules` answers: a short
record per module in lists (`id`, `owner`, `namespace`, `name`, `version`,
`provider`, `description`, `source`, `published_at`, `downloads`,
`verified`), and the full record for one version adds `root`,
`submodules`, `examples`, `providers` and `versions`. Everything here is
built from the index and the stored documents only, so the web UI can render
exactly what the API serves. Visibility is decided by the caller
(gitreg/catalog/service.py): records carry their namespace for that.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gitreg.addresses import module_address
from gitreg.catalog.extract import description
from gitreg.catalog.hcl import empty_module
from gitreg.catalog.readme import web_url
from gitreg.catalog.store import CatalogIndex, ProviderDocsIndex
from gitreg.errors import NotFound
from gitreg.providers.store import ProviderIndex, ProviderRecord
from gitreg.storage.protocols import ModuleIndex
from gitreg.storage.records import ModuleRecord, VersionRecord
from gitreg.versions import latest, parse_version, sort_key


@dataclass(frozen=True)
class Listed:
    """One module in a list: its namespace (for visibility), its record and
    whether its version has examples (the UI's search filter)."""

    module_id: int
    namespace: str
    record: dict[str, Any]
    has_examples: bool = False


@dataclass(frozen=True)
class ModuleView:
    """One version of a module as the catalog shows it: its full record,
    whether it is yanked, and the commits its tag was later seen at."""

    module_id: int
    record: dict[str, Any]
    yanked: bool
    moved: tuple[str, ...]


def version_key(version: VersionRecord) -> str:
    return str(parse_version(version.version).without_build())


def listed_versions(index: ModuleIndex, module: ModuleRecord) -> list[VersionRecord]:
    """Unyanked versions, newest first (a yanked version leaves every list)."""
    found = [v for v in index.versions(module.id) if not v.yanked]
    return sorted(found, key=lambda v: sort_key(v.version), reverse=True)


def latest_listed(versions: list[VersionRecord]) -> VersionRecord | None:
    """The version offered as the module's latest (`gitreg.versions.latest`)."""
    return latest(versions, lambda v: v.version, lambda v: v.yanked)


def _document(catalog: CatalogIndex, module: ModuleRecord, key: str) -> dict[str, Any]:
    stored = catalog.docs(module.id, key)
    if stored is None:  # published before extraction and not reindexed yet
        return {"root": empty_module(""), "submodules": [], "examples": [], "source": ""}
    loaded = json.loads(stored)
    return loaded if isinstance(loaded, dict) else {}


def short_record(
    module: ModuleRecord, version: VersionRecord, doc: dict[str, Any]
) -> dict[str, Any]:
    return {
        "id": f"{module.address}/{version.version}",
        "owner": "",
        "namespace": module.namespace,
        "name": module.name,
        "version": version.version,
        "provider": module.system,
        "description": description(doc) if doc.get("root") else "",
        "source": doc.get("source", ""),
        "tag": version.tag,
        "published_at": version.published_at,
        # The module's total over every version: set when answering, from the
        # download counter's totals (gitreg/usage/counter.py, gitreg/catalog/http.py).
        "downloads": 0,
        "verified": False,  # no verification programme in a private registry
        "deprecation": deprecation(version),
    }


def deprecation(version: VersionRecord) -> dict[str, str] | None:
    """`gitreg module deprecate`: the same `{reason, link}` the
    version list carries, or None."""
    if version.deprecation_reason is None:
        return None
    return {"reason": version.deprecation_reason, "link": version.deprecation_link}


# A version's provenance as the browse API shows it (gitreg/attestations), by
# module id and version key: archive sha256, dirHash, commit, log index; None
# for a version that has no signed statement yet.
Provenance = Callable[[int, str], dict[str, Any] | None]


def full_record(
    index: ModuleIndex,
    catalog: CatalogIndex,
    module: ModuleRecord,
    version: VersionRecord,
    provenance: Provenance | None = None,
) -> dict[str, Any]:
    doc = _document(catalog, module, version_key(version))
    record = short_record(module, version, doc)
    listed = listed_versions(index, module)
    record.update(
        {
            "commit": version.commit_sha,
            "root": doc["root"],
            "submodules": doc["submodules"],
            "examples": doc["examples"],
            "changelog_html": doc.get("changelog_html", ""),
            "problems": doc.get("problems", []),
            "providers": [module.system],
            "versions": [v.version for v in listed],
            "deprecated_versions": [v.version for v in listed if v.deprecated],
            "provenance": provenance(module.id, version_key(version)) if provenance else None,
        }
    )
    return record


def module_view(
    index: ModuleIndex,
    catalog: CatalogIndex,
    names: tuple[str, str, str],
    version: str | None,
    provenance: Provenance | None = None,
) -> ModuleView | None:
    """`version` of the module `names` (namespace, name, system), or its latest
    (`latest_listed`) when `version` is None; None when there is no such module
    or version. An exact version may be a yanked one: it stays downloadable.
    Raises BadRequest when `names` is not a module address."""
    addr = module_address(*names)
    module = index.find_module(addr.namespace, addr.name, addr.system)
    if module is None:
        return None
    versions = index.versions(module.id)
    if version is None:
        chosen = latest_listed(versions)
    else:
        chosen = next((v for v in versions if v.version == version), None)
    if chosen is None:
        return None
    moved = tuple(
        c.seen_commit
        for c in index.conflicts(module.id)
        if c.version == chosen.version or c.tag == chosen.tag
    )
    record = full_record(index, catalog, module, chosen, provenance)
    return ModuleView(module.id, record, chosen.yanked, moved)


def all_listed(index: ModuleIndex, catalog: CatalogIndex) -> list[Listed]:
    """Every module with a listed version, as its latest version's short record,
    ordered by namespace, name, system."""
    found = []
    for module in index.modules():
        chosen = latest_listed(index.versions(module.id))
        if chosen is not None:
            doc = _document(catalog, module, version_key(chosen))
            record = short_record(module, chosen, doc)
            examples = bool(doc.get("examples"))
            found.append(Listed(module.id, module.namespace, record, examples))
    found.sort(key=lambda m: (m.namespace.lower(), m.record["name"], m.record["provider"]))
    return found


def _listings(docs: ProviderDocsIndex | None, provider_id: int) -> dict[int, dict[str, Any]]:
    stored = docs.provider_docs(provider_id) if docs is not None else {}
    return {version_id: json.loads(listing) for version_id, listing in stored.items()}


def _repository(repos: ModuleIndex, provider: ProviderRecord) -> str:
    """The browsable address of the provider's repository, "" when it has
    none (uploads only, a repository removed, a local path)."""
    if provider.repo_id is None:
        return ""
    try:
        return web_url(repos.repo(provider.repo_id).url)
    except NotFound:
        return ""


def provider_record(
    providers: ProviderIndex,
    repos: ModuleIndex,
    namespace: str,
    type_: str,
    docs: ProviderDocsIndex | None = None,
) -> dict[str, Any] | None:
    """A provider's record for `/v1/providers/NS/TYPE[/VERSION]`: versions,
    platforms, protocols and the signing key ids of each listed version, and
    with `docs` its documentation pages (`docs`, in the public registry's
    shape, and `problems`: pages left out). Each release's `source` is the
    repository's web address, as on the public registry, and is left out when
    none is known: clients such as Dependabot read it as a URL. `latest` is
    the version offered as the latest (`gitreg.versions.latest`), or None."""
    provider = providers.find_provider(f"{namespace}/{type_}".lower())
    if provider is None:
        return None
    repository = _repository(repos, provider)
    listings = _listings(docs, provider.id)
    # Yanked versions are kept for exact-version lookups but leave `versions`.
    versions = list(providers.provider_versions(provider.id))
    versions.sort(key=lambda v: sort_key(v.version), reverse=True)
    packages = providers.packages_by_version(provider.id)
    keys = {k.id: k.key_id for k in providers.keys(provider.namespace)}
    entries = [
        {
            "id": f"{provider.address}/{v.version}",
            "version": v.version,
            "protocols": list(v.protocols),
            "platforms": [{"os": p.os, "arch": p.arch} for p in packages.get(v.id, [])],
            "signing_key_ids": [keys[v.key_row]] if v.key_row in keys else [],
            **({"source": repository} if repository else {}),
            "published_at": v.published_at,
            "docs": listings.get(v.id, {}).get("docs", []),
            "problems": listings.get(v.id, {}).get("problems", []),
            "yanked": v.yanked,
        }
        for v in versions
    ]
    return {
        "provider_id": provider.id,  # for its download total; not in the answer
        "namespace": provider.namespace,
        "name": provider.type,
        "versions": [e["version"] for e in entries if not e["yanked"]],
        "latest": latest([e["version"] for e in entries if not e["yanked"]], str),
        "releases": entries,
    }


def choose_release(record: dict[str, Any], version: str | None) -> dict[str, Any] | None:
    """One release of a `provider_record`: the latest for None, else that
    exact version, yanked ones included (they stay served by exact version)."""
    wanted = record["latest"] if version is None else version
    releases: list[dict[str, Any]] = record["releases"]
    return next((r for r in releases if r["version"] == wanted), None)


def hosted_providers(providers: ProviderIndex) -> list[tuple[str, str]]:
    """(namespace, type) of every hosted provider with a listed version,
    ordered by namespace and type, case aside."""
    found = [
        (p.namespace, p.type)
        for p in providers.providers()
        if any(not v.yanked for v in providers.provider_versions(p.id))
    ]
    return sorted(found, key=lambda p: (p[0].lower(), p[1].lower()))


def provider_doc(
    providers: ProviderIndex,
    docs: ProviderDocsIndex,
    namespace: str,
    type_: str,
    version: str,
    doc_id: str,
) -> dict[str, Any] | None:
    """One documentation page of a provider version: its `docs` entry plus
    `html` (rendered and sanitised at ingest); None when there is no such
    provider, version or page. Yanked versions answer too, as by exact version."""
    provider = providers.find_provider(f"{namespace}/{type_}".lower())
    found = providers.provider_version(provider.id, version) if provider else None
    if provider is None or found is None:
        return None
    # This version's listing only: every version's (`_listings`) is megabytes
    # of JSON for a large provider, parsed again for each page asked for.
    stored = docs.provider_doc_listing(found.id)
    listing = json.loads(stored) if stored is not None else {}
    entry = next((e for e in listing.get("docs", []) if e["id"] == doc_id), None)
    html = docs.provider_doc_page(found.id, doc_id) if entry is not None else None
    if entry is None or html is None:
        return None
    return {**entry, "html": html}
