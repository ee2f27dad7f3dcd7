"""Migration 0022 on PostgreSQL: search reads the narrow module_search_words,
which a trigger keeps in step with module_search, whoever writes it (for the
search target, p99 under 20 ms over 10,000 modules; gitreg/storage/schema_search.py)."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from gitreg.catalog.store import SearchEntry
from gitreg.catalog.store_sql import CatalogStore
from gitreg.storage import migrations
from gitreg.storage.index import Index, open_index
from gitreg.storage.migrations import statements
from tests.support.postgres import Database

ROWS = [
    ("acme", "vpc", "aws", "Network for the platform", "name cidr"),
    ("acme", "network", "aws", "A VPC and subnets", "vpc_cidr subnet_ids"),
    ("infra", "vpc-endpoints", "aws", "Endpoints for a vpc", "vpc_id"),
]


def _fill(index: Index) -> dict[str, int]:
    catalog, ids = CatalogStore(index), {}
    for ns, name, system, description, body in ROWS:
        repo = index.add_repo(f"https://git.example.com/{ns}/{name}.git", "")
        ids[name] = module_id = index.add_module(repo.id, ns, name, system, "", "").id
        catalog.put_search(SearchEntry(module_id, ns, name, system, description, body))
    return ids


def test_a_dollar_quoted_function_body_is_one_statement() -> None:
    ddl = "CREATE TABLE a (x TEXT); CREATE FUNCTION f() AS $$ BEGIN x; y; END $$; DROP TABLE b;"
    assert statements(ddl) == [
        "CREATE TABLE a (x TEXT)",
        "CREATE FUNCTION f() AS $$ BEGIN x; y; END $$",
        "DROP TABLE b",
    ]


def test_the_upgrade_fills_the_words_of_existing_search_rows(
    postgres_database: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    every = migrations.MIGRATIONS["postgresql"]
    before_0022 = [m for m in every if not m[0].startswith("0022-")]
    monkeypatch.setitem(migrations.MIGRATIONS, "postgresql", before_0022)
    old = open_index(postgres_database.url, tmp_path / "unused.sqlite3")
    ids = _fill(old)
    old.close()
    monkeypatch.setitem(migrations.MIGRATIONS, "postgresql", every)
    index = open_index(postgres_database.url, tmp_path / "unused.sqlite3")
    try:
        found = CatalogStore(index).search("vpc", 10)
        assert found[0] == (ids["vpc"], "acme")
        assert {m for m, _ in found} == set(ids.values())
    finally:
        index.close()


def test_rows_written_by_a_replica_on_the_previous_schema_are_found(
    postgres_database: Database, tmp_path: Path
) -> None:
    """During a rolling upgrade (docs/scale-out.md) an older replica writes
    module_search only: the trigger keeps the words in step."""
    index = open_index(postgres_database.url, tmp_path / "unused.sqlite3")
    try:
        ids = _fill(index)
        catalog = CatalogStore(index)
        with psycopg.connect(postgres_database.url) as conn:
            conn.execute("DELETE FROM module_search WHERE module_id = %s", (ids["network"],))
            conn.execute(
                "INSERT INTO module_search (module_id, namespace, name, system, description,"
                " body) VALUES (%s, 'acme', 'network', 'aws', 'Peering', 'peer_ids')",
                (ids["network"],),
            )
            conn.execute(
                "UPDATE module_search SET body = 'zone_name' WHERE module_id = %s", (ids["vpc"],)
            )
        assert catalog.search("peering", 10) == [(ids["network"], "acme")]
        assert catalog.search("subnet", 10) == []
        assert catalog.search("zone", 10) == [(ids["vpc"], "acme")]
        with psycopg.connect(postgres_database.url) as conn:
            conn.execute("DELETE FROM module_search WHERE module_id = %s", (ids["vpc"],))
        assert catalog.search("zone", 10) == []
    finally:
        index.close()


def test_both_engines_have_the_same_migrations_in_the_same_order() -> None:
    sqlite = [name for name, _ in migrations.MIGRATIONS["sqlite"]]
    assert sqlite == [name for name, _ in migrations.MIGRATIONS["postgresql"]]
    assert sqlite == sorted(sqlite)
    assert len(sqlite) >= 17


def test_a_comment_only_migration_has_no_statements() -> None:
    assert statements("-- nothing for this engine\n") == []


def test_comment_lines_are_dropped_before_the_cut() -> None:
    assert statements("-- a note; with a semicolon\nALTER TABLE a ADD COLUMN b TEXT;\n") == [
        "ALTER TABLE a ADD COLUMN b TEXT"
    ]
