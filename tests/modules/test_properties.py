"""Property-based tests: arbitrary input never crashes parsing or breaks archives.

Hypothesis runs over address, version and tag parsing, the archive
builder (hostile names and modes: nothing escaping, no `.git`, reproducible),
and the HTTP endpoints (random paths never give a 5xx).
"""

from __future__ import annotations

import io
import posixpath
import tarfile
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from dulwich.object_store import MemoryObjectStore
from dulwich.objects import Blob, ObjectID, Tree
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from gitreg.addresses import check_subdir, parse_module_address
from gitreg.app import create_app
from gitreg.archives.build import ArchiveLimits, build_archive
from gitreg.errors import ArchiveTooLarge, BadRequest, NotAVersion
from gitreg.settings import load_settings
from gitreg.versions import version_from_tag

HOSTILE_NAMES = st.one_of(
    st.sampled_from(
        [
            b".git",
            b".GIT",
            b".Git.",
            b"git~1",
            b".git\xe2\x80\x8c",
            b"..",
            b".",
            b"a\\b",
            b"-rf",
            b"\xff\xfe",
            b"x\x01",
            b"con",
            b".git::$INDEX_ALLOCATION",
            b"ok.tf",
        ]
    ),
    st.binary(min_size=1, max_size=12).filter(lambda b: b"/" not in b and b"\x00" not in b),
)
MODES = st.sampled_from([0o100644, 0o100755, 0o100664, 0o104755, 0o120000, 0o160000, 0o040000])


@given(st.text(max_size=200))
def test_module_address_parsing_never_crashes(text: str) -> None:
    try:
        address = parse_module_address(text)
    except BadRequest:
        return
    assert str(address).count("/") == 2


@given(st.text(max_size=200))
def test_subdir_check_never_allows_escape(text: str) -> None:
    try:
        cleaned = check_subdir(text)
    except BadRequest:
        return
    assert ".." not in cleaned.split("/")
    assert not cleaned.startswith("/")


@given(st.text(max_size=100), st.sampled_from(["", "v", "vpc/", "x-"]))
def test_tag_parsing_never_crashes(tag: str, prefix: str) -> None:
    try:
        parsed = version_from_tag(tag, prefix)
    except NotAVersion:
        return
    assert tag.startswith(prefix)
    assert ".." not in tag and not tag.startswith("-")
    assert parsed.key == parsed.version.split("+")[0]


@st.composite
def trees(draw: st.DrawFn, depth: int = 0) -> tuple[MemoryObjectStore, bytes]:
    """A random tree of hostile names and modes, built straight into an object store."""
    store = draw(st.just(None)) or MemoryObjectStore()
    return store, _tree(draw, store, depth)


def _tree(draw: st.DrawFn, store: MemoryObjectStore, depth: int) -> ObjectID:
    tree = Tree()
    for name in draw(st.lists(HOSTILE_NAMES, min_size=1, max_size=5, unique=True)):
        mode = draw(MODES)
        if mode == 0o040000 and depth < 2:
            sha = _tree(draw, store, depth + 1)
        elif mode == 0o120000:
            target = draw(
                st.sampled_from(
                    [b"../../etc/passwd", b"/etc/passwd", b"ok.tf", b"..", b"sub/../../x", b"a"]
                )
            )
            blob = Blob.from_string(target)
            store.add_object(blob)
            sha = blob.id
        elif mode == 0o160000:
            sha = ObjectID(b"1" * 40)  # a submodule commit, not in this store
        else:
            if mode == 0o040000:
                mode = 0o100644
            blob = Blob.from_string(draw(st.binary(max_size=64)))
            store.add_object(blob)
            sha = blob.id
        tree.add(name, mode, sha)
    store.add_object(tree)
    return tree.id


def _build(store: MemoryObjectStore, tree_id: bytes) -> bytes:
    out = io.BytesIO()
    build_archive(
        store,
        tree_id,
        out,
        mtime=1_700_000_000,
        limits=ArchiveLimits(max_files=1000, max_total_bytes=1 << 20),
    )
    return out.getvalue()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trees())
def test_archives_of_hostile_trees_are_safe_and_reproducible(
    built: tuple[MemoryObjectStore, bytes],
) -> None:
    store, tree_id = built
    try:
        first = _build(store, tree_id)
    except ArchiveTooLarge:
        return
    assert first == _build(store, tree_id)
    with tarfile.open(fileobj=io.BytesIO(first), mode="r:gz") as tar:
        for member in tar.getmembers():
            parts = member.name.split("/")
            assert not member.name.startswith("/")
            assert ".." not in parts and "." not in parts
            assert all(p.lower().rstrip(". ") not in (".git", "git~1") for p in parts)
            assert "\\" not in member.name
            assert member.mode in (0o644, 0o755)
            assert member.uid == member.gid == 0
            assert member.isfile() or member.issym()
            if member.issym():
                joined = posixpath.normpath(
                    posixpath.join(posixpath.dirname(member.name), member.linkname)
                )
                assert not joined.startswith("..") and not member.linkname.startswith("/")


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    data_dir: Path = tmp_path_factory.mktemp("props") / "data"
    app = create_app(load_settings({"data_dir": data_dir}, environ={}))
    with TestClient(app, base_url="https://testserver") as test_client:
        yield test_client


# Percent-encoded so any code point (NUL, `/`, `..`, control characters) reaches the
# server's routing and handlers rather than being refused by the client.
SEGMENT = st.text(alphabet=st.characters(exclude_categories=["Cs"]), min_size=1, max_size=40).map(
    lambda s: quote(s, safe="")
)


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(SEGMENT, min_size=1, max_size=6), st.sampled_from(["GET", "HEAD", "POST"]))
def test_random_paths_never_give_a_server_error(
    client: TestClient, segments: list[str], method: str
) -> None:
    for prefix in ("/v1/modules/", "/archives/", "/"):
        answer = client.request(method, prefix + "/".join(segments))
        assert answer.status_code < 500, (prefix, segments, answer.text)
        if method != "HEAD" and answer.status_code >= 400:
            assert answer.json()["errors"]
