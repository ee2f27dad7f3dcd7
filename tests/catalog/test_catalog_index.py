"""Contract: module documentation and search (CatalogIndex), on
SQLite (FTS5) and PostgreSQL (tsvector + GIN)."""

from __future__ import annotations

from typing import cast

import pytest

from gitreg.catalog.store import CatalogIndex, SearchEntry
from gitreg.catalog.store_sql import CatalogStore
from gitreg.storage.index import Index
from gitreg.storage.records import NewVersion
from tests.support.backends import Backend


def catalog_of(backend: Backend) -> CatalogIndex:
    return CatalogStore(cast(Index, backend.index))


def add_module(backend: Backend, ns: str, name: str, system: str) -> int:
    repo = backend.index.add_repo(f"https://git.example.com/{ns}/{name}-{system}.git", "")
    return backend.index.add_module(repo.id, ns, name, system, "", "").id


def publish(backend: Backend, module_id: int, version: str) -> None:
    backend.index.publish_version(
        NewVersion(module_id, version, version, f"v{version}", "t", "c", "tr", "a" * 64, 1, 0)
    )


def test_a_document_is_stored_once_and_upgraded_only_by_a_newer_format(
    implementation: Backend,
) -> None:
    catalog = catalog_of(implementation)
    module_id = add_module(implementation, "acme", "vpc", "aws")
    assert catalog.docs(module_id, "1.0.0") is None
    assert catalog.put_docs(module_id, "1.0.0", 1, '{"a": 1}')
    assert not catalog.put_docs(module_id, "1.0.0", 1, '{"a": 2}')
    assert catalog.docs(module_id, "1.0.0") == '{"a": 1}'
    assert catalog.put_docs(module_id, "1.0.0", 2, '{"a": 3}')
    assert catalog.docs(module_id, "1.0.0") == '{"a": 3}'
    assert not catalog.put_docs(module_id, "1.0.0", 1, '{"a": 4}')  # never an older format
    assert catalog.docs(module_id, "1.0.0") == '{"a": 3}'


def test_many_documents_in_one_transaction_keep_the_same_rules(implementation: Backend) -> None:
    catalog = catalog_of(implementation)
    module_id = add_module(implementation, "acme", "vpc", "aws")
    catalog.put_docs(module_id, "1.0.0", 1, '{"a": 1}')
    items = [(module_id, "1.0.0", 1, '{"a": 2}'), (module_id, "1.1.0", 1, '{"b": 1}')]
    assert catalog.put_docs_many(items) == 1
    assert catalog.docs(module_id, "1.0.0") == '{"a": 1}'
    assert catalog.docs(module_id, "1.1.0") == '{"b": 1}'
    assert catalog.put_docs_many([]) == 0


def test_documents_and_the_search_row_in_one_call(implementation: Backend) -> None:
    # The publisher's one commit per sync: the row is replaced only when the
    # document of `key` is one this call stored (the row is made from it).
    catalog = catalog_of(implementation)
    module_id = add_module(implementation, "acme", "vpc", "aws")
    entry = SearchEntry(module_id, "acme", "vpc", "aws", "first", "alpha")
    items = [(module_id, "1.0.0", 1, '{"a": 1}'), (module_id, "1.1.0", 1, '{"b": 1}')]
    assert catalog.put_docs_and_search(items, entry, "1.1.0") == (2, True)
    assert catalog.docs(module_id, "1.1.0") == '{"b": 1}'
    assert catalog.search("alpha", 10) == [(module_id, "acme")]
    # 1.1.0's document was stored before: kept, and the row is not replaced.
    later = SearchEntry(module_id, "acme", "vpc", "aws", "second", "beta")
    again = [(module_id, "1.1.0", 1, '{"b": 2}'), (module_id, "1.2.0", 1, "{}")]
    assert catalog.put_docs_and_search(again, later, "1.1.0") == (1, False)
    assert catalog.docs(module_id, "1.1.0") == '{"b": 1}'
    assert catalog.search("beta", 10) == []
    assert catalog.search("alpha", 10) == [(module_id, "acme")]
    # A key that is not among the documents, or no entry: documents only.
    assert catalog.put_docs_and_search([(module_id, "1.3.0", 1, "{}")], later, "9.0.0") == (
        1,
        False,
    )
    assert catalog.put_docs_and_search([(module_id, "1.4.0", 1, "{}")], None, "1.4.0") == (
        1,
        False,
    )
    assert catalog.search("beta", 10) == []
    assert catalog.put_docs_and_search([(module_id, "1.5.0", 1, "{}")], later, "1.5.0") == (
        1,
        True,
    )
    assert catalog.search("beta", 10) == [(module_id, "acme")]
    assert catalog.search("alpha", 10) == []


def test_missing_docs_pages_through_undocumented_versions(implementation: Backend) -> None:
    catalog = catalog_of(implementation)
    module_id = add_module(implementation, "acme", "vpc", "aws")
    for version in ("1.0.0", "1.1.0", "1.2.0"):
        publish(implementation, module_id, version)
    catalog.put_docs(module_id, "1.1.0", 1, "{}")
    first = catalog.missing_docs(1, 0, 1)
    assert [m.version_key for m in first] == ["1.0.0"]
    rest = catalog.missing_docs(1, first[-1].version_id, 10)
    assert [m.version_key for m in rest] == ["1.2.0"]
    assert [m.version_key for m in catalog.missing_docs(2, 0, 10)] == ["1.0.0", "1.1.0", "1.2.0"]


@pytest.fixture
def searchable(implementation: Backend) -> tuple[CatalogIndex, dict[str, int]]:
    catalog = catalog_of(implementation)
    ids: dict[str, int] = {}
    rows = [
        ("acme", "network", "aws", "A VPC and subnets", "vpc_cidr subnet_ids"),
        ("acme", "vpc", "aws", "Network for the platform", "name cidr"),
        ("infra", "vpc-endpoints", "aws", "Endpoints for a vpc", "vpc_id"),
        ("secret", "dns", "google", "Zones", "zone_name"),
    ]
    for ns, name, system, description, body in rows:
        ids[f"{ns}/{name}"] = module_id = add_module(implementation, ns, name, system)
        catalog.put_search(SearchEntry(module_id, ns, name, system, description, body))
    return catalog, ids


def test_search_puts_the_exact_name_first(
    searchable: tuple[CatalogIndex, dict[str, int]],
) -> None:
    catalog, ids = searchable
    found = catalog.search("vpc", 10)
    assert found[0] == (ids["acme/vpc"], "acme")
    assert {m for m, _ in found} == {
        ids["acme/vpc"],
        ids["acme/network"],
        ids["infra/vpc-endpoints"],
    }


def test_search_reads_readme_words_and_input_names_and_every_word_must_match(
    searchable: tuple[CatalogIndex, dict[str, int]],
) -> None:
    catalog, ids = searchable
    assert catalog.search("zone_name", 10) == [(ids["secret/dns"], "secret")]
    assert catalog.search("platform network", 10)[0][0] in (ids["acme/vpc"], ids["acme/network"])
    assert catalog.search("subnet google", 10) == []
    assert catalog.search('"; DROP TABLE x; --', 10) == []
    assert catalog.search("   ", 10) == []


def test_searchable_modules_are_those_with_a_row(
    searchable: tuple[CatalogIndex, dict[str, int]],
) -> None:
    catalog, ids = searchable
    assert catalog.searchable_modules() == set(ids.values())


def test_a_new_search_row_replaces_the_old(
    implementation: Backend, searchable: tuple[CatalogIndex, dict[str, int]]
) -> None:
    catalog, ids = searchable
    module_id = ids["secret/dns"]
    catalog.put_search(SearchEntry(module_id, "secret", "dns", "google", "Records", "record"))
    assert catalog.search("zone_name", 10) == []
    assert catalog.search("record", 10) == [(module_id, "secret")]


def test_search_ranks_in_tiers_of_where_the_words_are(implementation: Backend) -> None:
    """Migration 0016: every word in namespace/name/system/description first,
    then some of them there, then matches only in README text or input names,
    by id; the first tier alone answers when it fills the list."""
    catalog = catalog_of(implementation)
    rows = [
        ("body", "only", "Nothing here", "bucket storage"),  # README words only
        ("some", "bucket", "A module", "storage"),  # one word in the name
        ("every", "bucket-storage", "Storage", ""),  # both words in the head
        ("other", "thing", "Unrelated", "queue"),
    ]
    ids = []
    for ns, name, description, body in rows:
        module_id = add_module(implementation, ns, name, "aws")
        catalog.put_search(SearchEntry(module_id, ns, name, "aws", description, body))
        ids.append(module_id)
    assert [m for m, _ in catalog.search("bucket storage", 10)] == [ids[2], ids[1], ids[0]]
    assert [m for m, _ in catalog.search("storage", 1)] == [ids[2]]
    assert [m for m, _ in catalog.search("stor", 10)] == [ids[2], ids[0], ids[1]]


@pytest.mark.parametrize("private_matches", [3, 205])  # SQLite: the few- and many-rows queries
def test_search_leaves_out_hidden_namespaces_before_the_limit(
    implementation: Backend, private_matches: int
) -> None:
    """Private modules ranking first must not fill the list a reader who may
    not see them gets: they are left out before the limit, exact names too."""
    catalog = catalog_of(implementation)
    rows = [("Secret", f"bucket-{n}", "Bucket storage", "bucket") for n in range(private_matches)]
    rows += [("Secret", "bucket", "Bucket", ""), ("acme", "queue", "A queue", "bucket_name")]
    ids = []
    for ns, name, description, body in rows:
        module_id = add_module(implementation, ns, name, "aws")
        catalog.put_search(SearchEntry(module_id, ns, name, "aws", description, body))
        ids.append(module_id)
    public = (ids[-1], "acme")
    assert public not in catalog.search("bucket", 3)
    assert catalog.search("bucket", 3, frozenset({"secret"})) == [public]
    assert catalog.search("bucket", 3, frozenset({"other"}))[0] == (ids[-2], "Secret")
    assert catalog.search("buck name", 3, frozenset({"secret"})) == [public]
    assert catalog.search("bucket", 3, frozenset({"secret", "acme"})) == []


@pytest.mark.parametrize(("limit", "count"), [(10, 6), (5, 5), (3, 3), (2, 2)])
def test_the_second_tier_after_hidden_namespaces_keeps_its_order(
    implementation: Backend, limit: int, count: int
) -> None:
    """The first tier (every word in the head) does not fill the list once a
    hidden namespace's matches are left out; then come the modules with some
    of the words in the head, by relevance and then by id, leaving out those
    missing a word altogether, and then README-only matches by id."""
    catalog = catalog_of(implementation)
    hidden = [("secret", f"alpha-beta-{n}", "Alpha beta", "") for n in range(3)]  # first tier
    rows = [
        *hidden,
        ("acme", "alpha-beta", "", ""),  # first tier
        ("acme", "alpha-one", "", "beta"),  # alpha in the name
        ("acme", "alpha-two", "", ""),  # no beta anywhere: no match
        ("acme", "alpha-four", "", "beta"),  # the same relevance as alpha-one: by id
        ("acme", "epsilon", "alpha", "beta"),  # alpha in the description: less relevant
        ("acme", "gamma", "", "alpha beta"),  # README only
        ("acme", "delta", "", "beta alpha"),  # README only, a larger id
    ]
    ids = {}
    for ns, name, description, body in rows:
        module_id = add_module(implementation, ns, name, "aws")
        catalog.put_search(SearchEntry(module_id, ns, name, "aws", description, body))
        ids[name] = module_id
    order = ["alpha-beta", "alpha-one", "alpha-four", "epsilon", "gamma", "delta"]
    found = catalog.search("alpha beta", limit, frozenset({"secret"}))
    assert found == [(ids[name], "acme") for name in order[:count]]
    assert all(type(hit) is tuple for hit in found)  # plain rows (Database.tuples)
    everyone = [m for m, _ in catalog.search("alpha beta", 20)]
    assert set(everyone[:4]) == {ids[f"alpha-beta-{n}"] for n in range(3)} | {ids["alpha-beta"]}
    assert everyone[4:] == [ids[name] for name in order[1:]]
