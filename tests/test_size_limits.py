"""Small files and functions (issue 11, item 5): no gitreg/ file over 500 lines,
no function over 60. Read from the source with `ast`, so the test imports nothing
of gitreg and sees every file, including ones no other test loads.

There is no allow-list on purpose: something that grows past a limit is split
into well-named pieces rather than excused here.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "gitreg"
MAX_FILE_LINES = 500
MAX_FUNCTION_LINES = 60


def _sources() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _long_functions(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        assert node.end_lineno is not None
        length = node.end_lineno - node.lineno + 1
        if length > MAX_FUNCTION_LINES:
            where = path.relative_to(PACKAGE.parent)
            found.append(f"{where}:{node.lineno} {node.name}() has {length} lines")
    return found


def test_the_package_has_sources() -> None:
    # Guards the two tests below against passing because they found nothing.
    assert len(_sources()) > 20


def test_no_file_is_over_the_limit() -> None:
    too_long = []
    for path in _sources():
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > MAX_FILE_LINES:
            too_long.append(f"{path.relative_to(PACKAGE.parent)} has {lines} lines")
    assert too_long == [], f"split these files (at most {MAX_FILE_LINES} lines each)"


def test_no_function_is_over_the_limit() -> None:
    too_long = [line for path in _sources() for line in _long_functions(path)]
    assert too_long == [], f"split these functions (at most {MAX_FUNCTION_LINES} lines each)"
