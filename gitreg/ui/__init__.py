"""The web UI: server-rendered pages over the browse records.

Like `gitreg/api/`, an HTTP layer that only translates requests: the data
comes from the services (the catalog's for modules and providers), never a
store, and the pages show exactly what the browse API serves to the same
reader. Jinja2 and Pygments are imported on the first page, so an API-only
worker does not carry them (docs/ui.md, docs/performance.md "Web UI").
"""
