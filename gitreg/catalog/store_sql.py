"""All SQL of module documentation and search (migration `0014-module-docs`).

A version's document is written once and never replaced, like its archive:
a second `put_docs` for the same version keeps the first. The
search row of a module holds its latest documented version's words and is
replaced when a newer version is documented. SQLite searches with FTS5
(bm25), PostgreSQL with tsvectors under GIN indexes (ts_rank), read from
the narrow module_search_words that a trigger fills (migration 0022); both
rank by namespace, name, system and description (migration 0016) and put an
exact module-name match first.
"""

from __future__ import annotations

import json
import re
from typing import Any

from gitreg.catalog.store import MissingDocs, SearchEntry
from gitreg.storage.database import Connection
from gitreg.storage.index import IndexBackedStore, utcnow

# Letters and digits only, as both engines' tokenisers split words ("zone_name"
# is "zone" and "name"), so each query word is one token matched as a prefix.
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
# (module_id, namespace) rows as the engines return them: an int and a str.
Hits = list[tuple[Any, ...]]


# Which modules match: every word in any column (module_search_fts, no
# ranking: cheap even when all 10,000 rows match). Their order, in tiers:
# modules whose namespace, name, system and description hold every word, by
# bm25 over those short columns (module_search_head, weights set in
# migration 0016); then those holding some of the words there, by the same
# bm25 (ties by id); then matches found only in README text and input/output
# names, by id. Ranking the long body of every match would be most of a
# search's cost (docs/performance.md, "Documentation and search"). When the
# first tier fills the list nothing else is asked.
# Namespaces the reader may not see are left out inside the queries, before
# the LIMIT: dropped afterwards, 1,000 private matches ranking first would
# leave an anonymous reader none of the public ones (the `hidden` argument).
# SQLite names them as a JSON array (no array parameters), through the index
# of migration 0022; PostgreSQL's module_search_words holds the namespace.
_SQLITE_HIDE = (
    " AND rowid NOT IN (SELECT module_id FROM module_search"
    " WHERE lower(namespace) IN (SELECT value FROM json_each(?)))"
)
_POSTGRES_HIDE = " AND NOT lower(namespace) = ANY(?)"
_POSTGRES_HEAD = (
    "SELECT module_id, namespace FROM module_search_words"
    " WHERE head_terms @@ to_tsquery('simple', ?){hide}"
    " ORDER BY ts_rank(head_terms, to_tsquery('simple', ?)) DESC, module_id LIMIT ?"
)
_POSTGRES_REST = (
    "SELECT module_id, namespace FROM module_search_words"
    " WHERE words @@ to_tsquery('simple', ?) AND NOT head_terms @@ to_tsquery('simple', ?)"
    "{hide} ORDER BY ts_rank(head_terms, to_tsquery('simple', ?)) DESC, module_id LIMIT ?"
)
# The namespace is read from module_search_head's own short row, not by a
# join to the wide module_search (a README per row: a page read per match).
_SQLITE_HEAD = (
    "SELECT rowid, namespace FROM module_search_head"
    " WHERE module_search_head MATCH ?{hide} ORDER BY rank LIMIT ?"
)
# The second tier, when the first did not fill the list (it then holds every
# visible module with all words in the head, left out here). bm25 runs only
# for the rows that pass the WHERE clause (FTS5 computes `rank` when read), and
# only the rows kept get their namespace read. `+rowid` keeps FTS5 from
# taking `rowid IN` as a lookup key: it would run the MATCH once per member
# (docs/performance.md, "Search: fewer rows ranked").
_SQLITE_RANKED = """
SELECT r.id, h.namespace FROM (
    SELECT rowid AS id, rank AS score FROM module_search_head
    WHERE module_search_head MATCH ?
    AND +rowid NOT IN (SELECT rowid FROM module_search_head WHERE module_search_head MATCH ?)
    AND +rowid IN (SELECT rowid FROM module_search_fts WHERE module_search_fts MATCH ?){hide}
    ORDER BY rank, rowid LIMIT ?
) r JOIN module_search_head h ON h.rowid = r.id ORDER BY r.score, r.id
"""
# The third: matches with none of the words in the head, by id (FTS5's own
# order, so the LIMIT stops the scan).
_SQLITE_BODY = """
SELECT rowid, namespace FROM module_search_fts WHERE module_search_fts MATCH ?
AND +rowid NOT IN (SELECT rowid FROM module_search_head WHERE module_search_head MATCH ?){hide}
ORDER BY rowid LIMIT ?
"""


# One statement per document (it was a SELECT, a DELETE and an INSERT): a new
# version's document is inserted; an older format's row is replaced; a row of
# this format or newer is kept (immutable), and then no row counts as changed.
_PUT_DOC = (
    "INSERT INTO module_docs (module_id, version_key, format, document, created_at)"
    " VALUES (?, ?, ?, ?, ?) ON CONFLICT (module_id, version_key) DO UPDATE SET"
    " format = excluded.format, document = excluded.document,"
    " created_at = excluded.created_at WHERE module_docs.format < excluded.format"
)


class CatalogStore(IndexBackedStore):
    def put_docs(self, module_id: int, version_key: str, fmt: int, document: str) -> bool:
        """Store a version's document; False when one of this format is already
        stored (immutable). An older format is replaced, which is how
        `gitreg reindex` upgrades documents after their shape changes."""
        return self.put_docs_many([(module_id, version_key, fmt, document)]) == 1

    def put_docs_many(self, documents: list[tuple[int, str, int, str]]) -> int:
        """`put_docs` for (module_id, version_key, format, document) items, in
        one transaction (one fsync for a repository's 40 new tags); returns
        how many were stored."""
        return self.put_docs_and_search(documents, None, "")[0]

    def put_docs_and_search(
        self, documents: list[tuple[int, str, int, str]], search: SearchEntry | None, key: str
    ) -> tuple[int, bool]:
        """`put_docs_many`, and in the same transaction (one commit, one fsync
        per sync instead of two) the module's search row replaced by `search`,
        but only if the document of version `key` is one this call stored: the
        row is then made from the document as stored. Returns how many were
        stored and whether the row was replaced."""
        with self._write() as conn:
            stored = self._store_docs(conn, documents)
            replaced = search is not None and (search.module_id, key) in stored
            if replaced and search is not None:
                self._replace_search(conn, search)
        return len(stored), replaced

    def _store_docs(
        self, conn: Connection, documents: list[tuple[int, str, int, str]]
    ) -> set[tuple[int, str]]:
        stored: set[tuple[int, str]] = set()
        for module_id, version_key, fmt, document in documents:
            row = (module_id, version_key, fmt, document, utcnow())
            if conn.execute(_PUT_DOC, row).rowcount:
                stored.add((module_id, version_key))
        return stored

    def docs(self, module_id: int, version_key: str) -> str | None:
        rows = self._rows(
            "SELECT document FROM module_docs WHERE module_id = ? AND version_key = ?",
            (module_id, version_key),
        )
        return str(rows[0][0]) if rows else None

    def missing_docs(self, fmt: int, after_version_id: int, limit: int) -> list[MissingDocs]:
        """Versions (by id, ascending, after `after_version_id`) with no document
        of format `fmt`: the next batch for a resumable back-fill."""
        rows = self._rows(
            "SELECT v.id, v.module_id, v.version_key FROM module_versions v"
            " LEFT JOIN module_docs d ON d.module_id = v.module_id"
            " AND d.version_key = v.version_key AND d.format >= ?"
            " WHERE v.id > ? AND d.module_id IS NULL ORDER BY v.id LIMIT ?",
            (fmt, after_version_id, limit),
        )
        return [MissingDocs(int(r[0]), int(r[1]), str(r[2])) for r in rows]

    def put_search(self, entry: SearchEntry) -> None:
        """Replace a module's search row."""
        with self._write() as conn:
            self._replace_search(conn, entry)

    def _replace_search(self, conn: Connection, entry: SearchEntry) -> None:
        values = (
            entry.module_id,
            entry.namespace,
            entry.name,
            entry.system,
            entry.description,
            entry.body,
        )
        conn.execute("DELETE FROM module_search WHERE module_id = ?", (entry.module_id,))
        conn.execute(
            "INSERT INTO module_search (module_id, namespace, name, system, description,"
            " body, version_key) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (*values, entry.version_key),
        )
        if self._dialect == "sqlite":
            conn.execute("DELETE FROM module_search_fts WHERE rowid = ?", (entry.module_id,))
            conn.execute(
                "INSERT INTO module_search_fts (rowid, namespace, name, system, description,"
                " body) VALUES (?, ?, ?, ?, ?, ?)",
                values,
            )
            conn.execute("DELETE FROM module_search_head WHERE rowid = ?", (entry.module_id,))
            conn.execute(
                "INSERT INTO module_search_head (rowid, namespace, name, system, description)"
                " VALUES (?, ?, ?, ?, ?)",
                values[:5],
            )

    def _sqlite_search(self, words: list[str], limit: int, hidden: list[str]) -> Hits:
        # Each word quoted (no FTS5 syntax from users) and matched as a prefix.
        quoted = ['"' + w.replace('"', "") + '"*' for w in words]
        every, some = " ".join(quoted), " OR ".join(quoted)
        hide, also = ("", ()) if not hidden else (_SQLITE_HIDE, (json.dumps(hidden),))
        first = self._tuples(_SQLITE_HEAD.replace("{hide}", hide), (every, *also, limit))
        if len(first) >= limit:  # a common word: the head alone fills the list
            return first
        need = limit - len(first)
        ranked = self._tuples(
            _SQLITE_RANKED.replace("{hide}", hide), (some, every, every, *also, need)
        )
        if len(ranked) >= need:
            return first + ranked
        body = self._tuples(
            _SQLITE_BODY.replace("{hide}", hide), (every, some, *also, need - len(ranked))
        )
        return first + ranked + body

    def _postgres_search(self, words: list[str], limit: int, hidden: list[str]) -> Hits:
        # The same tiers as on SQLite, over the narrow module_search_words
        # (migration 0022) rather than the wide module_search. When the first
        # tier does not fill the list, it holds every module with all words in
        # the head, so the rest is the other matches: ranked by the head's
        # share of the words (0 for README-only matches, which then go by id).
        every = " & ".join(w + ":*" for w in words)
        some = " | ".join(w + ":*" for w in words)
        hide, also = ("", ()) if not hidden else (_POSTGRES_HIDE, (hidden,))
        head, rest_sql = (q.replace("{hide}", hide) for q in (_POSTGRES_HEAD, _POSTGRES_REST))
        first = self._tuples(head, (every, *also, every, limit))
        if len(first) >= limit:
            return first
        rest = self._tuples(rest_sql, (every, every, *also, some, limit - len(first)))
        return first + rest

    def searchable_modules(self) -> set[int]:
        """Ids of modules that have a search row."""
        return set(self.search_version_keys())

    def search_version_keys(self) -> dict[int, str]:
        """The key of the version each module's search row was made from, by
        module id: "" for a row stored before rows recorded it (migration
        0023), or by a replica still on the previous schema."""
        rows = self._rows("SELECT module_id, version_key FROM module_search")
        return {int(r[0]): str(r[1] or "") for r in rows}

    def search(
        self, query: str, limit: int, hidden: frozenset[str] = frozenset()
    ) -> list[tuple[int, str]]:
        """(module_id, namespace) of the best matches, best first: an exact
        name match, then relevance. Every word must match (a prefix of it).
        Modules of the `hidden` namespaces (lowercase: those the reader may
        not see) are left out before the `limit` best are chosen."""
        words = [w.lower() for w in _WORD.findall(query)][:16]
        if not words:
            return []
        exact: Hits = self._tuples(
            "SELECT module_id, namespace FROM module_search WHERE lower(name) = ?"
            " ORDER BY module_id",
            (query.strip().lower(),),
        )
        hide = sorted(hidden)
        if self._dialect == "sqlite":
            rows = self._sqlite_search(words, limit, hide)
        else:
            rows = self._postgres_search(words, limit, hide)
        # An exact name match ranks first, whatever its relevance.
        # The rows' own tuples are returned, not copies (see Database.tuples).
        first = [r for r in exact if r[1].lower() not in hidden]
        if not first:
            return rows[:limit]
        seen = {m for m, _ in first}
        return (first + [r for r in rows if r[0] not in seen])[:limit]
