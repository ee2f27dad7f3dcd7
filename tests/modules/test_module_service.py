"""`Modules`, the service behind the modules.v1 handlers and the `gitreg module`
commands: yanking, deprecating and the conflict list, on a real index."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gitreg.addresses import ModuleAddress, module_address
from gitreg.errors import BadRequest, NotFound
from gitreg.modules.service import versions_document
from gitreg.services import Services, build_services
from gitreg.settings import load_settings
from tests.support.gitrepo import GitRepo, simple_module

VPC = module_address("acme", "vpc", "aws")


@pytest.fixture
def svc(tmp_path: Path, make_repo: Callable[[str], GitRepo]) -> Iterator[Services]:
    services = build_services(load_settings({"data_dir": tmp_path / "data"}, environ={}))
    repo = make_repo("vpc")
    simple_module(repo)
    repo.commit()
    repo.tag("v1.0.0")
    repo.tag("v1.1.0")
    record = services.index.add_repo(str(repo.path), "acme/vpc")
    services.index.add_module(record.id, "acme", "vpc", "aws", "", "")
    services.publisher.sync_repo(record)
    yield services
    services.close()


def _listed(svc: Services, address: ModuleAddress = VPC) -> list[dict[str, object]]:
    document = versions_document(svc.index, address)
    assert document is not None
    [module] = document["modules"]
    return list(module["versions"])


def test_a_yank_hides_a_version_from_the_list_once(svc: Services) -> None:
    first = svc.modules.set_yanked(VPC, "v1.0.0", True)
    again = svc.modules.set_yanked(VPC, "1.0.0", True)
    assert (first.module, first.version, first.changed) == ("acme/vpc/aws", "1.0.0", True)
    assert again.changed is False
    assert _listed(svc) == [{"version": "1.1.0"}]
    assert svc.modules.set_yanked(VPC, "1.0.0", False).changed is True
    assert _listed(svc) == [{"version": "1.0.0"}, {"version": "1.1.0"}]


def test_a_yank_of_an_unknown_module_or_version_is_not_found(svc: Services) -> None:
    with pytest.raises(NotFound, match=r"has no version 9\.9\.9"):
        svc.modules.set_yanked(VPC, "9.9.9", True)
    with pytest.raises(NotFound, match="is not registered"):
        svc.modules.set_yanked(module_address("acme", "nope", "aws"), "1.0.0", True)
    with pytest.raises(BadRequest):
        svc.modules.set_yanked(VPC, "not-a-version", True)


def test_a_deprecation_is_listed_replaced_and_lifted(svc: Services) -> None:
    done = svc.modules.deprecate(VPC, "1.0.0", "  use 1.1.0  ", "https://example.com/x")
    assert (done.changed, done.updated) == (True, False)
    notice = {"reason": "use 1.1.0", "link": "https://example.com/x"}
    assert _listed(svc)[0] == {"version": "1.0.0", "deprecation": notice}
    assert (
        svc.modules.deprecate(VPC, "1.0.0", "use 1.1.0", "https://example.com/x").changed is False
    )
    replaced = svc.modules.deprecate(VPC, "1.0.0", "use 1.1.0 or later")
    assert (replaced.changed, replaced.updated) == (True, True)
    assert svc.modules.undeprecate(VPC, "1.0.0").changed is True
    assert svc.modules.undeprecate(VPC, "1.0.0").changed is False
    assert _listed(svc)[0] == {"version": "1.0.0"}


@pytest.mark.parametrize(
    ("reason", "link"),
    [("", ""), ("x" * 1001, ""), ("bad\x1b[31m", ""), ("ok", "javascript:alert(1)")],
    ids=["empty", "long", "control", "script-link"],
)
def test_a_deprecation_refuses_a_bad_reason_or_link(svc: Services, reason: str, link: str) -> None:
    with pytest.raises(BadRequest):
        svc.modules.deprecate(VPC, "1.0.0", reason, link)
    assert _listed(svc)[0] == {"version": "1.0.0"}


def test_conflicts_name_their_module(svc: Services) -> None:
    module = svc.index.find_module("acme", "vpc", "aws")
    assert module is not None
    svc.index.record_conflict(module.id, "1.0.0", "v1.0.0", "a" * 40, "b" * 40, "moved")
    [conflict] = svc.modules.conflicts()
    assert conflict.module == "acme/vpc/aws"
    assert (conflict.record.tag, conflict.record.reason) == ("v1.0.0", "moved")
