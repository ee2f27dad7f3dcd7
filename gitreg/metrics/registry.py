"""The Prometheus metric objects of gitreg, created on import.

Imported only by `gitreg.metrics.enable()`, i.e. by processes that serve HTTP:
the CLI (`gitreg sync`, `repo add`, ...) never loads prometheus_client, and
with `serve --workers N` only the workers write metric files, not the
supervisor or its short-lived start-up children. Names, labels and units are
listed in docs/operations.md ("Metrics").
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

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
SEMVER_BREAKING = Counter(
    "gitreg_semver_breaking",
    "Module versions with a breaking change in a minor or patch release, by outcome"
    " (labelled, refused, allowed).",
    ("outcome",),
)
DOWNLOADS = Counter(
    "gitreg_downloads",
    "Download answers, by kind (module, provider); `module` (the module or provider"
    " address) only with metrics_per_module.",
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
    "Version lists served stale because the upstream failed (stale-if-error).",
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
    " process's commit), full (MAX_BYTES, oldest first), not_found_full (MAX_NOT_FOUND).",
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
