"""In-house providers: validation, signing, forge releases and CI uploads (docs/providers.md).

names      addresses, versions, platforms and goreleaser file names
checksums  SHA256SUMS parsing and formatting
package    zip layout checks and h1/zh hashes, with zip-bomb limits
signing    OpenPGP through pysequoia: key checks, detached signatures
keys       per-namespace keys: register, generate, retire; private key files
forge_config  the `[forges.NAME]` tables, parsed once with the settings
forges     GitHub and GitLab releases APIs through httpx
collect    a version's files into a candidate: dist dirs, staged uploads, release assets
verify     checksums, signature against registered keys, package and manifest checks
record     blobs then index rows, gitreg's own signing, no-op or 409 on republish
ingest     the one publish path every source goes through, and forge release sync
outcomes   what a sync of forge releases did, release by release
uploads    staging for CI uploads over HTTP
downloads  the `providers.v1` answers: version lists, downloads, served files
store      what the feature needs from the index; store_sql its SQL implementation
service    what the outside calls: protocol answers, uploads, keys, publishing, yanks
http, cli  the protocol's and the uploads' routes; the provider and key commands
"""
