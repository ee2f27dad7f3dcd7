"""Prometheus metrics (issue 15): the one module that talks to prometheus_client.

Domain code calls the small functions below (`published`, `mirror_hit`, ...),
never prometheus_client, so the domain stays free of HTTP and of the
exposition format; `gitreg/api/metrics.py` and `serve --metrics-listen`
expose them. docs/operations.md ("Metrics") lists every metric with its labels
and units; deploy/grafana/gitreg-dashboard.json uses them.

Cardinality is bounded by construction: routes are templates (unmatched paths
are one value, `UNMATCHED`), methods outside the HTTP set are `other`, and no
label holds a module name unless `metrics_per_module = true`, which fills the
`module` label of the download and publish counters (empty otherwise, which
Prometheus treats as no label at all).

With `serve --workers N > 1` every worker writes its values to files in
`PROMETHEUS_MULTIPROC_DIR` (set up by `gitreg serve` under the data dir before
any worker starts, since prometheus_client picks its storage at import) and
whoever answers a scrape sums them (`registry()`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram, multiprocess

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
UNMATCHED = "(no route)"  # the access log's name for a path no route matched
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
# Request latencies in seconds: cache hits take well under a millisecond
# (docs/performance.md), archive downloads and webhook group commits longer.
_LATENCY = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
_SLOW = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900)

HTTP_REQUESTS = Counter(
    "gitreg_http_requests",
    "HTTP requests answered, by route template, method and status code.",
    ("route", "method", "status"),
)
HTTP_DURATION = Histogram(
    "gitreg_http_request_duration_seconds",
    "Time from the request's arrival to the response's last byte, by route template.",
    ("route",),
    buckets=_LATENCY,
)
WEBHOOK_DELIVERIES = Counter(
    "gitreg_webhook_deliveries",
    "Webhook deliveries by forge (github, gitlab, gitea, bitbucket, git) and result"
    " (queued, duplicate, ignored, ok, rejected, unavailable).",
    ("forge", "result"),
)
JOBS_QUEUED = Counter(
    "gitreg_jobs_queued", "Jobs added to the ingestion queue, by kind.", ("kind",)
)
JOBS_RUNNING = Gauge(
    "gitreg_jobs_running",
    "Jobs running on this server's job threads now.",
    multiprocess_mode="livesum",
)
JOBS_FINISHED = Counter(
    "gitreg_jobs_finished",
    "Job runs that ended, by result: done, retried (failed, retry scheduled),"
    " failed (given up), deferred (waiting for disk space).",
    ("result",),
)
JOB_DURATION = Histogram(
    "gitreg_job_duration_seconds", "Duration of one job run, by result.", ("result",), buckets=_SLOW
)
JOB_QUEUE = Gauge(
    "gitreg_job_queue",
    "Jobs in the shared queue by state, as last read by a job runner (every few seconds).",
    ("state",),
    multiprocess_mode="mostrecent",
)
PUBLISHES = Counter(
    "gitreg_publishes",
    "Versions published, by kind (module, provider); `module` is the address only"
    " with metrics_per_module.",
    ("kind", "module"),
)
DOWNLOADS = Counter(
    "gitreg_downloads",
    "Download locations handed out, by kind (module); `module` only with metrics_per_module.",
    ("kind", "module"),
)
ARCHIVE_BUILD = Histogram(
    "gitreg_archive_build_seconds",
    "Time to build and store one module archive from git objects.",
    buckets=_SLOW,
)
MIRROR_HITS = Counter(
    "gitreg_mirror_hits",
    "Mirror lookups answered from what gitreg holds, by what (index, package).",
    ("what",),
)
MIRROR_MISSES = Counter(
    "gitreg_mirror_misses",
    "Mirror lookups that went to the upstream, by what (index, package).",
    ("what",),
)
MIRROR_STALE = Counter(
    "gitreg_mirror_stale_served",
    "Version lists served stale because the upstream failed (stale-if-error, M3).",
)
UPSTREAM_BYTES = Counter(
    "gitreg_mirror_upstream_bytes", "Bytes received from mirror upstreams (bodies)."
)
UPSTREAM_ERRORS = Counter(
    "gitreg_upstream_errors",
    "Failed mirror upstream requests, by kind (timeout, not_found, network, tls, status,"
    " too_large, invalid).",
    ("kind",),
)
BLOB_WRITTEN = Counter("gitreg_blob_written_bytes", "Bytes stored in the blob store.")
BLOB_SERVED = Counter(
    "gitreg_blob_served_bytes", "Blob bytes sent to clients (archives, provider and mirror zips)."
)
CACHE_ENTRIES = Gauge(
    "gitreg_cache_entries",
    "Entries in the metadata cache (gitreg/cache.py), summed over live workers.",
    multiprocess_mode="livesum",
)
CACHE_EVICTIONS = Counter(
    "gitreg_cache_evictions",
    "Metadata cache entries dropped, by reason: invalidated (a publish or another"
    " process's commit), full (MAX_ENTRIES), not_found_full (MAX_NOT_FOUND).",
    ("reason",),
)
AUTH_FAILURES = Counter(
    "gitreg_auth_failures",
    "Failed authentications, by kind (token, signature, webhook).",
    ("kind",),
)

# Every metric above, for the dashboard test and docs/operations.md.
REGISTERED = (
    HTTP_REQUESTS,
    HTTP_DURATION,
    WEBHOOK_DELIVERIES,
    JOBS_QUEUED,
    JOBS_RUNNING,
    JOBS_FINISHED,
    JOB_DURATION,
    JOB_QUEUE,
    PUBLISHES,
    DOWNLOADS,
    ARCHIVE_BUILD,
    MIRROR_HITS,
    MIRROR_MISSES,
    MIRROR_STALE,
    UPSTREAM_BYTES,
    UPSTREAM_ERRORS,
    BLOB_WRITTEN,
    BLOB_SERVED,
    CACHE_ENTRIES,
    CACHE_EVICTIONS,
    AUTH_FAILURES,
)

# The hot path's label children, looked up once per (route, method, status).
_request_children: dict[tuple[str, str, int], tuple[Counter, Histogram]] = {}
_per_module = False


def configure(per_module: bool) -> None:
    """Whether download and publish counters carry the module address."""
    global _per_module
    _per_module = per_module


def registry() -> CollectorRegistry:
    """What a scrape reports: this process's metrics, or with several workers
    the sum over every worker's files."""
    if not os.environ.get(MULTIPROC_ENV):
        return REGISTRY
    collected = CollectorRegistry()
    multiprocess.MultiProcessCollector(collected)  # type: ignore[no-untyped-call]
    return collected


def process_exiting() -> None:
    """A worker stopping: its `livesum` gauges (jobs running, cache entries)
    stop counting; its counters stay in the sums."""
    if os.environ.get(MULTIPROC_ENV):
        multiprocess.mark_process_dead(os.getpid())  # type: ignore[no-untyped-call]


def request(route: str, method: str, status: int, seconds: float) -> None:
    """One answered HTTP request; called once per request by the access log."""
    key = (route, method, status)
    children = _request_children.get(key)
    if children is None:
        verb = method if method in _METHODS else "other"
        children = (
            HTTP_REQUESTS.labels(route, verb, str(status)),
            HTTP_DURATION.labels(route),
        )
        if len(_request_children) < 10_000:  # bounded like the labels themselves
            _request_children[key] = children
    children[0].inc()
    children[1].observe(seconds)


def webhook_delivery(forge: str, result: str) -> None:
    WEBHOOK_DELIVERIES.labels(forge, result).inc()


def job_queued(kind: str) -> None:
    JOBS_QUEUED.labels(kind).inc()


def job_started() -> None:
    JOBS_RUNNING.inc()


def job_finished(result: str, seconds: float) -> None:
    JOBS_RUNNING.dec()
    JOBS_FINISHED.labels(result).inc()
    JOB_DURATION.labels(result).observe(seconds)


def job_queue(counts: Mapping[str, int]) -> None:
    for state, count in counts.items():
        JOB_QUEUE.labels(state).set(count)


def published(kind: str, module: str) -> None:
    PUBLISHES.labels(kind, module if _per_module else "").inc()


def downloaded(kind: str, module: str) -> None:
    DOWNLOADS.labels(kind, module if _per_module else "").inc()


def archive_built(seconds: float) -> None:
    ARCHIVE_BUILD.observe(seconds)


def mirror_hit(what: str) -> None:
    MIRROR_HITS.labels(what).inc()


def mirror_miss(what: str) -> None:
    MIRROR_MISSES.labels(what).inc()


def mirror_stale_served() -> None:
    MIRROR_STALE.inc()


def upstream_bytes(count: int) -> None:
    UPSTREAM_BYTES.inc(count)


def upstream_error(kind: str) -> None:
    UPSTREAM_ERRORS.labels(kind).inc()


def blob_written(count: int) -> None:
    BLOB_WRITTEN.inc(count)


def blob_served(count: int) -> None:
    BLOB_SERVED.inc(count)


def cache_size(entries: int) -> None:
    CACHE_ENTRIES.set(entries)


def cache_evicted(reason: str, count: int) -> None:
    if count:
        CACHE_EVICTIONS.labels(reason).inc(count)


def auth_failed(kind: str) -> None:
    AUTH_FAILURES.labels(kind).inc()
