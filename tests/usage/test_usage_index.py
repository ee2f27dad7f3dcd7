"""Contract: who downloaded which version (`DownloadCountIndex.usage_rows`),
on SQLite and PostgreSQL: counts summed over the days of the
window and joined to each token's owner, revoked tokens included."""

from __future__ import annotations

from typing import cast

from gitreg.auth.store import Identity
from gitreg.storage.index import Index
from gitreg.usage.store import DownloadCountIndex, DownloadRow, UsageRow
from gitreg.usage.store_sql import DownloadCountStore
from tests.support.backends import Backend


def test_usage_rows_sum_the_window_and_name_each_tokens_owner(implementation: Backend) -> None:
    counts: DownloadCountIndex = DownloadCountStore(cast(Index, implementation.index))
    auth = implementation.auth
    who = Identity("sub-alice", "alice@example.com", ("platform-team", "sre"))
    alice = auth.add_login_token("a" * 64, "gitreg_alice", {"platform": "read"}, who, "login", 2e9)
    ci = auth.add_token("b" * 64, "gitreg_ci123", "read", [], "nightly CI", None)
    auth.revoke(ci)  # a revoked token's past downloads still name it
    counts.add_downloads(
        [
            DownloadRow("module", 1, "1.0.0", "2026-01-01", alice, 5),  # before the window
            DownloadRow("module", 1, "1.0.0", "2026-02-01", alice, 2),
            DownloadRow("module", 1, "1.0.0", "2026-02-03", alice, 1),
            DownloadRow("module", 1, "1.1.0", "2026-02-02", ci, 4),
            DownloadRow("module", 1, "1.1.0", "2026-02-02", 0, 3),
            DownloadRow("module", 1, "2.0.0", "2026-02-02", 999, 1),  # a token gone
            DownloadRow("module", 2, "1.0.0", "2026-02-02", alice, 9),  # another module
            DownloadRow("provider", 1, "1.0.0", "2026-02-02", alice, 9),
        ]
    )
    groups = ("platform-team", "sre")
    assert counts.usage_rows("module", 1, "2026-02-01") == [
        UsageRow("1.0.0", alice, 3, "gitreg_alice", "login", "sub-alice", who.email, groups),
        UsageRow("1.1.0", 0, 3),
        UsageRow("1.1.0", ci, 4, "gitreg_ci123", "nightly CI"),
        UsageRow("2.0.0", 999, 1),
    ]
    assert counts.usage_rows("module", 1, "2026-02-03") == [
        UsageRow("1.0.0", alice, 1, "gitreg_alice", "login", "sub-alice", who.email, groups)
    ]
    assert counts.usage_rows("module", 3, "2026-01-01") == []
