"""Checks that reach other machines: public_url, mirror upstreams, the clock
against them, and every repository's remote. Each takes a short timeout."""

from __future__ import annotations

import datetime
import json
import re
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from email.utils import parsedate_to_datetime

from gitreg.doctor.results import CheckResult, fail, ok, warn
from gitreg.errors import GitregError
from gitreg.git.backend import GitBackend
from gitreg.mirror.options import mirror_options
from gitreg.mirror.upstream import outbound_ssl_context
from gitreg.settings import CA_CERT_NAME, Settings
from gitreg.storage.records import RepoRecord

DISCOVERY = "/.well-known/terraform.json"
# Signed URLs live signed_url_ttl seconds and tokens expire: a minute off starts to show.
MAX_SKEW = 60.0
# Credentials in a remote's URL (https://USER:TOKEN@host) are not for a report.
_USERINFO = re.compile(r"//[^/@\s]+@")
REMOTE_CHECKS_AT_ONCE = 4  # ls-remote in parallel, small enough not to look like a scan


@dataclass(frozen=True)
class Probe:
    """One GET of a discovery document: the answer, or why there was none."""

    url: str
    status: int | None
    error: str
    date: datetime.datetime | None
    discovery: bool  # the body is a Terraform discovery document
    elapsed: float


def _context(settings: Settings) -> ssl.SSLContext:
    """The system's roots (or SSL_CERT_FILE), plus gitreg's local CA when it
    serves with one, since users were told to trust that CA."""
    context = outbound_ssl_context()
    local_ca = settings.tls_dir / CA_CERT_NAME
    if settings.tls_cert is None and local_ca.is_file():
        context.load_verify_locations(cafile=str(local_ca))
    return context


def probe(base_url: str, timeout: float, context: ssl.SSLContext) -> Probe:
    url = base_url.rstrip("/") + DISCOVERY
    started = time.monotonic()
    try:
        with urllib.request.urlopen(url, timeout=timeout, context=context) as response:  # noqa: S310
            status, headers, body = response.status, response.headers, response.read(65536)
    except urllib.error.HTTPError as exc:
        status, headers, body = exc.code, exc.headers, b""
        exc.close()
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        return Probe(url, None, str(reason), None, False, time.monotonic() - started)
    try:
        date = parsedate_to_datetime(headers.get("Date", ""))
    except (TypeError, ValueError):
        date = None
    try:
        document = json.loads(body)
    except ValueError:
        document = None
    found = isinstance(document, dict) and any(k.endswith(".v1") for k in document)
    return Probe(url, status, "", date, found, time.monotonic() - started)


def check_public_url(settings: Settings, timeout: float) -> tuple[CheckResult, Probe | None]:
    name = "public_url"
    if not settings.public_url:
        return warn(
            name,
            "public_url is not set: download URLs follow each request's Host header;"
            " set it to the URL Terraform users reach this registry at",
        ), None
    answer = probe(settings.public_url, timeout, _context(settings))
    if answer.status is None:
        return fail(
            name,
            f"{answer.url} is unreachable from this machine ({answer.error}): check DNS,"
            " the proxy and the firewall, or that `gitreg serve` runs",
        ), answer
    if answer.status != 200 or not answer.discovery:
        return fail(
            name,
            f"{answer.url} answered {answer.status} without Terraform's discovery"
            " document: the proxy does not route it to gitreg",
        ), answer
    return ok(name, f"{answer.url} answers ({answer.elapsed:.2f} s)"), answer


def upstream_urls(settings: Settings) -> list[str]:
    """Mapped upstreams, and hosts named literally in mirror_allow (the
    default, registry.terraform.io), which the mirror reaches at https://HOST."""
    options = mirror_options(settings)
    urls = dict.fromkeys(options.upstreams.values())
    for pattern in options.allow:
        host = pattern.split("/", 1)[0]
        if host and not any(c in host for c in "*?[") and host not in options.upstreams:
            urls[options.base_url(host)] = None
    return list(urls)


def check_mirror_upstreams(settings: Settings, timeout: float) -> tuple[CheckResult, list[Probe]]:
    name = "mirror_upstream"
    try:
        urls = upstream_urls(settings)
    except GitregError as exc:
        return fail(name, f"the mirror settings are invalid: {exc}"), []
    if not urls:
        return ok(name, "no mirror upstream is configured"), []
    context = outbound_ssl_context()
    answers = [probe(url, timeout, context) for url in urls]
    down = [a for a in answers if a.status is None or a.status >= 500]
    if down:
        detail = "; ".join(f"{a.url}: {a.error or a.status}" for a in down)
        return fail(
            name,
            f"unreachable: {detail}. The mirror serves only what it cached; check the"
            " proxy/firewall, or remove the host from mirror_allow / [upstreams]",
        ), answers
    return ok(name, f"{len(answers)} upstream(s) answer: {', '.join(urls)}"), answers


def check_clock(probes: Sequence[Probe], now: datetime.datetime | None = None) -> CheckResult:
    """Compares with the Date header of the first answer that had one."""
    name = "clock"
    dated = [p for p in probes if p.date is not None]
    if not dated:
        return warn(name, "no reachable public_url or upstream sent a Date to compare with")
    source = dated[0]
    assert source.date is not None
    moment = now or datetime.datetime.now(datetime.UTC)
    # The Date was stamped while the request ran: allow for the round trip.
    skew = abs((moment - source.date).total_seconds()) - source.elapsed
    if skew > MAX_SKEW:
        return fail(
            name,
            f"this clock is {skew:.0f} s off {source.url}'s: signed URLs and tokens"
            " misbehave; enable NTP (timedatectl set-ntp true)",
        )
    return ok(name, f"within {MAX_SKEW:.0f} s of {source.url}")


def check_remotes(repos: Sequence[RepoRecord], backend: GitBackend) -> CheckResult:
    name = "remotes"
    active = [r for r in repos if r.removed_at is None]
    if not active:
        return ok(name, "no repository is registered")

    def reach(repo: RepoRecord) -> str:
        try:
            backend.remote_tags(repo.url)
        except GitregError as exc:
            return _USERINFO.sub("//***@", str(exc))
        return ""

    with ThreadPoolExecutor(max_workers=REMOTE_CHECKS_AT_ONCE) as pool:
        errors = [(r, e) for r, e in zip(active, pool.map(reach, active), strict=True) if e]
    if errors:
        detail = "; ".join(f"repo {r.id}: {e}" for r, e in errors)
        return fail(
            name,
            f"{len(errors)} of {len(active)} remote(s) unreachable: {detail}."
            " Fix the remote's URL or credentials, or `gitreg repo remove` it",
        )
    return ok(name, f"all {len(active)} remote(s) answer ls-remote")
