"""Contract: the pull-through module cache (ModuleProxyIndex)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from gitreg.module_proxy.store import ProxiedMove, ProxiedVersion
from gitreg.storage.blob_refs import BLOB_COLUMNS, NOT_BLOB_COLUMNS
from gitreg.storage.index import SQLiteIndex
from tests.support.backends import Backend

KEY = "registry.terraform.io/terraform-aws-modules/vpc/aws"
VERSION = ProxiedVersion(
    module_key=KEY,
    version="5.1.0",
    host="registry.terraform.io",
    namespace="terraform-aws-modules",
    name="vpc",
    system="aws",
    location="git::https://github.com/terraform-aws-modules/terraform-aws-vpc?ref=v5.1.0",
    git_url="https://github.com/terraform-aws-modules/terraform-aws-vpc.git",
    ref="v5.1.0",
    subdir="",
    commit_sha="1" * 40,
    archive_sha256="a" * 64,
    archive_size=1234,
    fetched_at=1_700_000_000.5,
)


def test_a_version_list_round_trips(implementation: Backend) -> None:
    store = implementation.module_proxy
    assert store.index(KEY) is None
    store.save_index(KEY, ["5.0.0", "5.1.0"], 1.0)
    store.save_index(KEY, ["5.1.0", "5.2.0"], 2.0)
    cached = store.index(KEY)
    assert cached is not None
    assert cached.versions == ("5.1.0", "5.2.0") and cached.fetched_at == 2.0


def test_a_cached_version_never_changes(implementation: Backend) -> None:
    store = implementation.module_proxy
    assert store.add_version(VERSION) == VERSION
    assert store.add_version(replace(VERSION, archive_sha256="b" * 64)) == VERSION  # first wins
    assert store.version(KEY, "5.1.0") == VERSION
    assert store.version(KEY, "5.2.0") is None
    assert store.versions() == [VERSION] == store.versions(KEY)
    assert store.versions("registry.terraform.io/other/vpc/aws") == []
    assert store.blob_owners() == [("terraform-aws-modules", "a" * 64)]


def test_a_moved_tag_is_recorded_once_per_commit(implementation: Backend) -> None:
    store = implementation.module_proxy
    move = ProxiedMove(KEY, "5.1.0", "v5.1.0", "1" * 40, "2" * 40, 3.0)
    assert store.record_move(move)
    assert not store.record_move(replace(move, first_seen=4.0))
    assert store.record_move(replace(move, upstream_commit="3" * 40, first_seen=5.0))
    assert [m.upstream_commit for m in store.moves()] == ["2" * 40, "3" * 40]


def test_a_blob_is_referenced_while_any_row_names_it(implementation: Backend) -> None:
    store = implementation.module_proxy
    assert not store.blob_referenced("a" * 64)
    store.add_version(VERSION)
    assert store.blob_referenced("a" * 64)
    assert not store.blob_referenced("b" * 64)


def test_every_column_that_names_a_blob_is_known(tmp_path: Path) -> None:
    """gitreg/storage/blob_refs.py lists every `*sha256` column of the schema,
    so a blob named by a new feature is never taken for an unused one."""
    index = SQLiteIndex(tmp_path / "index.sqlite3")
    found = {
        (table, str(row[0]))
        for table in index.table_names()
        for row in index._rows("SELECT name FROM pragma_table_info(?)", (table,))
        if str(row[0]).endswith("sha256")
    }
    index.close()
    assert found == {*BLOB_COLUMNS, *NOT_BLOB_COLUMNS}
