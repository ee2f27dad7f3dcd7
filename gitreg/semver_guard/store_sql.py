"""All SQL of the semver guard (migrations `0030-semver-checks`, `0031-semver-policies`),
and its refusals' rows in the index's `module_conflicts` (recorded by the publisher)."""

from __future__ import annotations

from typing import Any, cast

from gitreg.semver_guard.store import Check, Policy
from gitreg.storage.database import Connection
from gitreg.storage.index import IndexBackedStore, utcnow


class SemverStore(IndexBackedStore):
    def put_check(self, check: Check) -> None:
        self.put_checks([check])

    def put_checks(self, checks: list[Check]) -> None:
        with self._write() as conn:
            for check in checks:
                _put(conn, check)

    def forget_refusals(self, module_id: int, version: str) -> None:
        with self._write() as conn:
            conn.execute(
                "DELETE FROM module_conflicts WHERE module_id = ? AND version = ?"
                " AND published_commit = ''",
                (module_id, version),
            )

    def check(self, module_id: int, version_key: str) -> Check | None:
        rows = self._rows(
            "SELECT * FROM semver_checks WHERE module_id = ? AND version_key = ?",
            (module_id, version_key),
        )
        return _check(rows[0]) if rows else None

    def checks(self, module_id: int) -> list[Check]:
        rows = self._rows("SELECT * FROM semver_checks WHERE module_id = ?", (module_id,))
        return [_check(r) for r in rows]

    def checked_keys(self) -> set[tuple[int, str]]:
        rows = self._tuples("SELECT module_id, version_key FROM semver_checks")
        return {(int(r[0]), str(r[1])) for r in rows}

    def allow(self, module_id: int, version_key: str, by: str) -> bool:
        with self._write() as conn:
            done = conn.execute(
                "UPDATE semver_checks SET allowed_by = ?, allowed_at = ?"
                " WHERE module_id = ? AND version_key = ? AND status = 'refused'",
                (by, utcnow(), module_id, version_key),
            )
            return bool(done.rowcount)

    def policy(self, repo_id: int) -> Policy | None:
        rows = self._tuples("SELECT policy FROM semver_policies WHERE repo_id = ?", (repo_id,))
        return cast(Policy, str(rows[0][0])) if rows else None

    def set_policy(self, repo_id: int, policy: Policy | None) -> None:
        with self._write() as conn:
            if policy is None:
                conn.execute("DELETE FROM semver_policies WHERE repo_id = ?", (repo_id,))
                return
            conn.execute(
                "INSERT INTO semver_policies (repo_id, policy) VALUES (?, ?)"
                " ON CONFLICT (repo_id) DO UPDATE SET policy = excluded.policy",
                (repo_id, policy),
            )


def _check(row: Any) -> Check:
    return Check(
        module_id=int(row["module_id"]),
        version_key=str(row["version_key"]),
        version=str(row["version"]),
        tag=str(row["tag"]),
        commit_sha=str(row["commit_sha"]),
        baseline=str(row["baseline"]),
        status=row["status"],
        exemption=str(row["exemption"]),
        breaking=int(row["breaking"]),
        changes=str(row["changes"]),
        allowed_by=str(row["allowed_by"]),
        allowed_at=row["allowed_at"],
        checked_at=str(row["checked_at"]),
    )


def _put(conn: Connection, check: Check) -> None:
    conn.execute(
        "INSERT INTO semver_checks (module_id, version_key, version, tag, commit_sha,"
        " baseline, status, exemption, breaking, changes, allowed_by, allowed_at,"
        " checked_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
        " ON CONFLICT (module_id, version_key) DO UPDATE SET version = excluded.version,"
        " tag = excluded.tag, commit_sha = excluded.commit_sha,"
        " baseline = excluded.baseline, status = excluded.status,"
        " exemption = excluded.exemption, breaking = excluded.breaking,"
        " changes = excluded.changes, checked_at = excluded.checked_at,"
        # An allowance is for the commit that was refused, not the tag.
        " allowed_by = CASE WHEN semver_checks.commit_sha = excluded.commit_sha"
        " THEN semver_checks.allowed_by ELSE '' END,"
        " allowed_at = CASE WHEN semver_checks.commit_sha = excluded.commit_sha"
        " THEN semver_checks.allowed_at ELSE NULL END",
        (
            check.module_id,
            check.version_key,
            check.version,
            check.tag,
            check.commit_sha,
            check.baseline,
            check.status,
            check.exemption,
            check.breaking,
            check.changes,
            check.allowed_by,
            check.allowed_at,
            check.checked_at or utcnow(),
        ),
    )
