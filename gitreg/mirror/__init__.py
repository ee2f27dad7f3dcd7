"""The provider network mirror (docs/mirror.md): a verified pull-through
cache of provider registries, served with the provider network mirror protocol
(spec: provider-network-mirror-protocol.md), plus `gitreg mirror sync|export`.

    addresses    provider addresses and platforms
    constraints  Terraform's version constraint language, exactly
    config       required_providers and .terraform.lock.hcl from a configuration
    options      the mirror's settings: upstream mapping, allow list, platforms, limits
    upstreams    the `[upstreams]` table and `--upstream` entries
    upstream     the outbound client: discovery, providers.v1, bounded https fetches
    verify       signature, SHA256SUMS and zip checks before anything is kept
    hosted       gitreg's own providers (gitreg.providers) as mirror entries
    bodies       the protocol's file names and JSON bodies
    singleflight one fetch per missing thing however many requests wait
    fetch        one package downloaded into the blob store and verified there
    fill         a package being pulled through, readable by requests as it arrives
    downloads    what a file request gets; VERSION.json with signed zip URLs
    sync         `mirror sync`: the versions `terraform init` would pick, fetched
    service      the cache itself: fills, stale-if-error, verified storage
    export       the static mirror layout
"""
