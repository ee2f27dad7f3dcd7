"""Tests for gitreg.archives.build: safe, deterministic module archives built from git objects.

Hostile trees are written with dulwich straight into a bare repository, which accepts names
and modes that `git` itself would refuse.
"""

from __future__ import annotations

import gzip
import io
import subprocess
import tarfile
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
from dulwich.errors import ObjectFormatException
from dulwich.objects import Blob, ObjectID, ShaFile, Tree
from dulwich.repo import Repo

from gitreg.archives.build import ArchiveLimits, ArchiveReport, build_archive
from gitreg.errors import ArchiveTooLarge

MTIME = 1_700_000_000
GITLINK = 0o160000
SYMLINK = 0o120000

# A spec maps a name to file content, to (mode, content), or to a nested spec (a directory).
# For a gitlink, the content is the commit sha it points to.
Spec = Mapping[bytes, "bytes | tuple[int, bytes] | Spec"]


@pytest.fixture
def repo(tmp_path: Path) -> Iterator[Repo]:
    r = Repo.init_bare(str(tmp_path / "module.git"), mkdir=True)
    yield r
    r.close()


def _store_tree(repo: Repo, spec: Spec) -> ObjectID:
    tree = Tree()
    for name, value in spec.items():
        if isinstance(value, Mapping):
            tree.add(name, 0o040000, _store_tree(repo, value))
            continue
        mode, content = value if isinstance(value, tuple) else (0o100644, value)
        if mode == GITLINK:
            tree.add(name, mode, ObjectID(content))
            continue
        blob = Blob.from_string(content)
        repo.object_store.add_object(blob)
        tree.add(name, mode, blob.id)
    repo.object_store.add_object(tree)
    return tree.id


def _build(
    repo: Repo, spec: Spec, limits: ArchiveLimits | None = None
) -> tuple[bytes, ArchiveReport]:
    out = io.BytesIO()
    tree_id = _store_tree(repo, spec)
    report = build_archive(
        repo.object_store, tree_id, out, mtime=MTIME, limits=limits or ArchiveLimits()
    )
    return out.getvalue(), report


def _members(data: bytes) -> dict[str, tarfile.TarInfo]:
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        return {m.name: m for m in tar.getmembers()}


def _names(data: bytes) -> list[str]:
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        return tar.getnames()


def _read(data: bytes, name: str) -> bytes:
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        f = tar.extractfile(name)
        assert f is not None
        return f.read()


MODULE: Spec = {
    b"main.tf": b'resource "null_resource" "x" {}\n',
    b"variables.tf": b'variable "name" {}\n',
    b"README.md": b"# module\n",
    b"modules": {
        b"common": {b"locals.tf": b"locals {}\n"},
        b"vpc": {b"main.tf": b"# vpc\n", b"common": (SYMLINK, b"../common")},
    },
    b"scripts": {b"run.sh": (0o100755, b"#!/bin/sh\necho hi\n")},
}


# --- determinism ---------------------------------------------------------------------------


def test_same_tree_builds_byte_identical_archives(repo: Repo) -> None:
    first, _ = _build(repo, MODULE)
    second, _ = _build(repo, MODULE)
    assert first == second


def test_identical_tree_in_another_repo_gives_same_bytes(repo: Repo, tmp_path: Path) -> None:
    first, _ = _build(repo, MODULE)
    reversed_spec = dict(reversed(list(MODULE.items())))
    other = Repo.init_bare(str(tmp_path / "other.git"), mkdir=True)
    try:
        second, _ = _build(other, reversed_spec)
    finally:
        other.close()
    assert first == second


def test_entries_are_sorted_by_full_path_bytes(repo: Repo) -> None:
    spec: Spec = {
        b"b.tf": b"",
        b"a-c": b"",
        b"a": {b"b": b"", b"Z": b""},
        b"B.tf": b"",
        b"a0": b"",
    }
    data, _ = _build(repo, spec)
    names = _names(data)
    assert names == ["B.tf", "a-c", "a/Z", "a/b", "a0", "b.tf"]
    assert [n.encode() for n in names] == sorted(n.encode() for n in names)


def test_no_directory_entries_are_written(repo: Repo) -> None:
    data, _ = _build(repo, MODULE)
    assert all(not m.isdir() for m in _members(data).values())
    assert "modules/common/locals.tf" in _members(data)


def test_every_entry_carries_the_commit_mtime(repo: Repo) -> None:
    data, _ = _build(repo, MODULE)
    assert {m.mtime for m in _members(data).values()} == {MTIME}


def test_gzip_header_has_zero_mtime_and_no_file_name(repo: Repo) -> None:
    data, _ = _build(repo, MODULE)
    assert data[:3] == b"\x1f\x8b\x08"
    assert data[3] & 0x08 == 0  # FNAME flag unset
    assert data[4:8] == b"\x00\x00\x00\x00"


def test_tar_is_pax_format(repo: Repo) -> None:
    long_name = "d" * 120 + ".tf"
    data, _ = _build(repo, {long_name.encode(): b"x", "ünïcode.tf".encode(): b"y"})
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(data)), mode="r:") as tar:
        assert tar.getnames() == [long_name, "ünïcode.tf"]
        assert all(m.pax_headers.get("path") for m in tar.getmembers())


def test_content_and_report_totals(repo: Repo) -> None:
    data, report = _build(repo, {b"a.tf": b"12345", b"b": {b"c.tf": b"678"}})
    assert _read(data, "a.tf") == b"12345"
    assert _read(data, "b/c.tf") == b"678"
    assert (report.files, report.total_bytes, report.skipped) == (2, 8, [])


# --- modes and owners ------------------------------------------------------------------------


def test_executable_file_gets_0755(repo: Repo) -> None:
    data, _ = _build(repo, MODULE)
    assert _members(data)["scripts/run.sh"].mode == 0o755


def test_regular_file_gets_0644(repo: Repo) -> None:
    data, _ = _build(repo, MODULE)
    assert _members(data)["main.tf"].mode == 0o644


def test_old_group_writable_mode_is_normalised_to_0644(repo: Repo) -> None:
    data, _ = _build(repo, {b"old.tf": (0o100664, b"x")})
    assert _members(data)["old.tf"].mode == 0o644


@pytest.mark.parametrize("mode", [0o104755, 0o102755, 0o101755, 0o107777])
def test_setuid_setgid_sticky_never_survive(repo: Repo, mode: int) -> None:
    data, _ = _build(repo, {b"evil": (mode, b"x")})
    assert _members(data)["evil"].mode == 0o644


def test_all_modes_are_0644_or_0755(repo: Repo) -> None:
    data, _ = _build(repo, MODULE)
    assert {m.mode for m in _members(data).values()} <= {0o644, 0o755}


def test_owner_is_root_without_user_names(repo: Repo) -> None:
    data, _ = _build(repo, MODULE)
    for m in _members(data).values():
        assert (m.uid, m.gid, m.uname, m.gname) == (0, 0, "", "")


def test_unsupported_mode_is_left_out_and_reported(repo: Repo) -> None:
    data, report = _build(repo, {b"dev": (0o020644, b""), b"ok.tf": b""})
    assert _names(data) == ["ok.tf"]
    assert report.skipped == ["dev: unsupported git mode 020644"]


# --- unsafe names ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        b"..",
        b".",
        b".git",
        b".GIT",
        b".Git.",
        b".git ",
        b".git. . ",
        b"git~1",
        b"GIT~1",
        b".git::$INDEX_ALLOCATION",
        ".git\u200c".encode(),
        "\u200d.g\u200eit\ufeff".encode(),
        ".\u202agit".encode(),
        b"a\\b",
        b"..\\..\\evil.tf",
        b"/etc/passwd",
        b"../../escape.tf",
        b"a\x01b",
        b"bell\x07",
        b"del\x7f",
        "nel\u0085".encode(),
    ],
)
def test_unsafe_file_name_is_left_out_and_reported(repo: Repo, name: bytes) -> None:
    data, report = _build(repo, {name: b"pwned", b"keep.tf": b"ok"})
    assert _names(data) == ["keep.tf"]
    assert len(report.skipped) == 1
    assert report.files == 1


def test_dotgit_directory_is_left_out_with_one_report_line(repo: Repo) -> None:
    spec: Spec = {
        b".git": {b"config": b"[core]\n", b"hooks": {b"post-checkout": (0o100755, b"evil")}},
        b"main.tf": b"",
    }
    data, report = _build(repo, spec)
    assert _names(data) == ["main.tf"]
    assert report.skipped == [
        ".git: '.git' (or a disguise of it) is never archived"
        " (directory and everything under it left out)"
    ]


def test_nested_dotgit_disguise_is_left_out(repo: Repo) -> None:
    spec: Spec = {b"modules": {b"x": {".GiT\u200f".encode(): {b"config": b""}, b"a.tf": b""}}}
    data, report = _build(repo, spec)
    assert _names(data) == ["modules/x/a.tf"]
    assert report.skipped[0].startswith("modules/x/.GiT\\u200f: ")


def test_dotdot_directory_is_left_out_entirely(repo: Repo) -> None:
    data, report = _build(repo, {b"..": {b"etc": {b"cron.tf": b""}}, b"main.tf": b""})
    assert _names(data) == ["main.tf"]
    assert len(report.skipped) == 1 and report.skipped[0].startswith("..: ")


@pytest.mark.parametrize(
    "name", [b".gitmodules", b".gitignore", b".github", b".gitattributes", b"git", b"my.git"]
)
def test_git_lookalikes_that_are_harmless_are_kept(repo: Repo, name: bytes) -> None:
    data, report = _build(repo, {name: b"x"})
    assert _names(data) == [name.decode()]
    assert report.skipped == []


def test_non_utf8_name_is_left_out_and_reported(repo: Repo) -> None:
    data, report = _build(repo, {b"caf\xe9.tf": b"", b"ok.tf": b""})
    assert _names(data) == ["ok.tf"]
    assert report.skipped == ["caf\\xe9.tf: name is not valid UTF-8"]


def test_nul_in_name_is_left_out_when_a_store_returns_it() -> None:
    # A NUL cannot survive git's tree encoding on disk (see the next test), but a store that
    # hands over parsed objects can carry one; the name check must still stop it.
    blob = Blob.from_string(b"x")
    tree = Tree()
    tree.add(b"evil\x00.tf", 0o100644, blob.id)
    tree.add(b"ok.tf", 0o100644, blob.id)
    store: dict[ObjectID, ShaFile] = {blob.id: blob, tree.id: tree}
    out = io.BytesIO()
    report = build_archive(store, tree.id, out, mtime=MTIME)
    assert _names(out.getvalue()) == ["ok.tf"]
    assert report.skipped == ["evil\\x00.tf: name contains NUL or a control character"]


def test_tree_with_nul_name_on_disk_fails_closed(repo: Repo) -> None:
    blob = Blob.from_string(b"x")
    repo.object_store.add_object(blob)
    tree = Tree()
    tree.add(b"evil\x00.tf", 0o100644, blob.id)
    repo.object_store.add_object(tree)
    with pytest.raises(ObjectFormatException):
        build_archive(repo.object_store, tree.id, io.BytesIO(), mtime=MTIME)


def test_file_entry_pointing_at_a_tree_is_left_out(repo: Repo) -> None:
    inner = _store_tree(repo, {b"x.tf": b""})
    tree = Tree()
    tree.add(b"confused.tf", 0o100644, inner)
    repo.object_store.add_object(tree)
    out = io.BytesIO()
    report = build_archive(repo.object_store, tree.id, out, mtime=MTIME)
    assert _names(out.getvalue()) == []
    assert report.skipped == ["confused.tf: file entry is not a blob"]


# --- symlinks ----------------------------------------------------------------------------------


def test_relative_symlink_inside_monorepo_is_kept(repo: Repo) -> None:
    data, report = _build(repo, MODULE)
    link = _members(data)["modules/vpc/common"]
    assert link.issym()
    assert link.linkname == "../common"
    assert link.size == 0
    assert report.skipped == []


def test_symlink_counts_as_a_file_but_not_as_bytes(repo: Repo) -> None:
    _, report = _build(repo, {b"a.tf": b"abc", b"l": (SYMLINK, b"a.tf")})
    assert (report.files, report.total_bytes) == (2, 3)


@pytest.mark.parametrize(
    "target",
    [
        b"../../../etc/passwd",
        b"/etc/passwd",
        b"../../..",
        b"..\\..\\..\\etc",
        b"ok\x00/../../..",
        b"",
        b"up/../../..",
        b"./../.././../x",
        b"../.git/config",
        ".GIT\u200c/hooks".encode(),
        b"caf\xe9",
    ],
)
def test_unsafe_symlink_is_left_out_and_reported(repo: Repo, target: bytes) -> None:
    spec: Spec = {b"modules": {b"vpc": {b"link": (SYMLINK, target), b"main.tf": b""}}}
    data, report = _build(repo, spec)
    assert _names(data) == ["modules/vpc/main.tf"]
    assert len(report.skipped) == 1
    assert report.skipped[0].startswith("modules/vpc/link: symlink to ")


def test_symlink_at_root_pointing_to_parent_is_left_out(repo: Repo) -> None:
    data, report = _build(repo, {b"up": (SYMLINK, b".."), b"main.tf": b""})
    assert _names(data) == ["main.tf"]
    assert report.skipped == ["up: symlink to '..' left out: target leaves the archive root"]


def test_symlink_chained_through_another_symlink_is_left_out(repo: Repo) -> None:
    # sub/up -> .. stays inside, but sub/esc -> up/../.. would climb through it to the
    # parent of the root although it normalises lexically to ".".
    spec: Spec = {b"sub": {b"up": (SYMLINK, b".."), b"esc": (SYMLINK, b"up/../..")}}
    data, report = _build(repo, spec)
    assert _names(data) == ["sub/up"]
    assert report.skipped == [
        "sub/esc: symlink to 'up/../..' left out: '..' after a name in the target"
    ]


def test_kept_archive_passes_pythons_data_extraction_filter(repo: Repo, tmp_path: Path) -> None:
    spec: Spec = {**MODULE, b"bad": (SYMLINK, b"../../etc/passwd"), b".git": {b"x": b""}}
    data, _ = _build(repo, spec)
    dest = tmp_path / "out"
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        tar.extractall(dest, filter="data")
    assert (dest / "modules/vpc/common/locals.tf").read_bytes() == b"locals {}\n"
    assert not (dest / "bad").exists()


# --- submodules --------------------------------------------------------------------------------


def test_submodule_is_left_out_and_reported(repo: Repo) -> None:
    spec: Spec = {b"vendor": {b"lib": (GITLINK, b"a" * 40)}, b"main.tf": b""}
    data, report = _build(repo, spec)
    assert _names(data) == ["main.tf"]
    assert report.skipped == ["vendor/lib: submodule (gitlink) not included"]


# --- limits --------------------------------------------------------------------------------------


def test_too_many_files_raises(repo: Repo) -> None:
    spec: Spec = {b"a.tf": b"", b"b.tf": b"", b"c.tf": b""}
    with pytest.raises(ArchiveTooLarge, match=r"max_files=2 .*'c\.tf'"):
        _build(repo, spec, ArchiveLimits(max_files=2))


def test_symlinks_count_towards_max_files(repo: Repo) -> None:
    spec: Spec = {b"a.tf": b"", b"l": (SYMLINK, b"a.tf")}
    with pytest.raises(ArchiveTooLarge, match=r"max_files=1 .*'l'"):
        _build(repo, spec, ArchiveLimits(max_files=1))


def test_file_over_max_file_bytes_raises(repo: Repo) -> None:
    with pytest.raises(ArchiveTooLarge, match=r"max_file_bytes=10 .*'big\.bin'.*11"):
        _build(repo, {b"big.bin": b"x" * 11}, ArchiveLimits(max_file_bytes=10))


def test_total_over_max_total_bytes_raises(repo: Repo) -> None:
    spec: Spec = {b"a": b"x" * 6, b"b": b"x" * 6}
    with pytest.raises(ArchiveTooLarge, match=r"max_total_bytes=10 .*'b'.*12"):
        _build(repo, spec, ArchiveLimits(max_total_bytes=10))


def test_path_over_max_path_length_raises(repo: Repo) -> None:
    spec: Spec = {b"dir": {b"x" * 10: b""}}
    with pytest.raises(ArchiveTooLarge, match=r"max_path_length=12 .*'dir/xxxxxxxxxx'"):
        _build(repo, spec, ArchiveLimits(max_path_length=12))


def test_symlink_target_over_max_path_length_raises(repo: Repo) -> None:
    spec: Spec = {b"l": (SYMLINK, b"a/" * 10)}
    with pytest.raises(ArchiveTooLarge, match=r"max_path_length=8 .*'l'"):
        _build(repo, spec, ArchiveLimits(max_path_length=8))


def test_values_exactly_at_each_limit_pass(repo: Repo) -> None:
    spec: Spec = {b"dir": {b"abcd": b"x" * 5, b"efgh": b"y" * 5}}
    limits = ArchiveLimits(
        max_total_bytes=10, max_files=2, max_file_bytes=5, max_path_length=len(b"dir/abcd")
    )
    _, report = _build(repo, spec, limits)
    assert (report.files, report.total_bytes) == (2, 10)


# --- Caller errors ---------------------------------------------------------------------------


def test_tree_id_that_is_not_a_tree_raises(repo: Repo) -> None:
    blob = Blob.from_string(b"not a tree")
    repo.object_store.add_object(blob)
    with pytest.raises(ValueError, match="is not a tree object"):
        build_archive(repo.object_store, blob.id, io.BytesIO(), mtime=MTIME)


def test_packed_repository_made_by_git_matches_git_ls_tree(tmp_path: Path) -> None:
    work = tmp_path / "work"
    (work / "modules" / "vpc").mkdir(parents=True)
    (work / "main.tf").write_text("# root\n")
    (work / "modules" / "vpc" / "main.tf").write_text("# vpc\n")
    (work / "run.sh").write_text("#!/bin/sh\n")
    (work / "run.sh").chmod(0o755)
    (work / "modules" / "vpc" / "root").symlink_to("../../main.tf")
    env = {"GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(tmp_path)}

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(work), *args], env=env, check=True, capture_output=True, text=True
        ).stdout

    git("init", "-q")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "x")
    git("gc", "-q")  # pack everything: the build must read packs, not just loose objects
    tree_id = git("rev-parse", "HEAD^{tree}").strip().encode()
    out = io.BytesIO()
    with Repo(str(work)) as r:
        build_archive(r.object_store, tree_id, out, mtime=MTIME)
    members = _members(out.getvalue())
    assert list(members) == git("ls-tree", "-r", "--name-only", "HEAD").split()
    assert members["run.sh"].mode == 0o755
    assert members["modules/vpc/root"].linkname == "../../main.tf"
