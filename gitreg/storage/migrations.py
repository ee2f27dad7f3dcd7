"""The schema, as one ordered list of `.sql` files per engine.

`schema/sqlite/` and `schema/postgresql/` hold the same migrations under the same
names, each in its engine's own words; the names sort in the order they run. Each
runs once, in its own transaction (the `migrations` table records the names
applied), so an interrupted upgrade is retried whole. New ones go at the end, in
both folders; a name is never reused. A database that has migrations this gitreg
does not know was upgraded by a newer gitreg: this one refuses to start rather
than write rows in a shape it does not understand.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from gitreg.errors import ConfigError
from gitreg.storage.database import Dialect

SCHEMA = Path(__file__).with_name("schema")


def _read(dialect: Dialect) -> list[tuple[str, str]]:
    return [
        (path.stem, path.read_text("utf-8")) for path in sorted((SCHEMA / dialect).glob("*.sql"))
    ]


MIGRATIONS: dict[Dialect, list[tuple[str, str]]] = {
    "sqlite": _read("sqlite"),
    "postgresql": _read("postgresql"),
}


def names() -> list[str]:
    """Every migration this gitreg knows, in the order they run."""
    return [name for name, _ in MIGRATIONS["sqlite"]]


def statements(sql: str) -> list[str]:
    """`sql` without its comment lines, cut at each `;` outside dollar quotes
    (a PL/pgSQL function's body, `AS $$ ... $$`, is one statement with its own
    semicolons inside)."""
    code = "".join(
        line for line in sql.splitlines(keepends=True) if not line.lstrip().startswith("--")
    )
    found, current = [], ""
    for number, part in enumerate(code.split("$$")):
        if number % 2:  # inside $$ ... $$
            current += "$$" + part + "$$"
            continue
        first, *rest = part.split(";")
        current += first
        for piece in rest:
            found.append(current)
            current = piece
    found.append(current)
    return [statement.strip() for statement in found if statement.strip()]


def check_known(applied: set[str], where: str) -> None:
    unknown = sorted(applied - set(names()))
    if unknown:
        raise ConfigError(
            f"the index at {where} has a newer schema than this gitreg understands"
            f" (migrations {', '.join(unknown)}): upgrade gitreg on this machine"
            " to the version the other replicas run"
        )


def pending(applied: set[str], dialect: Dialect) -> Iterator[tuple[str, list[str]]]:
    for name, sql in MIGRATIONS[dialect]:
        if name not in applied:
            yield name, statements(sql)
