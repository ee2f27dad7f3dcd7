"""Sign-in returns to the page it started from; a 404 tells an anonymous
reader how private content is reached (the same words whether or not the
page exists); sign-out from any page; a new token has a Copy button."""

from __future__ import annotations

import re
from collections.abc import Callable

from tests.ui.conftest import ALICE_READS_PLATFORM, SESSION_COOKIE, SignInSite, Ui

Make = Callable[[str], SignInSite]


def test_a_404_page_hints_at_private_content_the_same_for_every_path(ui: Ui) -> None:
    private = ui.client.get("/modules/secret/vault/aws")
    missing = ui.client.get("/modules/secret/nothing/aws")
    assert private.status_code == missing.status_code == 404
    assert 'Looking for something in a private namespace? <a href="/ui/token">' in private.text
    assert private.text.replace("vault", "nothing") == missing.text


def test_sign_in_returns_to_the_page_and_sign_out_is_in_the_header(make_site: Make) -> None:
    site = make_site(ALICE_READS_PLATFORM)
    alice = site.browser()
    page = alice.get("/modules/platform/vpc/aws?tab=inputs")
    assert page.status_code == 404
    assert 'href="/ui/sign-in?next=/modules/platform/vpc/aws%3Ftab%3Dinputs"' in page.text
    form = alice.get("/ui/sign-in", params={"next": "/modules/platform/vpc/aws?tab=inputs"})
    assert 'name="next" value="/modules/platform/vpc/aws?tab=inputs"' in form.text
    assert alice.get("/ui/sign-out").status_code == 303  # no session: nothing to end
    site.sign_in(alice, "alice")
    home = alice.get("/")
    assert '<a href="/ui/sign-out">Sign out</a>' in home.text
    confirm = alice.get("/ui/sign-out")
    assert confirm.status_code == 200 and confirm.headers["cache-control"] == "no-store"
    csrf = re.search(r'name="csrf" value="([^"]+)"', confirm.text)
    assert csrf is not None
    done = alice.post("/ui/sign-out", data={"csrf": csrf.group(1)})
    assert done.status_code == 303
    assert SESSION_COOKIE not in alice.cookies
    assert "Sign out" not in alice.get("/").text


def test_a_new_token_has_a_copy_button(make_site: Make) -> None:
    site = make_site(ALICE_READS_PLATFORM)
    alice = site.browser()
    site.sign_in(alice, "alice")
    data = {"csrf": site.csrf(alice), "name": "ci", "expires_days": "30"}
    answer = alice.post("/ui/tokens", data=data | {"scope:platform": "read"})
    assert answer.status_code == 201
    assert 'data-copy="new-token"' in answer.text and 'id="new-token-live"' in answer.text
