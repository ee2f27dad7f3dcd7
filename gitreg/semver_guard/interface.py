"""The interface of a module version: what its callers depend on.

Read from the version's document (gitreg/catalog/extract.py, made by the
catalog's HCL readers at publish and by `gitreg reindex`), for the root module
and each submodule under `modules/`: variables (type as written, whether it
has a default, the default, nullable, sensitive, deprecated), outputs
(sensitive, deprecated), `required_providers` (source and constraint),
`required_version`, managed resource and module-call addresses, data sources,
and `moved` and `removed` blocks. Examples are not part of it. `Interfaces`
keeps them by document content, so a process reads each once.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, NamedTuple


class Variable(NamedTuple):
    name: str
    type: str  # as written; "" for no type constraint
    has_default: bool
    default: Any
    nullable: bool
    sensitive: bool
    deprecated: str
    description: str


class Output(NamedTuple):
    name: str
    sensitive: bool
    deprecated: str
    description: str


class Provider(NamedTuple):
    name: str  # the local name in required_providers
    source: str
    version: str


@dataclass(frozen=True)
class ModuleInterface:
    """One module directory's interface ("" for the root)."""

    path: str
    variables: dict[str, Variable] = field(default_factory=dict)
    outputs: dict[str, Output] = field(default_factory=dict)
    providers: dict[str, Provider] = field(default_factory=dict)
    required_version: str = ""
    # "aws_instance.web", "module.vpc": what lives in callers' state.
    addresses: frozenset[str] = frozenset()
    data_sources: frozenset[str] = frozenset()
    moved: tuple[tuple[str, str], ...] = ()  # (from, to)
    removed: tuple[tuple[str, bool], ...] = ()  # (from, destroy)


@dataclass(frozen=True)
class Interface:
    """A version's interface: its root module and submodules by path."""

    modules: dict[str, ModuleInterface]


def interface_of(document: dict[str, Any]) -> Interface:
    """The interface in a version's stored document. A document made before
    gitreg read nullable, deprecated, moved and removed lacks them: variables
    read as nullable and not deprecated, and no block moves anything
    (`gitreg reindex` remakes such documents)."""
    modules = [document.get("root") or {}, *document.get("submodules", [])]
    found = {str(m.get("path", "")): _module(m) for m in modules if isinstance(m, dict)}
    found.setdefault("", ModuleInterface(""))
    return Interface(found)


def _module(doc: dict[str, Any]) -> ModuleInterface:
    # Positional: a module of hundreds of variables is read on every diff.
    variables = {
        v["name"]: Variable(
            v["name"],
            str(v.get("type") or ""),
            not v.get("required", False),
            v.get("default"),
            v.get("nullable", True) is not False,
            bool(v.get("sensitive")),
            str(v.get("deprecated") or ""),
            str(v.get("description") or ""),
        )
        for v in doc.get("inputs", [])
    }
    outputs = {
        o["name"]: Output(
            o["name"],
            bool(o.get("sensitive")),
            str(o.get("deprecated") or ""),
            str(o.get("description") or ""),
        )
        for o in doc.get("outputs", [])
    }
    providers = {
        p["name"]: Provider(p["name"], str(p.get("source") or ""), str(p.get("version") or ""))
        for p in doc.get("provider_dependencies", [])
    }
    resources = doc.get("resources", [])
    managed = {f"{r['type']}.{r['name']}" for r in resources if r.get("mode") == "managed"}
    data = {f"data.{r['type']}.{r['name']}" for r in resources if r.get("mode") == "data"}
    calls = {f"module.{d['name']}" for d in doc.get("dependencies", [])}
    return ModuleInterface(
        path=str(doc.get("path", "")),
        variables=variables,
        outputs=outputs,
        providers=providers,
        required_version=str(doc.get("required_version") or ""),
        addresses=frozenset(managed | calls),
        data_sources=frozenset(data),
        moved=tuple((str(m["from"]), str(m["to"])) for m in doc.get("moved", [])),
        removed=tuple((str(r["from"]), bool(r["destroy"])) for r in doc.get("removed", [])),
    )


class Interfaces:
    """Interfaces by document content, and which content each version had.

    A document is the same JSON for every version with the same files except
    for its commit (gitreg/catalog/reuse.py), so its content is the text with
    the commit taken out: consecutive tags share it, and their interfaces are
    read once. Bounded: a few hundred modules' latest versions."""

    def __init__(self, size: int = 512) -> None:
        self._size = size
        self._by_content: OrderedDict[str, Interface] = OrderedDict()
        self._by_version: OrderedDict[tuple[int, str, str], str] = OrderedDict()
        self._lock = threading.Lock()

    def remembered(self, version: tuple[int, str, str]) -> tuple[str, Interface] | None:
        with self._lock:
            digest = self._by_version.get(version)
            found = self._by_content.get(digest) if digest is not None else None
        return (digest, found) if digest is not None and found is not None else None

    def of(self, text: str, commit: str, version: tuple[int, str, str]) -> tuple[str, Interface]:
        """The interface of the document `text` of `version` (module id,
        version key, commit), with the digest of its content."""
        digest = hashlib.sha256(text.replace(commit, "").encode()).hexdigest()
        with self._lock:
            found = self._by_content.get(digest)
        if found is None:
            document = json.loads(text)
            found = interface_of(document if isinstance(document, dict) else {})
        with self._lock:
            self._by_content[digest] = found
            self._by_content.move_to_end(digest)
            self._by_version[version] = digest
            self._by_version.move_to_end(version)
            for kept in (self._by_content, self._by_version):
                while len(kept) > self._size:
                    kept.popitem(last=False)
        return digest, found
