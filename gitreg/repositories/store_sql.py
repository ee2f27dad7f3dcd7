"""SQL that registers, changes and removes repositories (gitreg/repositories/service.py).

Each public method is ONE transaction: a registration writes the repository
and the module or provider it feeds together, so a refused link (an address
already taken) leaves no repository behind. Kept apart from index.py so the
per-table helpers there stay small.
"""

from __future__ import annotations

from gitreg.errors import Conflict
from gitreg.repositories.store import ModuleGlobLink, ModuleLink, ProviderLink, RepoRow
from gitreg.storage.database import Connection
from gitreg.storage.index import IndexBackedStore, link_module, utcnow


def _upsert_repo(conn: Connection, repo: RepoRow) -> int:
    """Get or create by URL. Re-adding a URL removed with --keep-versions
    registers that repository again (its kept modules sync again)."""
    conn.execute(
        "INSERT INTO repos (url, forge_repo, webhook_secret, created_at) VALUES (?, ?, ?, ?)"
        " ON CONFLICT(url) DO UPDATE SET removed_at = NULL",
        (repo.url, repo.forge_repo, repo.webhook_secret, utcnow()),
    )
    if repo.webhook_secret:
        conn.execute(
            "UPDATE repos SET webhook_secret = ? WHERE url = ?", (repo.webhook_secret, repo.url)
        )
    return int(conn.execute("SELECT id FROM repos WHERE url = ?", (repo.url,)).fetchone()[0])


def _link_module(conn: Connection, repo_id: int, m: ModuleLink) -> None:
    link_module(conn, repo_id, m.namespace, m.name, m.system, m.subdir, m.tag_prefix)


def _link_glob(conn: Connection, repo_id: int, g: ModuleGlobLink) -> None:
    """Idempotent for the same pattern and options; other options are a Conflict
    (the modules already registered from it keep theirs)."""
    row = conn.execute(
        "SELECT namespace, system, tag_pattern, archive_scope FROM module_globs"
        " WHERE repo_id = ? AND pattern = ?",
        (repo_id, g.pattern),
    ).fetchone()
    if row is None:
        conn.execute(
            "INSERT INTO module_globs (repo_id, pattern, namespace, system, tag_pattern,"
            " archive_scope, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (repo_id, g.pattern, g.namespace, g.system, g.tag_pattern, g.archive_scope, utcnow()),
        )
    elif tuple(row) != (g.namespace, g.system, g.tag_pattern, g.archive_scope):
        raise Conflict(
            f"modules {g.pattern!r} of this repository are already registered"
            " with another namespace, system, tag pattern or archive scope"
        )


def _link_provider(conn: Connection, repo_id: int, p: ProviderLink) -> None:
    key = f"{p.namespace}/{p.type}".lower()
    row = conn.execute("SELECT repo_id FROM providers WHERE address_key = ?", (key,)).fetchone()
    if row is None:
        conn.execute(
            "INSERT INTO providers (namespace, type, address_key, repo_id, forge,"
            " sign_releases, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (p.namespace, p.type, key, repo_id, p.forge, int(p.sign_releases), utcnow()),
        )
        return
    if row["repo_id"] not in (None, repo_id):
        raise Conflict(f"provider {key} is already registered with another repository")
    conn.execute(
        "UPDATE providers SET repo_id = ?, forge = ?, sign_releases = ? WHERE address_key = ?",
        (repo_id, p.forge, int(p.sign_releases), key),
    )


class RegistrationStore(IndexBackedStore):
    def register(self, repo: RepoRow, link: ModuleLink | ProviderLink | ModuleGlobLink) -> int:
        """Repository and module, module glob or provider in one transaction; the
        repository id."""
        with self._write() as conn:
            repo_id = _upsert_repo(conn, repo)
            if isinstance(link, ModuleLink):
                _link_module(conn, repo_id, link)
            elif isinstance(link, ModuleGlobLink):
                _link_glob(conn, repo_id, link)
            else:
                _link_provider(conn, repo_id, link)
        return repo_id

    def change(
        self, repo_id: int, url: str | None, module_id: int | None, subdir: str, tag_prefix: str
    ) -> None:
        """`repo set`: a new remote and/or a module's subdir and tag prefix, together.
        Published versions are not touched (they are immutable)."""
        with self._write() as conn:
            if url is not None:
                taken = conn.execute(
                    "SELECT id FROM repos WHERE url = ? AND id != ?", (url, repo_id)
                ).fetchone()
                if taken is not None:
                    raise Conflict(f"another registered repository already uses {url}")
                conn.execute("UPDATE repos SET url = ? WHERE id = ?", (url, repo_id))
            if module_id is not None:
                conn.execute(
                    "UPDATE modules SET subdir = ?, tag_prefix = ? WHERE id = ?",
                    (subdir, tag_prefix, module_id),
                )

    def remove(self, repo_id: int, keep_versions: bool) -> bool:
        """Unregister a repository; True if its row is gone, False if it stays as
        `removed` because modules with published versions still reference it.
        The version check runs inside the transaction, so a sync publishing
        at the same moment cannot slip a version past it."""
        with self._write() as conn:
            published = _published_feeds(conn, repo_id)
            if published and not keep_versions:
                raise Conflict(
                    f"{', '.join(published)}; removing the repository would stop"
                    " serving them. Pass --keep-versions to unregister it and keep serving them"
                )
            _drop_jobs(conn, repo_id)
            kept = _drop_unpublished_feeds(conn, repo_id)
            if kept:
                conn.execute(
                    "UPDATE repos SET removed_at = ?, webhook_secret = '' WHERE id = ?",
                    (utcnow(), repo_id),
                )
            else:
                conn.execute("DELETE FROM module_globs WHERE repo_id = ?", (repo_id,))
                conn.execute("DELETE FROM repos WHERE id = ?", (repo_id,))
            return not kept


def _published_feeds(conn: Connection, repo_id: int) -> list[str]:
    rows = conn.execute(
        "SELECT m.namespace || '/' || m.name || '/' || m.system, count(*) FROM modules m"
        " JOIN module_versions v ON v.module_id = m.id WHERE m.repo_id = ? GROUP BY m.id"
        " UNION ALL SELECT 'provider ' || p.namespace || '/' || p.type, count(*)"
        " FROM providers p JOIN provider_versions v ON v.provider_id = p.id"
        " WHERE p.repo_id = ? GROUP BY p.id",
        (repo_id, repo_id),
    ).fetchall()
    return [f"{row[0]} has {row[1]} published version(s)" for row in rows]


def _drop_unpublished_feeds(conn: Connection, repo_id: int) -> bool:
    """Delete modules and providers without versions; providers with versions
    lose their repository (they keep serving, like uploaded ones). True if a
    module with versions remains, which keeps the repository row."""
    conn.execute(
        "DELETE FROM providers WHERE repo_id = ? AND NOT EXISTS"
        " (SELECT 1 FROM provider_versions v WHERE v.provider_id = providers.id)",
        (repo_id,),
    )
    conn.execute("UPDATE providers SET repo_id = NULL WHERE repo_id = ?", (repo_id,))
    conn.execute(
        "DELETE FROM module_conflicts WHERE module_id IN (SELECT id FROM modules m"
        " WHERE repo_id = ? AND NOT EXISTS (SELECT 1 FROM module_versions v"
        " WHERE v.module_id = m.id))",
        (repo_id,),
    )
    conn.execute(
        "DELETE FROM modules WHERE repo_id = ? AND NOT EXISTS"
        " (SELECT 1 FROM module_versions v WHERE v.module_id = modules.id)",
        (repo_id,),
    )
    return (
        conn.execute("SELECT 1 FROM modules WHERE repo_id = ?", (repo_id,)).fetchone() is not None
    )


def _drop_jobs(conn: Connection, repo_id: int) -> None:
    """Its pending jobs and their history go with the repository. A running
    job is waited for instead (its worker still has to record its end)."""
    running = conn.execute(
        "SELECT id FROM jobs WHERE repo_id = ? AND state = 'running'", (repo_id,)
    ).fetchone()
    if running is not None:
        raise Conflict(f"job {running[0]} is syncing this repository now; try again when it ends")
    conn.execute("DELETE FROM deliveries WHERE repo_id = ?", (repo_id,))
    conn.execute(
        "DELETE FROM deliveries WHERE job_id IN (SELECT id FROM jobs WHERE repo_id = ?)",
        (repo_id,),
    )
    conn.execute("DELETE FROM jobs WHERE repo_id = ?", (repo_id,))
