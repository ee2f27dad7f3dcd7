"""OCI: every module and provider release served read-only over the OCI
Distribution Specification v1.1 under `/v2/`, in the shapes OpenTofu's `oci://`
module sources and `oci_mirror` provider installation read (docs/oci.md).

`names` maps repository names and tags to gitreg's addresses and versions,
`manifests` writes the manifests and indexes, `zips` turns a module archive
into the deterministic zip its one layer is, `grants` issues and reads the
short-lived pull tokens of the `/v2/token` endpoint, and `service` (`Oci`) is
what the `/v2/` handlers and the registry protocols call.
"""
