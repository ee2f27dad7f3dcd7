"""The statement gitreg signs for each module version: an in-toto Statement v1
with a SLSA Provenance v1 predicate (docs/verify.md has an example).

Its subjects are the archive, by `sha256`, and the tree Terraform extracts
from it, by `dirHash` (the `h1:` of gitreg/verify/dirhash.py). The predicate
says where the version came from (repository, tag, tag object, commit,
subdirectory, the tag-to-version rule) and who built it (the registry's URL
and gitreg's version) and when.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gitreg import __version__
from gitreg.canonical_json import json_bytes

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://slsa.dev/provenance/v1"
BUILD_TYPE = "urn:gitreg:module-archive:v1"
LOCAL_BUILDER = "urn:gitreg:registry"  # the builder id when public_url is unset


@dataclass(frozen=True)
class Provenance:
    """What the statement of one version says."""

    address: str  # namespace/name/system
    version: str
    archive_sha256: str
    dir_hash: str
    repository: str
    tag: str
    tag_sha: str  # the annotated tag object, or the commit for a lightweight tag
    commit: str
    subdir: str
    tag_prefix: str
    archive_scope: str
    builder: str  # the registry's URL
    published_at: str  # RFC 3339, UTC


def statement(p: Provenance) -> dict[str, Any]:
    return {
        "_type": STATEMENT_TYPE,
        "subject": [
            {"name": f"{p.address}/{p.version}.tar.gz", "digest": {"sha256": p.archive_sha256}},
            {"name": f"{p.address}/{p.version}", "digest": {"dirHash": p.dir_hash}},
        ],
        "predicateType": PREDICATE_TYPE,
        "predicate": {
            "buildDefinition": {
                "buildType": BUILD_TYPE,
                "externalParameters": {
                    "repository": p.repository,
                    "tag": p.tag,
                    "subdirectory": p.subdir,
                    "versionRule": {
                        "tagPrefix": p.tag_prefix,
                        "rule": "tag = tagPrefix + optional 'v' + semantic version",
                    },
                },
                "internalParameters": {"archiveScope": p.archive_scope},
                "resolvedDependencies": [
                    {
                        "uri": f"git+{p.repository}@refs/tags/{p.tag}",
                        "digest": {"gitCommit": p.commit, "gitTag": p.tag_sha},
                    }
                ],
            },
            "runDetails": {
                "builder": {"id": p.builder, "version": {"gitreg": __version__}},
                "metadata": {"startedOn": p.published_at, "finishedOn": p.published_at},
            },
        },
    }


def statement_bytes(p: Provenance) -> bytes:
    return json_bytes(statement(p))
