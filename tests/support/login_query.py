"""The query `terraform login` sends to login.v1's authorization endpoint
(../shared/spec: login.v1; RFC 6749 4.1.1 with PKCE, RFC 7636 4.3)."""

from __future__ import annotations

from gitreg.auth.oidc import pkce_challenge


def authorize_params(
    redirect_uri: str = "http://localhost:10000/login",
    state: str = "s",
    verifier: str | None = None,
) -> dict[str, str]:
    """Terraform's parameters; the S256 challenge of `verifier`, or a well-formed
    one that no verifier matches when the test never redeems the code."""
    return {
        "client_id": "terraform-cli",
        "response_type": "code",
        "redirect_uri": redirect_uri,
        "state": state,
        "code_challenge": pkce_challenge(verifier) if verifier else "c" * 43,
        "code_challenge_method": "S256",
    }
