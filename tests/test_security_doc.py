"""docs/security.md stays true: a row for every checklist item, and every test
it names exists, so that every item is covered by a named test."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "security.md"
ITEMS = [
    *(f"W{n}" for n in range(1, 10)),
    "W10",
    *(f"G{n}" for n in range(1, 7)),
    *(f"A{n}" for n in range(1, 7)),
    "A7",
    *(f"P{n}" for n in range(1, 5)),
    *(f"M{n}" for n in range(1, 5)),
    *(f"S{n}" for n in range(1, 6)),
    *(f"U{n}" for n in range(1, 6)),
    *(f"H{n}" for n in range(1, 4)),
    # Reliability under abuse.
    *(f"R{n}" for n in range(1, 14)),
    "R14",
    "R15",
]


def _rows() -> dict[str, str]:
    rows = {}
    for line in DOC.read_text().splitlines():
        match = re.match(r"^\| ([WGAPMSUHR]\d+) ", line)
        if match:
            assert match.group(1) not in rows, f"two rows for {match.group(1)}"
            rows[match.group(1)] = line
    return rows


def _tests(row: str) -> list[tuple[str, str]]:
    """(file, test) for each `file.py::test` or `::test` (same file as before)."""
    found = []
    current = ""
    for reference in re.findall(r"`((?:test_\w+\.py)?::test_\w+)`", row):
        file, _, name = reference.partition("::")
        current = file or current
        found.append((current, name))
    return found


def test_every_checklist_item_has_a_row_with_tests() -> None:
    rows = _rows()
    assert sorted(rows) == sorted(ITEMS)
    for item, row in rows.items():
        assert _tests(row), f"{item} names no test"
    assert f"**{len(ITEMS)} of {len(ITEMS)} items covered by tests**" in DOC.read_text()


def _test_files() -> dict[str, Path]:
    """Test files by basename: tests/ mirrors the package in subdirectories,
    but the doc rows name files by basename alone, so basenames stay unique."""
    files: dict[str, Path] = {}
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        assert path.name not in files, f"two test files named {path.name}"
        files[path.name] = path
    return files


def test_every_named_test_exists() -> None:
    files = _test_files()
    missing = []
    for item, row in _rows().items():
        for file, name in _tests(row):
            path = files.get(file, ROOT / "tests" / file)
            if not path.is_file() or not re.search(rf"^def {name}\(", path.read_text(), re.M):
                missing.append(f"{item}: {file}::{name}")
    assert missing == []
