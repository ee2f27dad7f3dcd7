"""Checks of what the index holds: webhook secrets and provider signing keys.
Secrets are only tested for being set; their values are never printed."""

from __future__ import annotations

from collections.abc import Sequence

from gitreg.doctor.results import CheckResult, fail, ok, warn
from gitreg.providers.store import KeyRecord
from gitreg.secret_refs import resolve_secret
from gitreg.settings import Settings
from gitreg.storage.records import RepoRecord


def check_webhook_secrets(settings: Settings, repos: Sequence[RepoRecord]) -> CheckResult:
    name = "webhook_secrets"
    if settings.webhook_secret:
        # An env:/file: reference that reads as empty refuses every delivery.
        if not resolve_secret(settings.webhook_secret):
            return fail(
                name,
                "webhook_secret is a reference that reads as empty: set the variable"
                " or fill the file it names",
            )
        return ok(name, "a global webhook_secret is set")
    active = [r for r in repos if r.removed_at is None]
    if not active:
        return ok(name, "no repository is registered, and no global webhook_secret is set")
    without = [r for r in active if not r.webhook_secret]
    if not without:
        return ok(name, f"each of {len(active)} repository(ies) has its own secret")
    ids = ", ".join(str(r.id) for r in without[:10])
    return warn(
        name,
        f"{len(without)} repository(ies) have no webhook secret (ids {ids}) and there is"
        " no global webhook_secret: their deliveries are refused and new tags wait for the"
        " reconcile pass; set webhook_secret, or `gitreg repo add URL --webhook-secret ...` again",
    )


def check_signing_keys(settings: Settings, keys: Sequence[KeyRecord]) -> CheckResult:
    name = "signing_keys"
    active = [k for k in keys if k.retired_at is None]
    if not active:
        return ok(name, "no provider signing key is registered")
    # Terraform 1.0.x verifies RSA signatures only ("unsupported feature: public key type").
    other = [k for k in active if not all(a.startswith("rsa") for a in k.algorithms)]
    if not other:
        return ok(name, f"all {len(active)} active key(s) are RSA")
    detail = ", ".join(f"{k.namespace}/{k.key_id} ({'+'.join(k.algorithms)})" for k in other)
    advice = (
        " Terraform 1.0.x cannot verify them: generate an RSA key"
        " (`gitreg key generate NAMESPACE`) and retire these"
    )
    if settings.allow_unverifiable_keys:
        return warn(name, f"non-RSA key(s) allowed by allow_unverifiable_keys: {detail}.{advice}")
    return fail(name, f"non-RSA key(s): {detail}.{advice}")
