"""The read-token form (`/ui/token`): CSRF, the cookie's flags, clear messages
for a bad token, and sign-out."""

from __future__ import annotations

from gitreg.auth.store import Identity
from gitreg.auth.tokens import new_token, token_hash
from gitreg.ui.csrf import MAX_FORM_BYTES, MAX_FORM_FIELDS
from tests.ui.conftest import Ui


def _set_cookie_headers(answer: object) -> list[str]:
    headers = answer.headers  # type: ignore[attr-defined]
    return [v for k, v in headers.multi_items() if k.lower() == "set-cookie"]


def test_a_good_token_is_kept_in_a_strict_httponly_secure_cookie(ui: Ui) -> None:
    token = ui.token(["secret"])
    answer = ui.client.post("/ui/token", data={"csrf": ui.csrf(), "token": token})
    assert answer.status_code == 303 and answer.headers["location"] == "/"
    cookie = next(c for c in _set_cookie_headers(answer) if c.startswith("gitreg_ui_token="))
    flags = {part.strip().lower() for part in cookie.split(";")[1:]}
    assert {"httponly", "secure", "samesite=strict", "path=/"} <= flags
    assert "Token: on" in ui.client.get("/").text
    assert "for secret" in ui.client.get("/ui/token").text


def test_a_sign_in_token_is_described_by_its_grants_not_as_every_namespace(ui: Ui) -> None:
    token = new_token()
    who = Identity("alice", "alice@example.com", ("platform-team",))
    grants = {"secret": "read"}
    ui.svc.auth.add_login_token(token_hash(token), token[:12], grants, who, "ci", 4e9)
    ui.svc.cache.invalidate()
    ui.sign_in(token)
    page = ui.client.get("/ui/token").text
    assert "A token is presented with read on secret." in page
    assert "every namespace" not in page


def test_the_csrf_cookie_has_the_same_flags(ui: Ui) -> None:
    form = ui.client.get("/ui/token")
    cookie = next(c for c in _set_cookie_headers(form) if c.startswith("gitreg_ui_csrf="))
    flags = {part.strip().lower() for part in cookie.split(";")[1:]}
    assert {"httponly", "secure", "samesite=strict"} <= flags
    value = cookie.split(";")[0].split("=", 1)[1]
    assert f'name="csrf" value="{value}"' in form.text


def test_a_bad_token_gets_a_clear_message_and_no_cookie(ui: Ui) -> None:
    for bad in ("gitreg_" + "x" * 43, "nonsense", ""):
        answer = ui.client.post("/ui/token", data={"csrf": ui.csrf(), "token": bad})
        assert answer.status_code == 400
        assert "That token is not valid: it is unknown, revoked or expired." in answer.text
        assert not [c for c in _set_cookie_headers(answer) if c.startswith("gitreg_ui_token=")]


def test_failed_tokens_are_rate_limited_like_bearer_tokens(ui: Ui) -> None:
    statuses = [
        ui.client.post("/ui/token", data={"csrf": ui.csrf(), "token": "wrong"}).status_code
        for _ in range(ui.svc.settings.auth_fail_limit + 1)
    ]
    assert statuses[-1] == 429 and set(statuses[:-1]) == {400}


def test_posts_without_the_csrf_token_are_refused(ui: Ui) -> None:
    token = ui.token([])
    csrf = ui.csrf()
    refused = [
        ui.client.post("/ui/token", data={"token": token}),
        ui.client.post("/ui/token", data={"token": token, "csrf": "x" * 43}),
        ui.client.post(
            "/ui/token",
            data={"token": token, "csrf": csrf},
            headers={"sec-fetch-site": "cross-site"},
        ),
        ui.client.post("/ui/token", content=f"csrf={csrf}&token={token}"),  # not a form
        ui.client.post("/ui/sign-out", data={"csrf": "wrong"}),
    ]
    for answer in refused:
        assert answer.status_code == 403 and "Form expired" in answer.text
        assert not [c for c in _set_cookie_headers(answer) if c.startswith("gitreg_ui_token=")]
    ui.client.cookies.delete("gitreg_ui_csrf")
    no_cookie = ui.client.post("/ui/token", data={"token": token, "csrf": csrf})
    assert no_cookie.status_code == 403
    big = ui.client.post("/ui/token", data={"token": "x" * (MAX_FORM_BYTES + 1), "csrf": ui.csrf()})
    assert big.status_code == 403


def test_sign_out_forgets_the_token(ui: Ui) -> None:
    ui.sign_in(ui.token(["secret"]))
    assert ui.client.get("/modules/secret/vault/aws").status_code == 200
    answer = ui.client.post("/ui/sign-out", data={"csrf": ui.csrf()})
    assert answer.status_code == 303
    cleared = next(c for c in _set_cookie_headers(answer) if c.startswith("gitreg_ui_token="))
    assert "max-age=0" in cleared.lower() and "httponly" in cleared.lower()
    assert ui.client.get("/modules/secret/vault/aws").status_code == 404


def test_the_token_is_never_written_to_a_page(ui: Ui) -> None:
    token = ui.token([])
    ui.sign_in(token)
    for path in ("/", "/ui/token", "/modules/acme/vpc/aws", "/nope"):
        assert token not in ui.client.get(path).text


def test_a_form_with_too_many_fields_is_refused_not_a_server_error(ui: Ui) -> None:
    """`parse_qs(max_num_fields=...)` raises on a longer form: a 403, not a 500."""
    fields = {"csrf": ui.csrf(), "token": ui.token(["secret"])}
    fields |= {f"p{i}": "" for i in range(MAX_FORM_FIELDS)}
    answer = ui.client.post("/ui/token", data=fields)
    assert answer.status_code == 403 and "Form expired" in answer.text
    assert "Token: on" not in ui.client.get("/").text
