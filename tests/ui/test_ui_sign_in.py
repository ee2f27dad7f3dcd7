"""Web UI sign-in through the real identity provider: the session
cookie's flags, what the session shows, rotation at sign-in (session
fixation), the binding of a sign-in to its browser, expiry and sign-out."""

from __future__ import annotations

import time
from collections.abc import Callable
from types import SimpleNamespace
from urllib.parse import urlsplit

import pytest

from gitreg.auth.store import Identity
from gitreg.auth.tokens import token_hash
from gitreg.ui.csrf import CSRF_COOKIE
from tests.support.login_query import authorize_params
from tests.support.oidc_browser import browse
from tests.support.oidc_provider import count_fetches
from tests.ui.conftest import (
    ALICE_READS_PLATFORM,
    BASE,
    BOB_ADMIN,
    SESSION_COOKIE,
    SignInSite,
    Ui,
)

Make = Callable[[str], SignInSite]


def _set_cookies(answer: object) -> dict[str, str]:
    headers = answer.headers  # type: ignore[attr-defined]
    found = [v for k, v in headers.multi_items() if k.lower() == "set-cookie"]
    return {c.split("=", 1)[0]: c for c in found}


def test_alice_signs_in_and_sees_what_her_groups_grant(make_site: Make) -> None:
    site = make_site(ALICE_READS_PLATFORM)
    alice = site.browser()
    assert "platform/vpc" not in alice.get("/").text
    headers = site.sign_in(alice, "alice")
    assert headers["location"] == ["/"]
    cookies = {c.split("=", 1)[0]: c for c in headers["set-cookie"]}
    flags = {part.strip().lower() for part in cookies[SESSION_COOKIE].split(";")[1:]}
    assert {"httponly", "secure", "samesite=lax", "path=/", "max-age=28800"} <= flags
    assert "max-age=0" in cookies["__Host-gitreg_sign_in"].lower()
    home = alice.get("/")
    assert "alice@example.com" in home.text and 'href="/ui/tokens"' in home.text
    assert "platform/vpc/aws" in home.text
    assert alice.get("/modules/platform/vpc/aws").status_code == 200
    session = site.svc.auth.session(token_hash(alice.cookies[SESSION_COOKIE]), time.time())
    assert session is not None and session.subject == "alice"
    assert session.groups == ("platform-team",) and session.grants == {"platform": "publish"}


def test_bob_signs_in_without_grants_and_sees_no_private_content(make_site: Make) -> None:
    site = make_site(ALICE_READS_PLATFORM)
    bob = site.browser()
    site.sign_in(bob, "bob")
    home = bob.get("/")
    assert "bob@example.com" in home.text and "platform/vpc" not in home.text
    assert bob.get("/modules/platform/vpc/aws").status_code == 404
    assert bob.get("/modules/acme/vpc/aws").status_code == 200
    tokens = bob.get("/ui/tokens")
    assert (
        "grant nothing on this registry" in tokens.text and 'action="/ui/tokens"' not in tokens.text
    )


def test_pages_of_two_people_with_the_same_grants_are_not_shared(make_site: Make) -> None:
    """The page cache is keyed by the person: bob never gets alice's header."""
    site = make_site(ALICE_READS_PLATFORM + BOB_ADMIN.replace('"*"', '"platform"'))
    alice, bob = site.browser(), site.browser()
    site.sign_in(alice, "alice")
    site.sign_in(bob, "bob")
    assert "alice@example.com" in alice.get("/").text
    page = bob.get("/").text
    assert "bob@example.com" in page and "alice@example.com" not in page


def test_a_session_id_from_before_sign_in_is_never_reused(make_site: Make) -> None:
    """Session fixation: neither a value planted before sign-in nor a previous
    session survives a sign-in; the new id is drawn at the callback."""
    site = make_site(ALICE_READS_PLATFORM)
    alice = site.browser()
    planted = "attacker-chosen-session-id-0123456789"
    alice.cookies.set(SESSION_COOKIE, planted, domain="testserver.local")
    site.sign_in(alice, "alice")
    first = alice.cookies[SESSION_COOKIE]
    assert first != planted
    assert site.svc.auth.session(token_hash(planted), time.time()) is None
    site.sign_in(alice, "alice")  # signing in again rotates the id
    second = alice.cookies[SESSION_COOKIE]
    assert second != first
    assert site.svc.auth.session(token_hash(first), time.time()) is None
    stale = site.browser()
    stale.cookies.set(SESSION_COOKIE, first, domain="testserver.local")
    assert "alice@example.com" not in stale.get("/").text


def test_a_callback_only_works_in_the_browser_that_started_it(make_site: Make) -> None:
    """Login CSRF: a callback URL sent to another browser signs no one in
    there, and a callback is single-use."""
    site = make_site(ALICE_READS_PLATFORM)
    attacker, victim = site.browser(), site.browser()
    url = site.callback_url(attacker, "alice")
    refused = victim.get(url)
    assert refused.status_code == 403 and "started in another browser" in refused.text
    assert SESSION_COOKIE not in _set_cookies(refused)
    again = attacker.get(url)  # the state was spent by the refused attempt
    assert again.status_code == 403 and "unknown, expired or already finished" in again.text
    assert victim.get("/ui/sign-in/callback?state=x&code=y").status_code == 403


def test_an_error_from_the_provider_is_a_page_not_a_session(make_site: Make) -> None:
    site = make_site(ALICE_READS_PLATFORM)
    alice = site.browser()
    url = site.callback_url(alice, "alice")
    state = url.split("state=")[1].split("&")[0]
    answer = alice.get(f"/ui/sign-in/callback?error=access_denied&state={state}")
    assert answer.status_code == 403 and "did not sign you in" in answer.text
    assert SESSION_COOKIE not in alice.cookies


def test_next_returns_to_the_page_but_never_to_another_site(make_site: Make) -> None:
    site = make_site(ALICE_READS_PLATFORM)
    for asked, expected in [
        ("/modules/platform/vpc/aws", "/modules/platform/vpc/aws"),
        ("//evil.example/x", "/"),
        ("https://evil.example/", "/"),
    ]:
        alice = site.browser()
        visit = browse(
            site.start(alice, asked), "alice", None, until=lambda u: u.startswith(BASE + "/ui/")
        )
        done = alice.get(visit.url.removeprefix(BASE))
        assert done.headers["location"] == expected
    # The form's own `next` gets the same rules: a forged field is no way round.
    alice = site.browser()
    page = alice.get("/ui/sign-in")
    form = {"csrf": alice.cookies[CSRF_COOKIE], "next": "//evil.example/"}
    start = alice.post("/ui/sign-in", data=form)
    visit = browse(start.headers["location"], "alice", None, until=lambda u: "/ui/" in u)
    assert page.status_code == 200
    assert alice.get(visit.url.removeprefix(BASE)).headers["location"] == "/"


def test_the_sign_in_page_writes_nothing_until_its_button_is_pressed(make_site: Make) -> None:
    """Crawlers follow the "Sign in" link on every page: a GET is a page with a
    button, and only the button's POST keeps a pending sign-in."""
    site = make_site(ALICE_READS_PLATFORM)
    crawler = site.browser()
    for _ in range(3):
        page = crawler.get("/ui/sign-in", params={"next": "/modules/platform/vpc/aws"})
        assert page.status_code == 200 and "Sign in with 127.0.0.1" in page.text
        assert 'value="/modules/platform/vpc/aws"' in page.text
        assert "__Host-gitreg_sign_in" not in _set_cookies(page)
    # The form's POST redirects to the issuer: CSP form-action must allow it
    # there (browsers apply it to redirects), and on no other page.
    issuer = urlsplit(site.svc.settings.oidc_issuer)
    allowed = f"form-action 'self' {issuer.scheme}://{issuer.netloc};"
    assert allowed in page.headers["content-security-policy"]
    assert "form-action 'self';" in crawler.get("/").headers["content-security-policy"]
    assert site.svc.auth.count_login_states(time.time(), 100) == 0
    form = {"csrf": crawler.cookies[CSRF_COOKIE], "next": "/"}
    assert crawler.post("/ui/sign-in", data=form).status_code == 303
    assert site.svc.auth.count_login_states(time.time(), 100) == 1


@pytest.mark.parametrize(
    ("headers", "csrf"),
    [
        ({"Origin": "https://evil.example"}, True),
        ({"Sec-Fetch-Site": "cross-site"}, True),
        ({}, False),
    ],
    ids=["other-origin", "cross-site", "no-csrf"],
)
def test_a_sign_in_post_from_elsewhere_is_refused(
    make_site: Make, headers: dict[str, str], csrf: bool
) -> None:
    site = make_site(ALICE_READS_PLATFORM)
    browser = site.browser()
    browser.get("/ui/sign-in")
    form = {"csrf": browser.cookies[CSRF_COOKIE] if csrf else "forged", "next": "/"}
    answer = browser.post("/ui/sign-in", data=form, headers=headers)
    assert answer.status_code == 403 and "Form expired" in answer.text
    assert site.svc.auth.count_login_states(time.time(), 100) == 0


def test_web_sign_ins_count_against_the_sign_in_limits(make_site: Make) -> None:
    site = make_site("sign_in_per_client = 2\n" + ALICE_READS_PLATFORM)
    browser = site.browser()
    site.start(browser)
    site.start(browser)
    browser.get("/ui/sign-in")
    refused = browser.post("/ui/sign-in", data={"csrf": browser.cookies[CSRF_COOKIE]})
    assert refused.status_code == 503 and "Sign-in busy" in refused.text
    assert int(refused.headers["retry-after"]) > 0
    assert site.svc.auth.count_login_states(time.time(), 100) == 2


def test_both_sign_in_flows_share_one_view_of_the_issuer(
    make_site: Make, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The web UI and `terraform login` fetch the discovery document once between
    them (one cache, one JWKS refetch allowance), not once each."""
    site = make_site(ALICE_READS_PLATFORM)
    fetched = count_fetches(monkeypatch)
    browser = site.browser()
    assert browser.get("/ui/sign-in").status_code == 200
    assert browser.get("/oauth/authorization", params=authorize_params()).status_code == 302
    assert [what for _, what in fetched] == ["the discovery document"]


def test_sign_out_deletes_the_session_on_the_server(make_site: Make) -> None:
    site = make_site(ALICE_READS_PLATFORM)
    alice = site.browser()
    site.sign_in(alice, "alice")
    session_id = alice.cookies[SESSION_COOKIE]
    answer = alice.post("/ui/sign-out", data={"csrf": site.csrf(alice)})
    assert answer.status_code == 303
    assert "max-age=0" in _set_cookies(answer)[SESSION_COOKIE].lower()
    assert site.svc.auth.session(token_hash(session_id), time.time()) is None
    replay = site.browser()  # a copy of the old cookie is worth nothing now
    replay.cookies.set(SESSION_COOKIE, session_id, domain="testserver.local")
    assert replay.get("/modules/platform/vpc/aws").status_code == 404
    assert replay.get("/ui/tokens").headers["location"].startswith("/ui/sign-in")


def test_a_session_ends_after_session_ttl(make_site: Make, monkeypatch: pytest.MonkeyPatch) -> None:
    site = make_site(ALICE_READS_PLATFORM)
    alice = site.browser()
    site.sign_in(alice, "alice")
    assert alice.get("/modules/platform/vpc/aws").status_code == 200
    later = time.time() + site.svc.settings.session_ttl + 1
    monkeypatch.setattr("gitreg.ui.viewer.time", SimpleNamespace(time=lambda: later))
    assert alice.get("/modules/platform/vpc/aws").status_code == 404


def test_without_an_issuer_there_is_no_sign_in(ui: Ui) -> None:
    for path in ("/ui/sign-in", "/ui/sign-in/callback?state=x&code=y", "/ui/tokens"):
        assert ui.client.get(path).status_code == 404
    assert "Sign in" not in ui.client.get("/").text
    assert ui.client.get("/ui/admin/tokens").status_code == 404


def test_a_terraform_login_token_sees_only_its_grants_cached_pages(ui: Ui) -> None:
    """A token from `terraform login` has grants per namespace and no namespace
    list: its pages must not share the cache key of a token for every
    namespace (which would show it `secret`)."""
    ui.sign_in(ui.token([]))  # every namespace: the home page cached with secret/vault
    assert "secret/vault" in ui.client.get("/").text
    token = "gitreg_" + "g" * 43
    who = Identity("carol", "carol@example.com", ("acme-team",))
    ui.svc.auth.add_login_token(
        token_hash(token), token[:12], {"acme": "read"}, who, "", time.time() + 3600
    )
    ui.svc.cache.invalidate()
    ui.client.get("/")  # the every-namespace page, cached again after the invalidation
    ui.sign_in(token)
    home = ui.client.get("/").text
    assert "acme/vpc" in home and "secret/vault" not in home
    assert ui.client.get("/modules/secret/vault/aws").status_code == 404
