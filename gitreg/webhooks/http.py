"""The webhook endpoints: size cap, JSON, authentication, then a durable job.

Order of checks, for every forge: the body is read up to a cap (413 beyond),
must be a JSON object (400), names a repository that is looked up by its
configured forge name, and must carry that repository's secret, or the global
default (401 otherwise; no secret at all refuses everything). Only then is the
event interpreted: ping and unused events get 200 and change nothing; tag events
become a job, stored before the 202: the jobs go to the group commit
(`Repositories.enqueue_syncs`), and the request awaits the commit holding them
without holding a thread; a failed commit answers 503 with Retry-After. The
database work runs off the event loop; no git work happens here.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gitreg.api.credentials import credentials
from gitreg.api.responses import json_response
from gitreg.api.services import services
from gitreg.audit import actor as actors
from gitreg.audit.actor import SYSTEM, Actor
from gitreg.auth.tokens import Principal, Scope
from gitreg.canonical_json import json_bytes
from gitreg.errors import BadRequest, GitregError, PayloadTooLarge, Unauthorized
from gitreg.metrics import service as metrics
from gitreg.numbers import declared_length
from gitreg.repositories.service import Repositories
from gitreg.storage.records import RepoRecord
from gitreg.webhooks.bitbucket import Bitbucket
from gitreg.webhooks.events import (
    TAG_REF,
    Delivery,
    Forge,
    change_from_shas,
    ignore,
    objects,
    tag_delivery,
    text,
)
from gitreg.webhooks.gitea import Gitea
from gitreg.webhooks.github import GitHub
from gitreg.webhooks.gitlab import GitLab

log = logging.getLogger("gitreg.webhooks")

FORGES: tuple[Forge, ...] = (GitHub(), GitLab(), Gitea(), Bitbucket())


async def read_json(request: Request, limit: int) -> tuple[bytes, dict[str, Any]]:
    """The raw body and it as a JSON object, refusing oversize bodies before reading them
    whole and anything that is not a JSON object."""
    declared = declared_length(request.headers.get("content-length", ""))
    if declared is not None and declared > limit:
        raise PayloadTooLarge(f"body over {limit} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge(f"body over {limit} bytes")
        chunks.append(chunk)
    body = b"".join(chunks)
    try:
        payload = json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise BadRequest(
            "body is not JSON; set the webhook's content type to application/json"
        ) from exc
    if not isinstance(payload, dict):
        raise BadRequest("body must be a JSON object")
    return body, payload


@dataclass(frozen=True)
class Pending:
    """A verified delivery that makes jobs: stored by the group commit (off
    this thread), and only then answered."""

    repos: list[RepoRecord]
    source: str
    delivery: Delivery
    delivery_id: str
    actor: Actor = SYSTEM  # who asked: a forge's signed delivery names nobody


# What the blocking part decided: an answer now, or jobs to store first.
Outcome = tuple[int, dict[str, Any]] | Pending


async def _store(repositories: Repositories, pending: Pending, forge: str) -> Response:
    """Wait until the transaction holding this delivery's jobs committed; 503
    with Retry-After when it failed (then nothing of it was stored)."""
    reason = pending.delivery.describe()
    # QueueUnavailable / StorageFull: the app's GitregError handler answers 503
    # with Retry-After.
    stored = await asyncio.wrap_future(
        repositories.enqueue_syncs(
            pending.repos, pending.source, reason, pending.delivery_id, pending.actor
        )
    )
    jobs = []
    for repo, outcome in zip(pending.repos, stored, strict=True):
        jobs.append({"id": outcome.job_id, "repository": repo.url, "status": outcome.status})
        log.info("%s: job %d %s for %s", reason, outcome.job_id, outcome.status, repo.url)
    fresh = any(j["status"] != "duplicate" for j in jobs)
    answer = {"status": "queued" if fresh else "duplicate", "jobs": jobs}
    metrics.webhook_delivery(forge, str(answer["status"]))
    return json_response(json_bytes(answer), status=202 if fresh else 200)


async def _answer(repositories: Repositories, outcome: Outcome, forge: str) -> Response:
    """`forge` names the endpoint in `gitreg_webhook_deliveries_total`."""
    if isinstance(outcome, Pending):
        return await _store(repositories, outcome, forge)
    status, answer = outcome
    metrics.webhook_delivery(forge, str(answer["status"]))
    return json_response(json_bytes(answer), status=status)


def accept_forge_delivery(
    repositories: Repositories,
    forge: Forge,
    headers: Mapping[str, str],
    body: bytes,
    payload: dict[str, Any],
) -> Outcome:
    """Blocking part of a forge delivery (database only): authenticate, then act."""
    name = forge.repository(payload)
    repos = repositories.verified_repos(
        name, lambda secret: forge.verify(headers, body, secret), forge.name
    )
    delivery = forge.read(headers, payload)
    if delivery.kind == "ping":
        return 200, {"status": "ok", "message": "pong"}
    if delivery.kind == "ignore":
        return 200, {"status": "ignored", "reason": delivery.note}
    if not repos:
        if name is None:
            return 200, {"status": "ignored", "reason": "payload names no repository"}
        repos = [repositories.auto_register(name)]
    return Pending(repos, forge.name, delivery, forge.delivery_id(headers))


@contextlib.asynccontextmanager
async def _counted(forge: str) -> AsyncIterator[None]:
    """Count a delivery refused with an error: `rejected` for a 4xx (bad
    signature, unknown repository, malformed body), `unavailable` for a 503
    (the queue could not store it; the forge retries). Answers are counted
    by `_answer` with their status."""
    try:
        yield
    except GitregError as exc:
        metrics.webhook_delivery(forge, "rejected" if exc.status < 500 else "unavailable")
        if isinstance(exc, Unauthorized) and forge != "git":  # git's token: counted by Access
            metrics.auth_failed("webhook")
        raise


def forge_endpoint(forge: Forge) -> Route:
    async def receive(request: Request) -> Response:
        svc = services(request)
        async with _counted(forge.name):
            body, payload = await read_json(request, svc.settings.webhook_max_bytes)
            outcome = await run_in_threadpool(
                accept_forge_delivery, svc.repositories, forge, request.headers, body, payload
            )
            return await _answer(svc.repositories, outcome, forge.name)

    return Route(f"/webhooks/{forge.name}", receive, methods=["POST"], name=f"webhook-{forge.name}")


# -- hooks/post-receive ------------------------------------------------------


def accept_notification(
    repositories: Repositories, payload: dict[str, Any], principal: Principal
) -> Outcome:
    """`{"repository": "OWNER/REPO", "refs": [{"ref", "old", "new"}], "delivery": id}`
    from hooks/post-receive, from the holder of a publish token. The token must
    cover every namespace the repository publishes into (403 otherwise)."""
    name = text(payload, "repository")
    if not name:
        raise BadRequest("field 'repository' is required")
    changes = [
        change_from_shas(ref[len(TAG_REF) :], text(r, "old"), text(r, "new"))
        for r in objects(payload, "refs")
        if (ref := text(r, "ref") or "").startswith(TAG_REF)
    ]
    delivery = (
        tag_delivery("hook", "post-receive", changes)
        if changes
        else ignore("hook", "post-receive", "no tag changed")
    )
    if delivery.kind == "ignore":
        return 200, {"status": "ignored", "reason": delivery.note}
    repos = repositories.publishing_repos(name, principal)
    # The request's actor (set when its token was authenticated) asked for the syncs.
    return Pending(repos, "hook", delivery, text(payload, "delivery") or "", actors.current())


async def notify(request: Request) -> Response:
    svc = services(request)
    async with _counted("git"):
        # The token first: nothing of an unauthenticated body is read or parsed.
        principal = await svc.access.authenticate(credentials(request), Scope.publish)
        _, payload = await read_json(request, svc.settings.webhook_max_bytes)
        outcome = await run_in_threadpool(accept_notification, svc.repositories, payload, principal)
        return await _answer(svc.repositories, outcome, "git")


def routes() -> list[Route]:
    return [
        *(forge_endpoint(forge) for forge in FORGES),
        Route("/webhooks/git", notify, methods=["POST"], name="webhook-git"),
    ]
