"""`/ui/admin/audit` (gitreg/audit/pages.py) with the real test identity
provider: an admin sees every row, with the web sign-ins and the tokens
people made among them; anyone else gets the not-found page."""

from __future__ import annotations

from collections.abc import Callable

from gitreg.audit.store import AuditQuery
from tests.ui.conftest import ALICE_READS_PLATFORM, BOB_ADMIN, SignInSite
from tests.ui.conftest import idp as idp  # the fixtures, for this module
from tests.ui.conftest import make_site as make_site

Make = Callable[[str], SignInSite]


def test_an_admin_reads_the_log_and_nobody_else_finds_it(make_site: Make) -> None:
    site = make_site(ALICE_READS_PLATFORM + BOB_ADMIN)
    alice, bob, anonymous = site.browser(), site.browser(), site.browser()
    site.sign_in(alice, "alice")
    site.sign_in(bob, "bob")
    made = alice.post(
        "/ui/tokens",
        data={
            "csrf": site.csrf(alice),
            "name": "ci",
            "expires_days": "30",
            "scope:platform": "read",
        },
    )
    assert made.status_code == 201
    (row,) = site.svc.audit.entries(AuditQuery(action="token.create"))
    assert (row.actor_kind, row.actor, row.detail) == (
        "person",
        "alice@example.com",
        "read on platform",
    )
    assert alice.get("/ui/admin/audit").status_code == 404
    assert anonymous.get("/ui/admin/audit").status_code == 404
    page = bob.get("/ui/admin/audit")
    assert page.status_code == 200
    assert page.headers["cache-control"] == "private, no-store"
    assert "<code>sign_in.web</code>" in page.text
    assert "person alice@example.com" in page.text
    assert "<code>token.create</code>" in page.text
    assert "read on platform" in page.text
    only = bob.get("/ui/admin/audit", params={"action": "token.*"})
    assert "<code>sign_in.web</code>" not in only.text
    assert bob.get("/ui/admin/audit", params={"since": "yesterday"}).status_code == 400
