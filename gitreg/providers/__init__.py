"""In-house providers: validation, signing, forge releases and CI uploads (docs/providers.md).

names      addresses, versions, platforms and goreleaser file names
checksums  SHA256SUMS parsing and formatting
package    zip layout checks and h1/zh hashes, with zip-bomb limits
signing    OpenPGP through pysequoia: key checks, detached signatures
keys       per-namespace keys: register, generate, retire; private key files
forges     GitHub and GitLab releases APIs through httpx
ingest     the one validation and publish path every source goes through
uploads    staging for CI uploads over HTTP
webhook    release events (GitHub `release`, GitLab `Release Hook`) to work
"""
