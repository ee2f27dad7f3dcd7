"""Local OpenID issuers shaped like the CI platforms' workload identity issuers.

One TLS server on 127.0.0.1 (its own test CA, gitreg.server.tls) serves three
issuers under their own paths, each with the discovery document and JWKS its
platform publishes, and signs ID tokens with the claims each documents:

- GitHub Actions ("About security hardening with OpenID Connect"): issuer
  `https://token.actions.githubusercontent.com`, JWKS at
  `/.well-known/jwks`; claims `repository`, `repository_owner`, `ref`,
  `ref_type`, `ref_protected`, `environment`, `job_workflow_ref`,
  `event_name`, `sha`, `workflow`, `run_id`, ..., `sub` as
  `repo:OWNER/REPO:ref:REF` (or `:pull_request`, `:environment:NAME`);
  header with `typ`, `alg` RS256, `kid` and `x5t`.
- GitLab CI ("OpenID Connect (OIDC) Authentication Using ID Tokens"): JWKS at
  `/oauth/discovery/keys`; claims `project_path`, `namespace_path`, `ref`,
  `ref_type`, `ref_path`, `ref_protected` (a string), `pipeline_source`,
  `environment`, ..., `sub` as `project_path:P:ref_type:T:ref:R`.
- Kubernetes projected service account tokens (ServiceAccountIssuerDiscovery):
  JWKS at `/openid/v1/jwks` served as `application/jwk-set+json`; `sub`
  `system:serviceaccount:NS:SA`, `aud` a list, and the `kubernetes.io` object
  with `namespace`, `pod`, `serviceaccount` and `node`.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from joserfc import jwt
from joserfc.jwk import RSAKey
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from gitreg.server.tls import ensure_local_tls
from tests.support.server import free_port
from tests.support.threaded_server import ThreadedServer

KINDS = ("github", "gitlab", "kubernetes")
JWKS_PATHS = {
    "github": "/.well-known/jwks",
    "gitlab": "/oauth/discovery/keys",
    "kubernetes": "/openid/v1/jwks",
}


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


@dataclass
class Issuer:
    kind: str
    url: str
    keys: list[RSAKey]
    jwks_fetches: int = 0
    discovery_fetches: int = 0

    def document(self) -> dict[str, Any]:
        jwks_uri = self.url + JWKS_PATHS[self.kind]
        if self.kind == "github":
            return {
                "issuer": self.url,
                "jwks_uri": jwks_uri,
                "subject_types_supported": ["public", "pairwise"],
                "response_types_supported": ["id_token"],
                "claims_supported": [
                    "sub",
                    "aud",
                    "exp",
                    "iat",
                    "iss",
                    "jti",
                    "nbf",
                    "ref",
                    "sha",
                    "repository",
                    "repository_id",
                    "repository_owner",
                    "repository_owner_id",
                    "run_id",
                    "run_number",
                    "run_attempt",
                    "actor",
                    "actor_id",
                    "workflow",
                    "workflow_ref",
                    "workflow_sha",
                    "head_ref",
                    "base_ref",
                    "event_name",
                    "ref_type",
                    "ref_protected",
                    "environment",
                    "environment_node_id",
                    "job_workflow_ref",
                    "job_workflow_sha",
                    "repository_visibility",
                    "runner_environment",
                ],
                "id_token_signing_alg_values_supported": ["RS256"],
                "scopes_supported": ["openid"],
            }
        if self.kind == "gitlab":
            return {
                "issuer": self.url,
                "authorization_endpoint": self.url + "/oauth/authorize",
                "token_endpoint": self.url + "/oauth/token",
                "revocation_endpoint": self.url + "/oauth/revoke",
                "introspection_endpoint": self.url + "/oauth/introspect",
                "userinfo_endpoint": self.url + "/oauth/userinfo",
                "jwks_uri": jwks_uri,
                "scopes_supported": ["api", "read_api", "openid", "profile", "email"],
                "response_types_supported": ["code"],
                "response_modes_supported": ["query", "fragment", "form_post"],
                "grant_types_supported": ["authorization_code", "password", "refresh_token"],
                "token_endpoint_auth_methods_supported": [
                    "client_secret_basic",
                    "client_secret_post",
                ],
                "subject_types_supported": ["public"],
                "id_token_signing_alg_values_supported": ["RS256"],
                "claim_types_supported": ["normal"],
                "claims_supported": ["iss", "sub", "aud", "exp", "iat", "sub_legacy", "name"],
            }
        return {
            "issuer": self.url,
            "jwks_uri": jwks_uri,
            "response_types_supported": ["id_token"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["RS256"],
        }

    def jwks(self) -> dict[str, Any]:
        keys = []
        for key in self.keys:
            public = key.as_dict(private=False)
            if self.kind == "github":
                public = {
                    **public,
                    "alg": "RS256",
                    "x5t": b64(hashlib.sha1(str(key.kid).encode()).digest()),
                }
            keys.append(public)
        return {"keys": keys}

    def claims(self, audience: str, now: float | None = None, **overrides: Any) -> dict[str, Any]:
        """A token's claims as the platform sets them, for a default job."""
        now = int(now if now is not None else time.time())
        common = {
            "iss": self.url,
            "jti": str(uuid.uuid4()),
            "nbf": now - 5,
            "iat": now,
            "exp": now + 300,
        }
        if self.kind == "github":
            repo = overrides.get("repository", "acme/infra-live")
            ref = overrides.get("ref", "refs/heads/main")
            event = overrides.get("event_name", "push")
            sub = (
                f"repo:{repo}:pull_request" if event == "pull_request" else f"repo:{repo}:ref:{ref}"
            )
            claims = {
                **common,
                "sub": sub,
                "aud": audience,
                "ref": ref,
                "sha": "d4b5e8c3a1f0e2d6b7c8a9f0e1d2c3b4a5f6e7d8",
                "repository": repo,
                "repository_owner": repo.split("/")[0],
                "actor_id": "12",
                "repository_visibility": "private",
                "repository_id": "74",
                "repository_owner_id": "65",
                "run_id": "6215393611",
                "run_number": "10",
                "run_attempt": "1",
                "runner_environment": "github-hosted",
                "actor": "octocat",
                "workflow": "release",
                "head_ref": "",
                "base_ref": "",
                "event_name": event,
                "ref_type": "tag" if ref.startswith("refs/tags/") else "branch",
                "ref_protected": "false",
                "workflow_ref": f"{repo}/.github/workflows/release.yml@{ref}",
                "workflow_sha": "d4b5e8c3a1f0e2d6b7c8a9f0e1d2c3b4a5f6e7d8",
                "job_workflow_ref": f"{repo}/.github/workflows/release.yml@{ref}",
                "job_workflow_sha": "d4b5e8c3a1f0e2d6b7c8a9f0e1d2c3b4a5f6e7d8",
            }
        elif self.kind == "gitlab":
            project = overrides.get("project_path", "acme/infra-live")
            ref = overrides.get("ref", "main")
            ref_type = overrides.get("ref_type", "branch")
            claims = {
                **common,
                "namespace_id": "72",
                "namespace_path": project.split("/")[0],
                "project_id": "20",
                "project_path": project,
                "user_id": "1",
                "user_login": "sample-user",
                "user_email": "sample-user@example.com",
                "user_access_level": "developer",
                "pipeline_id": "574",
                "pipeline_source": "push",
                "job_id": "302",
                "ref": ref,
                "ref_type": ref_type,
                "ref_path": f"refs/{'tags' if ref_type == 'tag' else 'heads'}/{ref}",
                "ref_protected": "true",
                "runner_id": 1,
                "runner_environment": "gitlab-hosted",
                "sha": "714a629c0b401fdce83e847fc9589983fc6f46bc",
                "project_visibility": "private",
                "ci_config_ref_uri": (
                    f"gitlab.example.com/{project}//.gitlab-ci.yml@refs/heads/main"
                ),
                "ci_config_sha": "714a629c0b401fdce83e847fc9589983fc6f46bc",
                "sub": f"project_path:{project}:ref_type:{ref_type}:ref:{ref}",
                "aud": audience,
            }
        else:
            namespace = overrides.pop("namespace", "ci")
            account = overrides.pop("serviceaccount", "terraform")
            claims = {
                **common,
                "aud": [audience],
                "sub": f"system:serviceaccount:{namespace}:{account}",
                "kubernetes.io": {
                    "namespace": namespace,
                    "node": {"name": "node-1", "uid": str(uuid.uuid4())},
                    "pod": {"name": "runner-7d9f", "uid": str(uuid.uuid4())},
                    "serviceaccount": {"name": account, "uid": str(uuid.uuid4())},
                },
            }
        claims.update(overrides)
        return {k: v for k, v in claims.items() if v is not None}

    def header(self, key: RSAKey) -> dict[str, Any]:
        if self.kind == "github":
            thumb = b64(hashlib.sha1(str(key.kid).encode()).digest())
            return {"typ": "JWT", "alg": "RS256", "x5t": thumb, "kid": key.kid}
        return {"alg": "RS256", "kid": key.kid}

    def sign(
        self, audience: str, key: RSAKey | None = None, now: float | None = None, **overrides: Any
    ) -> str:
        key = key or self.keys[0]
        return jwt.encode(self.header(key), self.claims(audience, now, **overrides), key)

    def forged(self, audience: str, alg: str) -> str:
        """A token whose header claims `alg` `none` (no signature) or `HS256`
        (an HMAC keyed with the issuer's public key, as in the algorithm
        confusion attack), for the issuer's current kid."""
        key = self.keys[0]
        head = b64(json.dumps({"alg": alg, "kid": key.kid, "typ": "JWT"}).encode())
        body = b64(json.dumps(self.claims(audience)).encode())
        signing_input = f"{head}.{body}".encode()
        if alg == "none":
            return f"{head}.{body}."
        secret = key.as_pem(private=False)
        return f"{head}.{body}.{b64(hmac.new(secret, signing_input, hashlib.sha256).digest())}"


def new_key(kid: str) -> RSAKey:
    return RSAKey.generate_key(2048, parameters={"kid": kid, "use": "sig"})


@dataclass
class WorkloadIssuers:
    """The three issuers on one local TLS server; start with `start`."""

    tls_dir: Path
    port: int = field(default_factory=free_port)
    issuers: dict[str, Issuer] = field(default_factory=dict)
    _served: ThreadedServer | None = None

    def __post_init__(self) -> None:
        self.tls = ensure_local_tls(self.tls_dir, ["127.0.0.1"])
        for kind in KINDS:
            url = f"https://127.0.0.1:{self.port}/{kind}"
            self.issuers[kind] = Issuer(kind, url, [new_key(f"{kind}-key-1")])

    @property
    def ca_file(self) -> Path:
        return self.tls.ca_cert

    def __getitem__(self, kind: str) -> Issuer:
        return self.issuers[kind]

    async def _route(self, request: Request) -> Response:
        kind, _, rest = request.url.path.lstrip("/").partition("/")
        issuer = self.issuers.get(kind)
        if issuer is None:
            return Response(status_code=404)
        if "/" + rest == "/.well-known/openid-configuration":
            issuer.discovery_fetches += 1
            return JSONResponse(issuer.document())
        if "/" + rest == JWKS_PATHS[kind]:
            issuer.jwks_fetches += 1
            media = "application/jwk-set+json" if kind == "kubernetes" else "application/json"
            return Response(json.dumps(issuer.jwks()), media_type=media)
        return Response(status_code=404)

    def start(self) -> WorkloadIssuers:
        app = Starlette(routes=[Route("/{path:path}", self._route)])
        self._served = ThreadedServer(app, self.port, self.tls.cert, self.tls.key)
        self._served.start("the workload issuers")
        return self

    def stop(self) -> None:
        if self._served is not None:
            self._served.stop()
