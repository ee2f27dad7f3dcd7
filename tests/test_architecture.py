"""The shape of the house: features by folder, roles by file name, and arrows that
only run down.

Every feature is one package (FEATURES). Inside any package a file's name says its
role: `http.py` / `http_*.py` and `pages.py` / `pages_*.py` translate HTTP, `cli.py` /
`cli_*.py` translate the command line, everything else is domain. `gitreg/api/`,
`gitreg/ui/` and `gitreg/server/` hold what HTTP modules share; `gitreg/app.py`,
`gitreg/cli.py` and `gitreg/services.py` assemble. The rules are read from the
source with `ast`, so the test imports nothing and sees every file.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "gitreg"

FEATURES = (
    "audit",
    "attestations",
    "auth",
    "catalog",
    "doctor",
    "jobs",
    "mirror",
    "module_proxy",
    "modules",
    "oci",
    "providers",
    "repositories",
    "semver_guard",
    "usage",
    "verify",
    "webhooks",
    "workload_identity",
)
# Shared machinery the features build on; never a feature's own code.
SHARED = ("archives", "git", "metrics", "storage", "upstream")
HTTP_PACKAGES = ("gitreg.api", "gitreg.ui", "gitreg.server")
ASSEMBLY = ("gitreg.app", "gitreg.cli", "gitreg.__main__", "gitreg.services")

# Domain modules that still import Starlette; each entry goes when its module stops.
STARLETTE_IN_DOMAIN: set[str] = set()

# The engine implementations of the feature stores. Only the module that defines one
# and the one place that builds them name them, so a feature sees its store's protocol.
CONCRETE_STORAGE = (
    "SQLiteIndex",
    "IndexBackedStore",
    "RegistrationStore",
    "JobStore",
    "ProviderStore",
    "MirrorStore",
    "AuthStore",
    "AttestationStore",
    "FileBlobStore",
    "FileSecretStore",
    "DatabaseSecretStore",
    "S3BlobStore",
    "LocalUploadStore",
    "S3UploadStore",
    "ProviderDocsStore",
    "DownloadCountStore",
    "CatalogStore",
    "ModuleProxyStore",
    "StagedBytesStore",
    "AuditStore",
)
STORAGE_BUILDERS = ("gitreg.services", "gitreg.storage.copy")


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


def _role(module: str) -> str:
    """ "assembly", "http", "cli" or "domain", from the module's place and name."""
    if module in ASSEMBLY:
        return "assembly"
    leaf = module.rsplit(".", 1)[-1]
    if any(module == p or module.startswith(p + ".") for p in HTTP_PACKAGES):
        return "http"
    if leaf in ("http", "pages") or leaf.startswith(("http_", "pages_")):
        return "http"
    if leaf == "cli" or leaf.startswith("cli_"):
        return "cli"
    return "domain"


def _feature(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 2 and parts[1] in FEATURES else None


def _stdlib_and_third_party(tree: ast.AST) -> Iterator[str]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module


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


def test_every_feature_and_shared_package_exists() -> None:
    # Guards the tests below against a rename that would silently empty them.
    for package in (*FEATURES, *SHARED):
        assert (PACKAGE / package / "__init__.py").exists(), package
    assert {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()} == {
        *FEATURES,
        *SHARED,
        *(p.split(".")[1] for p in HTTP_PACKAGES),
    }


# Test folders that mirror no package: the CLI's gathering module (gitreg/cli.py),
# deployments and end-to-end runs through every feature.
_TESTS_OF_NO_PACKAGE = {"cli", "deploy", "e2e"}


def test_the_tests_mirror_the_package() -> None:
    tests = PACKAGE.parent / "tests"
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    with_tests = {p.parent.name for p in tests.glob("*/test_*.py")}
    assert with_tests - packages <= _TESTS_OF_NO_PACKAGE
    assert packages - with_tests == set()


def test_the_domain_never_imports_http_or_the_cli() -> None:
    graph = _graph(module_level=False)  # imports inside functions count here too
    offending = sorted(
        f"{module} imports {target}"
        for module, targets in graph.items()
        if _role(module) == "domain"
        for target in targets
        if _role(target) != "domain"
    )
    assert offending == []


def test_http_and_the_cli_never_import_each_other() -> None:
    graph = _graph(module_level=False)
    offending = sorted(
        f"{module} imports {target}"
        for module, targets in graph.items()
        for target in targets
        if {_role(module), _role(target)} == {"http", "cli"}
    )
    assert offending == []


def test_only_http_modules_import_starlette() -> None:
    found = {
        module
        for module, path in _sources().items()
        if _role(module) in ("domain", "cli")
        and any(
            name == "starlette" or name.startswith("starlette.")
            for name in _stdlib_and_third_party(ast.parse(path.read_text(encoding="utf-8")))
        )
    }
    assert found == STARLETTE_IN_DOMAIN


def test_no_feature_reaches_into_another_features_store() -> None:
    graph = _graph(module_level=False)
    offending = sorted(
        f"{module} imports {target}"
        for module, targets in graph.items()
        for target in targets
        if (feature := _feature(target)) is not None
        and target.rsplit(".", 1)[-1].startswith("store_sql")
        and _feature(module) != feature
        and module not in STORAGE_BUILDERS
    )
    assert offending == []


def test_no_import_cycles() -> None:
    assert _cycles(_graph(module_level=True)) == set()


def _names_used(tree: ast.AST) -> set[str]:
    """Names imported with `from ... import` or reached as an attribute."""
    used: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            used.update(alias.name for alias in node.names)
        elif isinstance(node, ast.Attribute):
            used.add(node.attr)
    return used


def _defining_modules() -> dict[str, str]:
    defined = {}
    for module, path in _sources().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and node.name in CONCRETE_STORAGE:
                defined[node.name] = module
    return defined


def test_only_the_builder_names_the_concrete_storage_classes() -> None:
    defined = _defining_modules()
    assert set(CONCRETE_STORAGE) == set(defined)  # a rename would empty the check
    offending = sorted(
        f"{module} uses {name}"
        for module, path in _sources().items()
        if module not in STORAGE_BUILDERS and not module.startswith("gitreg.storage")
        for name in _names_used(ast.parse(path.read_text(encoding="utf-8"), str(path)))
        if name in CONCRETE_STORAGE
        and defined[name] != module
        and not (name == "IndexBackedStore" and module.rsplit(".", 1)[-1].startswith("store_sql"))
    )
    assert offending == []


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


# Fields of `Services` that hold storage rather than a feature's service. Handlers,
# pages and commands call services; only `blobs` is the interface blob downloads
# use as it is (open a blob, or presign its URL), so it is not listed.
STORE_FIELDS = frozenset(
    {
        "index",
        "auth",
        "registrations",
        "secrets",
        "uploads",
        "catalog_index",
        "provider_docs",
        "staged_bytes",
        "docs",
        "publisher",
        "provider_publisher",
        "job_queue",
        "searches",
    }
)


def _services_values(node: ast.expr) -> bool:
    """Whether `node` is the Services object as handlers name it: `svc`,
    `services`, or `services(request)`."""
    if isinstance(node, ast.Name):
        return node.id in ("svc", "services")
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "services"
    )


def test_handlers_pages_and_commands_never_reach_into_a_store() -> None:
    offending = sorted(
        f"{module}:{node.lineno} uses .{node.attr}"
        for module, path in _sources().items()
        if _role(module) in ("http", "cli")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Attribute)
        and node.attr in STORE_FIELDS
        and _services_values(node.value)
    )
    assert offending == []


def test_services_is_built_once_and_never_changed() -> None:
    tree = ast.parse((PACKAGE / "services.py").read_text(encoding="utf-8"))
    (found,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Services"]
    (decorator,) = found.decorator_list
    assert isinstance(decorator, ast.Call)
    options = {
        k.arg: k.value.value for k in decorator.keywords if isinstance(k.value, ast.Constant)
    }
    assert options.get("frozen") is True and options.get("kw_only") is True


def test_settings_import_only_the_vocabulary() -> None:
    """Loading settings parses each config table with its feature's section module
    (docs/architecture.md, "Settings"): what that reaches, imports inside functions
    included, is top-level vocabulary and features' plain domain modules, never a
    service, a store, a route, shared machinery or a third-party package."""
    import sys

    graph = _graph(module_level=False)
    sources = _sources()
    reached: set[str] = set()
    pending = ["gitreg.settings"]
    while pending:
        module = pending.pop()
        if module not in reached:
            reached.add(module)
            pending.extend(graph.get(module, ()))
    assert "gitreg.auth.grants" in reached  # the sections are seen at all
    offending = sorted(
        module
        for module in reached
        if module.count(".") > 1
        and (
            _feature(module) is None
            or _role(module) != "domain"
            or module.rsplit(".", 1)[-1] in ("service", "store")
            or module.rsplit(".", 1)[-1].startswith("store_")
        )
    )
    assert offending == []
    third_party = sorted(
        f"{module} imports {package}"
        for module in reached
        if module in sources
        for package in _third_party_imports(ast.parse(sources[module].read_text("utf-8")))
        if package != "gitreg" and package not in sys.stdlib_module_names
    )
    assert third_party == []
