"""Prometheus metrics: the API the rest of gitreg calls.

Domain code calls the small functions below (`published`, `mirror_hit`, ...),
never prometheus_client, so the domain stays free of HTTP and of the
exposition format; `gitreg/metrics/http.py` and `serve --metrics-listen`
expose them. They do nothing until `enable()` (called by `create_app`): a
CLI process has nobody to scrape it, and so never pays for importing
prometheus_client (docs/performance.md, "Metrics").

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
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
UNMATCHED = "(no route)"  # the access log's name for a path no route matched
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})

# gitreg.metrics.registry once enabled; None in processes nobody scrapes.
_m: Any = None
_per_module = False
# The hot path's label children, looked up once per (route, method, status).
_request_children: dict[tuple[str, str, int], tuple[Any, Any]] = {}
# The download counter's children, by (kind, module or ""): `labels()` on every
# download answer was a measurable part of it (docs/performance.md, "Download
# answer and the text access line").
_download_children: dict[tuple[str, str], Any] = {}


def enable(per_module: bool) -> None:
    """Start recording; `per_module`: download and publish counters carry the module address."""
    global _m, _per_module
    from gitreg.metrics import registry as metrics_registry

    _m = metrics_registry
    _per_module = per_module


def registry() -> CollectorRegistry:
    """What a scrape reports: this process's metrics, or with several workers
    the sum over every worker's files."""
    from prometheus_client import REGISTRY, CollectorRegistry, multiprocess

    if not os.environ.get(MULTIPROC_ENV):
        return REGISTRY
    collected = CollectorRegistry()
    multiprocess.MultiProcessCollector(collected)  # type: ignore[no-untyped-call]
    return collected


def process_exiting() -> None:
    """A worker stopping: its `livesum` gauges (jobs running, cache entries)
    stop counting; its counters stay in the sums."""
    if _m is not None and os.environ.get(MULTIPROC_ENV):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(os.getpid())  # type: ignore[no-untyped-call]


def request(route: str, method: str, status: int, seconds: float) -> None:
    """One answered HTTP request; called once per request by the access log."""
    if _m is None:
        return
    key = (route, method, status)
    children = _request_children.get(key)
    if children is None:
        verb = method if method in _METHODS else "other"
        children = (
            _m.HTTP_REQUESTS.labels(route, verb, str(status)),
            _m.HTTP_DURATION.labels(route),
        )
        if len(_request_children) < 10_000:  # bounded like the labels themselves
            _request_children[key] = children
    children[0].inc()
    children[1].observe(seconds)


def webhook_delivery(forge: str, result: str) -> None:
    if _m is not None:
        _m.WEBHOOK_DELIVERIES.labels(forge, result).inc()


def job_queued(kind: str) -> None:
    if _m is not None:
        _m.JOBS_QUEUED.labels(kind).inc()


def job_started() -> None:
    if _m is not None:
        _m.JOBS_RUNNING.inc()


def job_finished(result: str, seconds: float) -> None:
    if _m is not None:
        _m.JOBS_RUNNING.dec()
        _m.JOBS_FINISHED.labels(result).inc()
        _m.JOB_DURATION.labels(result).observe(seconds)


def job_queue(counts: Mapping[str, int]) -> None:
    if _m is not None:
        for state, count in counts.items():
            _m.JOB_QUEUE.labels(state).set(count)


def published(kind: str, module: str) -> None:
    if _m is not None:
        _m.PUBLISHES.labels(kind, module if _per_module else "").inc()


def semver_breaking(outcome: str) -> None:
    """A version with a breaking change in a minor or patch release: "labelled"
    (published), "refused" or "allowed" (published by `allow-breaking`)."""
    if _m is not None:
        _m.SEMVER_BREAKING.labels(outcome).inc()


def downloaded(kind: str, module: str) -> None:
    if _m is None:
        return
    key = (kind, module if _per_module else "")
    child = _download_children.get(key)
    if child is None:
        child = _m.DOWNLOADS.labels(*key)
        if len(_download_children) < 10_000:  # bounded like the labels themselves
            _download_children[key] = child
    child.inc()


def archive_built(seconds: float) -> None:
    if _m is not None:
        _m.ARCHIVE_BUILD.observe(seconds)


def mirror_hit(what: str) -> None:
    if _m is not None:
        _m.MIRROR_HITS.labels(what).inc()


def mirror_miss(what: str) -> None:
    if _m is not None:
        _m.MIRROR_MISSES.labels(what).inc()


def mirror_stale_served() -> None:
    if _m is not None:
        _m.MIRROR_STALE.inc()


def upstream_bytes(count: int) -> None:
    if _m is not None:
        _m.UPSTREAM_BYTES.inc(count)


def upstream_error(kind: str) -> None:
    if _m is not None:
        _m.UPSTREAM_ERRORS.labels(kind).inc()


def blob_written(count: int) -> None:
    if _m is not None:
        _m.BLOB_WRITTEN.inc(count)


def blob_served(count: int) -> None:
    if _m is not None:
        _m.BLOB_SERVED.inc(count)


def cache_size(entries: int) -> None:
    if _m is not None:
        _m.CACHE_ENTRIES.set(entries)


def cache_evicted(reason: str, count: int) -> None:
    if _m is not None and count:
        _m.CACHE_EVICTIONS.labels(reason).inc(count)


def auth_failed(kind: str) -> None:
    if _m is not None:
        _m.AUTH_FAILURES.labels(kind).inc()
