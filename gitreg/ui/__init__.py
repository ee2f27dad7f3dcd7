"""The web UI (issue 13): server-rendered pages over the browse records.

Like `gitreg/api/`, an HTTP layer that only translates requests: the data
comes from `gitreg/catalog/records.py` and the services, never SQL, and the
pages show exactly what the browse API serves to the same reader. Jinja2 and
Pygments are imported on the first page, so an API-only worker does not
carry them (docs/ui.md, docs/performance.md "Web UI").
"""
