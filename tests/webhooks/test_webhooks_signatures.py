"""Signature and token checks for every forge, and secret references."""

from __future__ import annotations

from pathlib import Path

import pytest

from gitreg.secret_refs import resolve_secret
from gitreg.webhooks.bitbucket import Bitbucket
from gitreg.webhooks.gitea import Gitea
from gitreg.webhooks.github import GitHub
from gitreg.webhooks.gitlab import GitLab
from gitreg.webhooks.signatures import hex_signature_ok, token_ok

# GitHub's published test vector ("Validating webhook deliveries").
VECTOR_SECRET = "It's a Secret to Everybody"
VECTOR_BODY = b"Hello, World!"
VECTOR_SIGNATURE = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
VECTOR_HEX = VECTOR_SIGNATURE.removeprefix("sha256=")


def test_github_published_vector_verifies() -> None:
    headers = {"x-hub-signature-256": VECTOR_SIGNATURE}
    assert GitHub().verify(headers, VECTOR_BODY, VECTOR_SECRET)


@pytest.mark.parametrize(
    "signature",
    [
        VECTOR_SIGNATURE[:-1] + "f",  # one nibble off
        VECTOR_HEX,  # GitHub's header needs the sha256= prefix
        "sha1=" + VECTOR_HEX,
        "",
        "sha256=",
        "sha256=" + "zz" * 32,
    ],
)
def test_github_wrong_signatures_fail(signature: str) -> None:
    assert not GitHub().verify({"x-hub-signature-256": signature}, VECTOR_BODY, VECTOR_SECRET)


def test_github_signature_is_over_the_exact_bytes() -> None:
    headers = {"x-hub-signature-256": VECTOR_SIGNATURE}
    assert not GitHub().verify(headers, VECTOR_BODY + b"\n", VECTOR_SECRET)
    assert not GitHub().verify(headers, VECTOR_BODY, VECTOR_SECRET + " ")


def test_github_missing_header_fails() -> None:
    assert not GitHub().verify({}, VECTOR_BODY, VECTOR_SECRET)


def test_uppercase_hex_is_accepted() -> None:
    assert GitHub().verify(
        {"x-hub-signature-256": VECTOR_SIGNATURE.upper()}, VECTOR_BODY, VECTOR_SECRET
    )


def test_gitea_and_forgejo_use_bare_hex() -> None:
    assert Gitea().verify({"x-gitea-signature": VECTOR_HEX}, VECTOR_BODY, VECTOR_SECRET)
    assert Gitea().verify({"x-forgejo-signature": VECTOR_HEX}, VECTOR_BODY, VECTOR_SECRET)
    assert not Gitea().verify({"x-gitea-signature": VECTOR_SIGNATURE}, VECTOR_BODY, VECTOR_SECRET)
    # A GitHub-style header is not what Gitea's route checks.
    assert not Gitea().verify({"x-hub-signature-256": VECTOR_SIGNATURE}, VECTOR_BODY, VECTOR_SECRET)


def test_forgejo_header_wins_when_both_are_sent() -> None:
    headers = {"x-forgejo-signature": "00" * 32, "x-gitea-signature": VECTOR_HEX}
    assert not Gitea().verify(headers, VECTOR_BODY, VECTOR_SECRET)


def test_bitbucket_uses_x_hub_signature_with_sha256_prefix() -> None:
    assert Bitbucket().verify({"x-hub-signature": VECTOR_SIGNATURE}, VECTOR_BODY, VECTOR_SECRET)
    assert not Bitbucket().verify({"x-hub-signature": VECTOR_HEX}, VECTOR_BODY, VECTOR_SECRET)
    assert not Bitbucket().verify(
        {"x-hub-signature-256": VECTOR_SIGNATURE}, VECTOR_BODY, VECTOR_SECRET
    )


def test_gitlab_token_is_the_secret_itself() -> None:
    assert GitLab().verify({"x-gitlab-token": VECTOR_SECRET}, b"anything", VECTOR_SECRET)
    assert not GitLab().verify({"x-gitlab-token": VECTOR_SECRET + "x"}, b"", VECTOR_SECRET)
    assert not GitLab().verify({"x-gitlab-token": VECTOR_SIGNATURE}, VECTOR_BODY, VECTOR_SECRET)
    assert not GitLab().verify({}, b"", VECTOR_SECRET)


@pytest.mark.parametrize("forge", [GitHub(), GitLab(), Gitea(), Bitbucket()], ids=lambda f: f.name)
def test_empty_secret_never_verifies(forge: object) -> None:
    """With no secret configured, not even an 'empty' signature passes."""
    from tests.support.webhooks import hmac_hex

    headers = {
        "x-hub-signature-256": "sha256=" + hmac_hex("", VECTOR_BODY),
        "x-hub-signature": "sha256=" + hmac_hex("", VECTOR_BODY),
        "x-gitea-signature": hmac_hex("", VECTOR_BODY),
        "x-gitlab-token": "",
    }
    assert not forge.verify(headers, VECTOR_BODY, "")  # type: ignore[attr-defined]
    assert not hex_signature_ok("", VECTOR_BODY, headers["x-gitea-signature"])
    assert not token_ok("", "")


def test_secret_references(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITREG_TEST_HOOK_SECRET", "from-env")
    secret_file = tmp_path / "secret"
    secret_file.write_text("from-file\n")
    assert resolve_secret("literal") == "literal"
    assert resolve_secret("env:GITREG_TEST_HOOK_SECRET") == "from-env"
    assert resolve_secret(f"file:{secret_file}") == "from-file"


def test_unreadable_secret_references_fail_closed(tmp_path: Path) -> None:
    assert resolve_secret("env:GITREG_TEST_NO_SUCH_VARIABLE") == ""
    assert resolve_secret(f"file:{tmp_path / 'missing'}") == ""
