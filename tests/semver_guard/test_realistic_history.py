"""Ten versions of a realistic network module (nested objects, `optional()`
with defaults, submodules, a moved block), published from a real git
repository; the diff of every pair of them is what a reviewer reading the two
trees would say.

Each release changes its own subjects only, so what changed between any two
versions is exactly the union of the releases in between: the table below is
the reviewer's reading of each release, and every one of the 45 pairs is
checked against it."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator

import pytest

from gitreg.services import Services, build_services
from gitreg.settings import load_settings
from tests.support.gitrepo import GitRepo

VARIABLES = """
variable "name" {
  type        = string
  description = "Name prefix of every resource"
}

variable "cidr" {
  type = string
}

variable "subnets" {
  description = "Subnets by name"
  type = map(object({
    cidr   = string
    zone   = string
    public = optional(bool, false)
    tags   = optional(map(string), {})
  }))
}

variable "nat" {
  type = object({
    enabled = optional(bool, true)
    single  = optional(bool, false)
  })
  default = {}
}

variable "tags" {
  type    = map(string)
  default = {}
}
"""
MAIN = """
resource "aws_vpc" "this" {
  cidr_block = var.cidr
  tags       = merge(var.tags, { Name = var.name })
}

resource "aws_subnet" "this" {
  for_each   = var.subnets
  vpc_id     = aws_vpc.this.id
  cidr_block = each.value.cidr
}

module "nat" {
  source = "./modules/nat"
  count  = var.nat.enabled ? 1 : 0
  vpc_id = aws_vpc.this.id
}
"""
OUTPUTS = """
output "vpc_id" {
  value = aws_vpc.this.id
}

output "subnet_ids" {
  value = { for k, s in aws_subnet.this : k => s.id }
}
"""
VERSIONS_TF = """
terraform {
  required_version = ">= 1.3"
  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = "~> 5.0"
    }
  }
}
"""
NAT = """
variable "vpc_id" {
  type = string
}

resource "aws_nat_gateway" "this" {
  subnet_id = var.vpc_id
}

output "id" {
  value = aws_nat_gateway.this.id
}
"""
BASE = {
    "variables.tf": VARIABLES,
    "main.tf": MAIN,
    "outputs.tf": OUTPUTS,
    "versions.tf": VERSIONS_TF,
    "modules/nat/main.tf": NAT,
    "README.md": "# network\n",
}

Files = dict[str, str]
Summary = set[tuple[str, str, str, str]]  # kind, module, change, name


def _edit(name: str, old: str, new: str) -> Callable[[Files], Files]:
    def apply(files: Files) -> Files:
        assert old in files[name], (name, old)
        return {**files, name: files[name].replace(old, new, 1)}

    return apply


def _add(name: str, text: str) -> Callable[[Files], Files]:
    return lambda files: {**files, name: files.get(name, "") + text}


def _drop(prefix: str) -> Callable[[Files], Files]:
    return lambda files: {k: v for k, v in files.items() if not k.startswith(prefix)}


# (version, what the release does, the reviewer's reading of it)
RELEASES: list[tuple[str, list[Callable[[Files], Files]], Summary]] = [
    ("1.0.0", [], set()),
    (
        "1.1.0",
        [
            _add(
                "variables.tf", 'variable "enable_ipv6" {\n  type    = bool\n  default = false\n}\n'
            )
        ],
        {("additive", "", "added", "enable_ipv6")},
    ),
    (
        "1.2.0",
        [
            _edit(
                "variables.tf",
                "    tags   = optional(map(string), {})\n",
                "    tags   = optional(map(string), {})\n    ipv6_prefix = optional(number)\n",
            )
        ],
        {("additive", "", "type_widened", "subnets")},
    ),
    (
        "1.3.0",
        [
            _edit("main.tf", 'resource "aws_subnet" "this"', 'resource "aws_subnet" "private"'),
            _edit("outputs.tf", "aws_subnet.this :", "aws_subnet.private :"),
            _add("moved.tf", "moved {\n  from = aws_subnet.this\n  to   = aws_subnet.private\n}\n"),
        ],
        {("other", "", "moved", "aws_subnet.this")},
    ),
    (
        "1.4.0",
        [
            _add("outputs.tf", 'output "nat_ids" {\n  value = module.nat[*].id\n}\n'),
            _edit("versions.tf", '"~> 5.0"', '">= 5.0, < 7.0"'),
        ],
        {("additive", "", "added", "nat_ids"), ("additive", "", "widened", "aws")},
    ),
    (
        "1.5.0",
        [_add("modules/flow-logs/main.tf", 'variable "vpc_id" {\n  type = string\n}\n')],
        {("additive", "modules/flow-logs", "added", "modules/flow-logs")},
    ),
    (
        "1.6.0",
        [_edit("variables.tf", "single  = optional(bool, false)", "single  = bool")],
        {("breaking", "", "type_narrowed", "nat")},
    ),
    (
        "1.7.0",
        [
            _edit(
                "outputs.tf",
                'output "subnet_ids" {\n'
                "  value = { for k, s in aws_subnet.private : k => s.id }\n}\n",
                "",
            )
        ],
        {("breaking", "", "removed", "subnet_ids")},
    ),
    (
        "1.8.0",
        [
            _drop("modules/nat/"),
            _edit(
                "main.tf",
                'module "nat" {\n  source = "./modules/nat"',
                'module "nat" {\n  source = "git::https://example.com/nat.git"',
            ),
        ],
        {("breaking", "modules/nat", "removed", "modules/nat")},
    ),
    (
        "1.9.0",
        [
            _edit("variables.tf", '"Name prefix of every resource"', '"Prefix of every name"'),
            _edit(
                "variables.tf",
                "type    = map(string)\n  default = {}",
                'type    = map(string)\n  default = { team = "net" }',
            ),
        ],
        {("other", "", "description", "name"), ("other", "", "default", "tags")},
    ),
]


def _trees() -> list[Files]:
    trees, files = [], BASE
    for _, edits, _ in RELEASES:
        for edit in edits:
            files = edit(files)
        trees.append(files)
    return trees


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Services]:
    root = tmp_path_factory.mktemp("history")
    repo = GitRepo(root / "network")
    for (version, _, _), files in zip(RELEASES, _trees(), strict=True):
        for stale in repo.path.rglob("*.tf"):
            stale.unlink()
        for name, text in files.items():
            repo.write(name, text)
        repo.commit(version)
        repo.tag(f"v{version}")
    svc = build_services(load_settings({"data_dir": root / "data"}, environ={}))
    record = svc.index.add_repo(str(repo.path), "")
    svc.index.add_module(record.id, "acme", "network", "aws", "", "")
    svc.semver.set_policy("acme/network/aws", "warn")
    result = svc.publisher.sync_repo(record)
    assert len(result.published) == len(RELEASES)
    yield svc
    svc.close()


def _summary(svc: Services, old: str, new: str) -> Summary:
    found = svc.semver.changes(("acme", "network", "aws"), new, old)
    return {(c.kind, c.module, c.change, c.name) for c in found.changes}


PAIRS = list(itertools.combinations(range(len(RELEASES)), 2))


@pytest.mark.parametrize(
    ("older", "newer"), PAIRS, ids=[f"{RELEASES[a][0]}-{RELEASES[b][0]}" for a, b in PAIRS]
)
def test_every_pair_reads_as_a_reviewer_would(published: Services, older: int, newer: int) -> None:
    expected: Summary = set().union(*(RELEASES[i][2] for i in range(older + 1, newer + 1)))
    assert _summary(published, RELEASES[older][0], RELEASES[newer][0]) == expected


def test_the_releases_that_broke_callers_are_labelled(published: Services) -> None:
    module = published.index.find_module("acme", "network", "aws")
    assert module is not None
    labelled = published.semver.labels(module.id)
    assert sorted(labelled) == ["1.6.0", "1.7.0", "1.8.0"]
    assert all(text == "breaking change in a minor release" for text in labelled.values())
    checks = published.semver.checks(module.id)
    assert [checks[v].status for v in ("1.0.0", "1.1.0", "1.9.0")] == [
        "first",
        "compatible",
        "compatible",
    ]
    assert checks["1.9.0"].baseline == "1.8.0"


def test_the_nested_type_change_is_explained(published: Services) -> None:
    found = published.semver.changes(("acme", "network", "aws"), "1.6.0", None)
    (change,) = found.changes
    assert change.detail.endswith(".single: attribute made required")
    widened = published.semver.changes(("acme", "network", "aws"), "1.2.0", None)
    assert widened.changes[0].detail.endswith("[*].ipv6_prefix: optional attribute added")


def test_removed_things_reappear_as_added_going_back(published: Services) -> None:
    back = _summary(published, "1.9.0", "1.0.0")
    assert ("additive", "", "added", "subnet_ids") in back
    assert ("additive", "modules/nat", "added", "modules/nat") in back
    assert ("breaking", "", "removed", "nat_ids") in back
    assert ("breaking", "", "removed", "aws_subnet.private") in back  # no moved block back
    assert ("breaking", "", "narrowed", "aws") in back
