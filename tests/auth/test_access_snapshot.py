"""The access snapshot's own cache: a publish that cannot change who
may read what keeps the snapshot; a token revoke, a visibility change or a
private publish replaces it at once (a private blob is never served publicly,
a revoked token never keeps working)."""

from __future__ import annotations

import asyncio

from gitreg.auth.service import AccessSnapshot
from gitreg.auth.store_sql import AuthStore
from gitreg.auth.tokens import new_token, token_hash
from gitreg.services import Services
from gitreg.storage.index import SQLiteIndex
from gitreg.storage.records import NewVersion


def snapshot(svc: Services) -> AccessSnapshot:
    return asyncio.run(svc.access.snapshot())


def publish(svc: Services, namespace: str, version: str) -> str:
    """Record a version as the publisher does, then invalidate as its `on_change` does."""
    repo = svc.index.add_repo(f"https://example.test/{namespace}", f"{namespace}/repo")
    module = svc.index.add_module(repo.id, namespace, "net", "aws", "", "")
    sha256 = f"{namespace}-{version}".encode().hex().ljust(64, "0")[:64]
    svc.index.publish_version(
        NewVersion(
            module_id=module.id,
            version=version,
            version_key=version,
            tag=f"v{version}",
            tag_sha="1" * 40,
            commit_sha="2" * 40,
            tree_sha=sha256[:40],
            archive_sha256=sha256,
            archive_size=1,
            archive_mtime=1,
        )
    )
    svc.cache.invalidate()
    return sha256


def add_token(svc: Services) -> tuple[int, str]:
    token = new_token()
    token_id = svc.auth.add_token(token_hash(token), token[:12], "read", ["acme"], "", None)
    return token_id, token_hash(token)


def test_a_public_publish_keeps_the_snapshot(svc: Services) -> None:
    publish(svc, "acme", "1.0.0")
    add_token(svc)
    before = snapshot(svc)
    assert svc.access.known_public("acme")
    publish(svc, "acme", "1.1.0")
    publish(svc, "other", "1.0.0")
    assert snapshot(svc) is before
    assert svc.access.known_public("acme")  # confirmed again, still a dict lookup


def test_an_invalidation_that_changes_no_access_rows_keeps_the_snapshot(svc: Services) -> None:
    svc.auth.set_namespace_private("acme", True)
    publish(svc, "acme", "1.0.0")
    before = snapshot(svc)
    svc.index.set_yanked(svc.index.modules()[0].id, "1.0.0", True)
    svc.cache.invalidate()
    assert snapshot(svc) is before


def test_a_revoked_token_stops_working_at_once(svc: Services) -> None:
    token_id, hashed = add_token(svc)
    before = snapshot(svc)
    assert hashed in before.tokens
    svc.auth.revoke(token_id)
    svc.cache.invalidate()
    after = snapshot(svc)
    assert after is not before
    assert hashed not in after.tokens


def test_a_visibility_change_replaces_the_snapshot(svc: Services) -> None:
    sha256 = publish(svc, "acme", "1.0.0")
    before = snapshot(svc)
    assert not before.is_private("acme")
    svc.auth.set_namespace_private("acme", True)
    svc.cache.invalidate()
    after = snapshot(svc)
    assert after.is_private("acme")
    assert after.private_blobs[sha256] == frozenset({"acme"})
    assert not svc.access.known_public("acme")


def test_a_private_publish_makes_its_blob_private_at_once(svc: Services) -> None:
    svc.auth.set_namespace_private("acme", True)
    publish(svc, "acme", "1.0.0")
    before = snapshot(svc)
    sha256 = publish(svc, "acme", "2.0.0")
    assert sha256 not in before.private_blobs
    assert snapshot(svc).private_blobs[sha256] == frozenset({"acme"})


def test_a_revoke_by_another_process_is_seen_through_data_version(svc: Services) -> None:
    """What the watcher does: another connection's commit moves data_version,
    the metadata cache is invalidated, and the signature shows the revoke."""
    token_id, hashed = add_token(svc)
    assert hashed in snapshot(svc).tokens
    seen = svc.index.data_version()
    other = SQLiteIndex(svc.settings.db_path)
    try:
        AuthStore(other).revoke(token_id)
    finally:
        other.close()
    assert svc.index.data_version() != seen
    svc.cache.invalidate()
    assert hashed not in snapshot(svc).tokens
