"""The Tokens page and the admin page: a person's own tokens, never
more than their grants, the secret shown once and never cached, revocation
that the API honours at once; and CSRF on every form that changes state."""

from __future__ import annotations

import re
from collections.abc import Callable

from starlette.testclient import TestClient

from tests.ui.conftest import ALICE_READS_PLATFORM, BOB_ADMIN, SESSION_COOKIE, SignInSite

Make = Callable[[str], SignInSite]
VERSIONS = "/v1/modules/platform/vpc/aws/versions"


def _create(site: SignInSite, client: TestClient, **fields: str) -> tuple[int, str]:
    data = {"csrf": site.csrf(client), "name": "ci", "expires_days": "30"} | fields
    answer = client.post("/ui/tokens", data=data)
    found = re.search(r"gitreg_[A-Za-z0-9_-]{43}", answer.text)
    return answer.status_code, found.group(0) if found else answer.text


def _api(site: SignInSite, token: str) -> int:
    client = TestClient(site.app, base_url="https://testserver")
    return client.get(VERSIONS, headers={"authorization": f"Bearer {token}"}).status_code


def _ids(page: str) -> list[str]:
    return re.findall(r'name="id" value="(\d+)"', page)


def test_alice_creates_a_token_sees_it_once_and_revokes_it(make_site: Make) -> None:
    site = make_site(ALICE_READS_PLATFORM)
    alice = site.browser()
    site.sign_in(alice, "alice")
    data = {"csrf": site.csrf(alice), "name": "ci: vpc", "expires_days": "90"}
    answer = alice.post("/ui/tokens", data=data | {"scope:platform": "read"})
    assert answer.status_code == 201
    assert answer.headers["cache-control"] == "no-store"
    token = re.findall(r"gitreg_[A-Za-z0-9_-]{43}", answer.text)
    assert len(token) == 1 and "shown only this once" in answer.text
    assert _api(site, token[0]) == 200
    listed = alice.get("/ui/tokens")
    assert listed.headers["cache-control"] == "no-store"
    assert token[0] not in listed.text and token[0][:12] in listed.text
    assert "ci: vpc" in listed.text and "read on platform" in listed.text
    record = next(t for t in site.svc.auth.tokens() if t.description == "ci: vpc")
    assert (record.subject, record.email, record.grants) == (
        "alice",
        "alice@example.com",
        {"platform": "read"},
    )
    assert record.expires_at is not None
    revoke = alice.post("/ui/tokens/revoke", data={"csrf": site.csrf(alice), "id": str(record.id)})
    assert revoke.status_code == 303 and revoke.headers["location"] == "/ui/tokens"
    assert _api(site, token[0]) == 401
    assert _ids(alice.get("/ui/tokens").text) == []


def test_a_token_never_gets_more_than_the_grants(make_site: Make) -> None:
    site = make_site(ALICE_READS_PLATFORM)  # publish on platform
    alice = site.browser()
    site.sign_in(alice, "alice")
    page = alice.get("/ui/tokens").text
    assert '<option value="publish">' in page and '<option value="admin">' not in page
    refused = [
        ({"scope:platform": "admin"}, "more than your groups grant you"),
        ({"scope:*": "read"}, "you have no grant on *"),
        ({"scope:acme": "read"}, "you have no grant on acme"),
        ({"scope:platform": "none"}, "choose a scope for at least one namespace"),
        ({"scope:platform": "owner"}, "scope must be read, publish or admin"),
        ({"scope:platform": "read", "expires_days": "10000"}, "offered expiries"),
        ({"scope:platform": "read", "name": " "}, "give the token a name"),
    ]
    for fields, message in refused:
        status, text = _create(site, alice, **fields)
        assert status == 400 and message in text, (fields, text[:200])
    assert [t for t in site.svc.auth.tokens() if t.subject] == []
    status, token = _create(site, alice, **{"scope:platform": "publish"})
    assert status == 201 and _api(site, token) == 200


def test_nobody_revokes_or_sees_another_persons_token(make_site: Make) -> None:
    site = make_site(ALICE_READS_PLATFORM + BOB_ADMIN.replace('"*"', '"acme"'))
    alice, bob = site.browser(), site.browser()
    site.sign_in(alice, "alice")
    site.sign_in(bob, "bob")
    _, token = _create(site, alice, **{"scope:platform": "read"})
    alices = str(next(t.id for t in site.svc.auth.tokens() if t.subject == "alice"))
    assert "ci" not in bob.get("/ui/tokens").text.split("Your tokens")[1].split("New token")[0]
    answer = bob.post("/ui/tokens/revoke", data={"csrf": site.csrf(bob), "id": alices})
    assert answer.status_code == 404 and _api(site, token) == 200
    admin = bob.post("/ui/admin/tokens/revoke", data={"csrf": site.csrf(bob), "id": alices})
    assert admin.status_code == 403 and _api(site, token) == 200  # admin on acme is no admin
    assert bob.get("/ui/admin/tokens").status_code == 403


def test_an_admin_lists_tokens_by_person_and_revokes_any(make_site: Make) -> None:
    site = make_site(ALICE_READS_PLATFORM + BOB_ADMIN)
    alice, bob = site.browser(), site.browser()
    site.sign_in(alice, "alice")
    site.sign_in(bob, "bob")
    _, token = _create(site, alice, **{"scope:platform": "read"})
    assert "/ui/admin/tokens" not in alice.get("/ui/tokens").text
    assert alice.get("/ui/admin/tokens").status_code == 403
    page = bob.get("/ui/admin/tokens")
    assert page.status_code == 200 and page.headers["cache-control"] == "no-store"
    assert "<h2>alice@example.com</h2>" in page.text and token not in page.text
    [alices] = _ids(page.text)
    answer = bob.post("/ui/admin/tokens/revoke", data={"csrf": site.csrf(bob), "id": alices})
    assert answer.status_code == 303 and _api(site, token) == 401
    again = bob.post("/ui/admin/tokens/revoke", data={"csrf": site.csrf(bob), "id": alices})
    assert again.status_code == 404


def test_every_form_refuses_a_missing_or_wrong_token_and_a_cross_site_post(
    make_site: Make,
) -> None:
    site = make_site(ALICE_READS_PLATFORM + BOB_ADMIN)
    alice, bob = site.browser(), site.browser()
    site.sign_in(alice, "alice")
    site.sign_in(bob, "bob")
    _, token = _create(site, alice, **{"scope:platform": "read"})
    token_id = str(next(t.id for t in site.svc.auth.tokens() if t.subject == "alice"))
    forms = [
        (alice, "/ui/tokens", {"name": "x", "expires_days": "30", "scope:platform": "read"}),
        (alice, "/ui/tokens/revoke", {"id": token_id}),
        (bob, "/ui/admin/tokens/revoke", {"id": token_id}),
        (alice, "/ui/sign-out", {}),
        (alice, "/ui/token", {"token": token}),
    ]
    before = len(site.svc.auth.tokens())
    for client, path, fields in forms:
        good = site.csrf(client)
        other = site.csrf(bob if client is alice else alice)  # another session's token
        attempts = [
            ({**fields}, {}),
            ({**fields, "csrf": "x" * 43}, {}),
            ({**fields, "csrf": other}, {}),
            ({**fields, "csrf": good}, {"sec-fetch-site": "cross-site"}),
            ({**fields, "csrf": good}, {"sec-fetch-site": "same-site"}),
            ({**fields, "csrf": good}, {"origin": "https://evil.example"}),
            ({**fields, "csrf": good}, {"origin": "null"}),
        ]
        for data, headers in attempts:
            answer = client.post(path, data=data, headers=headers)
            assert answer.status_code == 403 and "Form expired" in answer.text, (path, data)
            assert "set-cookie" not in answer.headers, path
    assert len(site.svc.auth.tokens()) == before and _api(site, token) == 200
    assert "alice@example.com" in alice.get("/").text  # sign-out was refused too
    same_origin = {"origin": "https://registry.example.com", "sec-fetch-site": "same-origin"}
    answer = alice.post(
        "/ui/tokens/revoke", data={"csrf": site.csrf(alice), "id": token_id}, headers=same_origin
    )
    assert answer.status_code == 303 and _api(site, token) == 401


def test_pages_need_a_session(make_site: Make) -> None:
    site = make_site(ALICE_READS_PLATFORM)
    anonymous = site.browser()
    for path in ("/ui/tokens", "/ui/admin/tokens"):
        answer = anonymous.get(path)
        assert answer.status_code == 303
        assert answer.headers["location"] == f"/ui/sign-in?next={path}"
    assert SESSION_COOKIE not in anonymous.cookies
    assert 'href="/ui/sign-in?next=/"' in anonymous.get("/").text


def test_non_ascii_digits_are_refused_not_a_server_error(make_site: Make) -> None:
    """`"²".isdigit()` is true but `int("²")` raises: a 400 or 404, never a 500."""
    site = make_site(ALICE_READS_PLATFORM)
    alice = site.browser()
    site.sign_in(alice, "alice")
    status, text = _create(site, alice, **{"scope:platform": "read", "expires_days": "²"})
    assert status == 400 and "offered expiries" in text
    answer = alice.post("/ui/tokens/revoke", data={"csrf": site.csrf(alice), "id": "²"})
    assert answer.status_code == 404


def test_a_person_granted_many_namespaces_can_still_create_a_token(make_site: Make) -> None:
    """The form posts one scope field per granted namespace: fifty grants are
    well within the form's limits."""
    many = "".join(
        f'[[grants]]\ngroup = "platform-team"\nnamespace = "team-{i:02d}"\nscope = "read"\n'
        for i in range(50)
    )
    site = make_site(ALICE_READS_PLATFORM + many)
    alice = site.browser()
    site.sign_in(alice, "alice")
    fields = {f"scope:team-{i:02d}": "none" for i in range(50)}
    status, token = _create(site, alice, **fields, **{"scope:platform": "read"})
    assert status == 201 and _api(site, token) == 200
