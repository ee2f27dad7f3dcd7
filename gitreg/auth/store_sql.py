"""SQL for API tokens and namespace visibility.

Tokens are stored only as sha256 hex of the secret: the secret is 32 random
bytes, so a fast hash is as good as a slow one and lets every request check
in one dictionary lookup. Writes share the index's database (`IndexBackedStore`).
"""

from __future__ import annotations

import json

from gitreg.auth.store import AccessSignature, Identity, TokenRecord
from gitreg.auth.store_sql_sessions import SessionStoreMixin
from gitreg.errors import NotFound
from gitreg.storage.database import Row
from gitreg.storage.index import IndexBackedStore, from_row, utcnow


class AuthStore(SessionStoreMixin, IndexBackedStore):
    def add_token(
        self,
        token_hash: str,
        prefix: str,
        scope: str,
        namespaces: list[str],
        description: str,
        expires_at: float | None,
    ) -> int:
        with self._write() as conn:
            cursor = conn.execute(
                "INSERT INTO api_tokens (token_hash, prefix, scope, namespaces, description,"
                " created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id",
                (
                    token_hash,
                    prefix,
                    scope,
                    json.dumps(namespaces),
                    description,
                    utcnow(),
                    expires_at,
                ),
            )
            return int(cursor.fetchone()[0])

    def tokens(self, include_revoked: bool = False) -> list[TokenRecord]:
        sql = "SELECT * FROM api_tokens"
        if not include_revoked:
            sql += " WHERE revoked_at IS NULL"
        return [_token(r) for r in self._rows(sql + " ORDER BY id")]

    def add_login_token(
        self,
        token_hash: str,
        prefix: str,
        grants: dict[str, str],
        who: Identity,
        description: str,
        expires_at: float,
    ) -> int:
        """A token from `terraform login`: scopes per namespace, and whose it is.
        `scope` holds the highest of them, so a check of scope alone (which
        runs before the namespace is known) never lets it do more."""
        highest = max(grants.values(), key=("read", "publish", "admin").index)
        with self._write() as conn:
            cursor = conn.execute(
                "INSERT INTO api_tokens (token_hash, prefix, scope, namespaces, description,"
                " created_at, expires_at, subject, email, groups, grants)"
                " VALUES (?, ?, ?, '[]', ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                (
                    token_hash,
                    prefix,
                    highest,
                    description,
                    utcnow(),
                    expires_at,
                    who.subject,
                    who.email,
                    json.dumps(list(who.groups)),
                    json.dumps(grants, sort_keys=True),
                ),
            )
            return int(cursor.fetchone()[0])

    def put_login_state(self, key: str, payload: str, expires_at: float, now: float) -> None:
        """Keep a sign-in step under a random key; expired steps are swept here,
        so the table holds only sign-ins in flight."""
        with self._write(notify=False) as conn:
            conn.execute("DELETE FROM login_states WHERE expires_at <= ?", (now,))
            conn.execute(
                "INSERT INTO login_states (key, payload, expires_at) VALUES (?, ?, ?)",
                (key, payload, expires_at),
            )

    def count_login_states(self, now: float, limit: int) -> int:
        """Unexpired sign-in steps, counted up to `limit` only: a range of the
        `login_states_expires_at` index, so the work is bounded by `limit`."""
        rows = self._rows(
            "SELECT COUNT(*) AS n FROM (SELECT 1 FROM login_states WHERE expires_at > ?"
            " LIMIT ?) AS unexpired",
            (now, limit),
        )
        return int(rows[0]["n"])

    def take_login_state(self, key: str, now: float) -> str | None:
        """The payload under `key`, deleted in the same statement so that of two
        concurrent takers (on any replica) only one gets it; None when unknown,
        already taken or expired."""
        with self._write(notify=False) as conn:
            row = conn.execute(
                "DELETE FROM login_states WHERE key = ? RETURNING payload, expires_at", (key,)
            ).fetchone()
        if row is None or float(row[1]) <= now:
            return None
        return str(row[0])

    def revoke(self, token_id: int) -> None:
        with self._write() as conn:
            cursor = conn.execute(
                "UPDATE api_tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL",
                (utcnow(), token_id),
            )
            if cursor.rowcount == 0:
                raise NotFound(f"no active token #{token_id}")

    def set_namespace_private(self, namespace: str, private: bool) -> None:
        with self._write() as conn:
            conn.execute(
                "INSERT INTO namespace_access (namespace_key, namespace, private) VALUES (?, ?, ?)"
                " ON CONFLICT(namespace_key) DO UPDATE SET private = excluded.private,"
                " namespace = excluded.namespace",
                (namespace.lower(), namespace, int(private)),
            )

    def namespace_visibility(self) -> dict[str, bool]:
        """Lower-cased namespace -> private, for namespaces set explicitly."""
        rows = self._rows("SELECT namespace_key, private FROM namespace_access")
        return {r["namespace_key"]: bool(r["private"]) for r in rows}

    def access_signature(self) -> AccessSignature:
        """One read transaction of a few index seeks and small counts."""
        # Portable SQL (SQLite and PostgreSQL): counts and the newest key of each
        # table; the two tables without an id use the newest of a column that
        # every insert sets. Namespace visibility is a handful of rows: read whole.
        # Versions and packages, which only grow, by their newest key alone: an
        # index seek, not a count of the whole table on every first request
        # after a publish (docs/performance.md).
        [row] = self._rows(
            "SELECT (SELECT count(*) || ':' || coalesce(max(id), 0) FROM api_tokens),"
            " (SELECT count(revoked_at) FROM api_tokens),"
            " (SELECT coalesce(max(id), 0) FROM module_versions),"
            " (SELECT count(*) || ':' || coalesce(max(fetched_at), 0) FROM mirror_packages),"
            " (SELECT coalesce(max(id), 0) FROM provider_versions),"
            " (SELECT coalesce(max(version_id), 0) FROM provider_packages),"
            " (SELECT count(*) FROM oci_module_zips)"
        )
        visibility = ";".join(
            f"{r[0]}={r[1]}"
            for r in self._rows(
                "SELECT namespace_key, private FROM namespace_access ORDER BY namespace_key"
            )
        )
        return AccessSignature(
            credentials=(str(row[0]), str(row[1]), visibility), blobs=tuple(map(str, row[2:]))
        )

    def module_archives(self) -> list[tuple[str, str]]:
        """(lower-cased namespace, archive sha256) of every module version, so the
        access policy can tell which blobs need a signed URL."""
        rows = self._rows(
            "SELECT DISTINCT lower(m.namespace), v.archive_sha256 FROM module_versions v"
            " JOIN modules m ON m.id = v.module_id"
        )
        return [(r[0], r[1]) for r in rows]


def _token(row: Row) -> TokenRecord:
    grants = row["grants"]
    return from_row(
        TokenRecord,
        row,
        namespaces=tuple(json.loads(row["namespaces"])),
        groups=tuple(json.loads(row["groups"])),
        grants=json.loads(grants) if grants is not None else None,
    )
