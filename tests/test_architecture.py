"""The layering the code is meant to keep (issue 11, "One vocabulary and real seams").

HTTP layers (`gitreg/api/`, `gitreg/webhooks/`) and the CLI (`gitreg/cli.py`,
`gitreg/commands/`) translate requests into calls on the domain; the domain and
storage never reach back up into them. And no two gitreg modules import each
other, even through others, at module level. Both are read from the source
with `ast`, so the test needs no imports of its own and sees every file.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "gitreg"

# Packages and top-level modules that decide or store, and must not depend on
# the layers that serve them.
DOMAIN = ("modules", "providers", "mirror", "storage", "auth", "git")
DOMAIN_MODULES = ("versions", "addresses")
OUTER_LAYERS = ("gitreg.api", "gitreg.webhooks", "gitreg.ui", "gitreg.cli", "gitreg.commands")

# Cycles that exist today and are being removed by another change; each entry is
# the sorted tuple of modules in one cycle. A cycle not listed here fails.
# The SQLite and file implementations of the storage protocols
# (gitreg/storage/protocols.py, BlobStore in gitreg/storage/blobs.py). Only
# storage itself and the one place that builds them may name them, so a second
# implementation (PostgreSQL, S3) needs no change elsewhere.
CONCRETE_STORAGE = (
    "SQLiteIndex",
    "IndexBackedStore",
    "RegistrationStore",
    "JobStore",
    "ProviderStore",
    "MirrorStore",
    "AuthStore",
    "FileBlobStore",
    "FileSecretStore",
    "DatabaseSecretStore",
    "S3BlobStore",
    "LocalUploadStore",
    "S3UploadStore",
    "ProviderDocsStore",
    "DownloadCountStore",
)
STORAGE_BUILDERS = ("gitreg.services",)

KNOWN_CYCLES: set[tuple[str, ...]] = set()


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _sources() -> dict[str, Path]:
    return {_module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _resolve(module: str, level: int, importer: str, is_package: bool) -> str:
    """The absolute name of `from <level dots><module> import ...` in `importer`."""
    if level == 0:
        return module
    base = importer.split(".")
    base = base[: len(base) - level + (1 if is_package else 0)]
    return ".".join(base + ([module] if module else []))


def _imports(tree: ast.AST, importer: str, is_package: bool, modules: set[str]) -> Iterator[str]:
    """Every gitreg module `tree` imports, with `from X import Y` naming X.Y when
    Y is a module itself."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names if alias.name.startswith("gitreg"))
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(node.module or "", node.level, importer, is_package)
            if not target.startswith("gitreg"):
                continue
            yield target
            for alias in node.names:
                if f"{target}.{alias.name}" in modules:
                    yield f"{target}.{alias.name}"


def _module_level(tree: ast.Module) -> ast.Module:
    """The module without its function bodies: what runs when it is imported.

    Imports under `if TYPE_CHECKING:` stay in, as they are the same dependency
    for the reader and for mypy, only deferred."""
    kept: list[ast.stmt] = []
    pending: list[ast.stmt] = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        kept.append(node)
        for field in ("body", "orelse", "finalbody", "handlers"):
            pending.extend(getattr(node, field, []))
    return ast.Module(
        body=[n for n in kept if isinstance(n, ast.Import | ast.ImportFrom)], type_ignores=[]
    )


def _graph(module_level: bool) -> dict[str, set[str]]:
    sources = _sources()
    names = set(sources)
    graph: dict[str, set[str]] = {}
    for name, path in sources.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        if module_level:
            tree = _module_level(tree)
        imported = _imports(tree, name, path.name == "__init__.py", names)
        graph[name] = {target for target in imported if target != name}
    return graph


def _is_domain(module: str) -> bool:
    parts = module.split(".")
    if len(parts) < 2:
        return False
    if len(parts) == 2:
        return parts[1] in DOMAIN_MODULES or parts[1] in DOMAIN
    return parts[1] in DOMAIN


def _cycles(graph: dict[str, set[str]]) -> set[tuple[str, ...]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: set[tuple[str, ...]] = set()

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.add(tuple(sorted(component)))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_domain_and_storage_never_import_the_http_layers_or_the_cli() -> None:
    graph = _graph(module_level=False)  # imports inside functions count here too
    offending = sorted(
        f"{module} imports {target}"
        for module, targets in graph.items()
        if _is_domain(module)
        for target in targets
        if any(target == outer or target.startswith(outer + ".") for outer in OUTER_LAYERS)
    )
    assert offending == []


def test_the_domain_list_names_real_modules() -> None:
    # Guards the test above against a rename that would silently empty it.
    sources = _sources()
    for package in DOMAIN:
        assert f"gitreg.{package}" in sources
    for module in DOMAIN_MODULES:
        assert f"gitreg.{module}" in sources


def test_no_new_import_cycles() -> None:
    cycles = _cycles(_graph(module_level=True))
    assert cycles - KNOWN_CYCLES == set()


def test_the_cycle_finder_sees_the_known_cycles() -> None:
    # When this fails a known cycle is gone: delete its KNOWN_CYCLES entry.
    assert _cycles(_graph(module_level=True)) >= KNOWN_CYCLES


def _names_used(tree: ast.AST) -> set[str]:
    """Names imported with `from ... import` or reached as an attribute."""
    used: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            used.update(alias.name for alias in node.names)
        elif isinstance(node, ast.Attribute):
            used.add(node.attr)
    return used


def test_only_storage_and_the_builder_name_the_concrete_storage_classes() -> None:
    offending = sorted(
        f"{module} uses {name}"
        for module, path in _sources().items()
        if not module.startswith("gitreg.storage") and module not in STORAGE_BUILDERS
        for name in _names_used(ast.parse(path.read_text(encoding="utf-8"), str(path)))
        if name in CONCRETE_STORAGE
    )
    assert offending == []


def test_the_concrete_storage_list_names_real_classes() -> None:
    # Guards the test above against a rename that would silently empty it.
    defined = {
        node.name
        for path in (PACKAGE / "storage").glob("*.py")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.ClassDef)
    }
    assert set(CONCRETE_STORAGE) <= defined


# The index engines' client libraries: their errors are translated into gitreg's
# inside gitreg/storage/ (gitreg/errors.py), so no other layer needs them.
ENGINE_LIBRARIES = ("sqlite3", "psycopg", "psycopg_pool")


def _third_party_imports(tree: ast.AST) -> Iterator[str]:
    """The top-level package of every absolute import in `tree`, at any depth."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module.split(".")[0]


def test_only_storage_imports_the_index_engines() -> None:
    offending = sorted(
        f"{module} imports {package}"
        for module, path in _sources().items()
        if not module.startswith("gitreg.storage")
        for package in _third_party_imports(ast.parse(path.read_text(encoding="utf-8")))
        if package in ENGINE_LIBRARIES
    )
    assert offending == []


def test_the_engine_check_sees_storage_importing_them() -> None:
    # Guards the test above against a change that would make it see nothing.
    seen = {
        package
        for module, path in _sources().items()
        if module.startswith("gitreg.storage")
        for package in _third_party_imports(ast.parse(path.read_text(encoding="utf-8")))
    }
    assert set(ENGINE_LIBRARIES) <= seen
