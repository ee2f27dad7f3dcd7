"""Provider zip packages: layout checks and the `zh:`/`h1:` lock-file hashes.

Layout (TERRAFORM-CLIENT.md, Providers): the executable sits at the top level,
named `terraform-provider-TYPE` optionally followed by `_...` (or `.exe`);
there are no directory entries and no path that leaves the unpack directory.
On Unix-like platforms the executable must carry an execute bit in the zip's
Unix mode (`create_system = 3`, `external_attr = 0o100755 << 16`): Go's unzip
restores modes from there, and an executable without one cannot be started.

Hashes: `zh:` is the hex sha256 of the zip; `h1:` is the base64 sha256 of one
line `"<sha256 hex>  <path>\\n"` per file, sorted by path (Terraform's dirhash
`Hash1`). Computing `h1:` means unpacking, so it runs under limits on entries,
declared and actually read bytes (a zip bomb aborts it). Entries
are counted before zipfile reads the central directory
(gitreg/archives/entries.py), whatever their kind.
"""

from __future__ import annotations

import base64
import hashlib
import re
import stat
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

from gitreg.archives.entries import open_zip
from gitreg.errors import ArchiveTooLarge, PackageError
from gitreg.providers.zipstream import StreamedMembers

CHUNK = 1024 * 1024
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_UNIX_CREATORS = (3, 19)  # Unix and macOS, whose external_attr carries a Unix mode


@dataclass(frozen=True)
class PackageLimits:
    max_package_bytes: int
    max_unpacked_bytes: int
    max_files: int


@dataclass(frozen=True)
class PackageInfo:
    sha256: str
    size: int
    h1: str
    executable: str
    files: tuple[str, ...]

    @property
    def zh(self) -> str:
        return f"zh:{self.sha256}"


def sha256_file(path: Path) -> tuple[str, int]:
    digest = hashlib.sha256()
    size = 0
    with path.open("rb") as source:
        while chunk := source.read(CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


def _path_problem(name: str) -> str | None:
    if not name:
        return "an entry with an empty name"
    if _CONTROL.search(name):
        return f"entry {name[:80]!r} has a control character in its name"
    if "\\" in name or name.startswith("/") or re.match(r"^[A-Za-z]:", name):
        return f"entry {name[:80]!r} is an absolute or Windows-style path"
    if name.endswith("/"):
        return f"entry {name[:80]!r} is a directory entry; Terraform packages have none"
    if any(part in ("", ".", "..") for part in name.split("/")):
        return f"entry {name[:80]!r} has an empty, '.' or '..' path part"
    return None


def _unix_mode(info: zipfile.ZipInfo) -> int:
    return (info.external_attr >> 16) & 0xFFFF


def _check_entries(infos: list[zipfile.ZipInfo], limits: PackageLimits) -> None:
    if not infos:
        raise PackageError("the zip is empty")
    if len(infos) > limits.max_files:
        raise PackageError(f"the zip has {len(infos)} entries; the limit is {limits.max_files}")
    seen: set[str] = set()
    declared = 0
    for info in infos:
        problem = _path_problem(info.filename)
        if problem:
            raise PackageError(f"unsafe zip: {problem}")
        if info.filename in seen:
            raise PackageError(f"unsafe zip: entry {info.filename[:80]!r} appears twice")
        seen.add(info.filename)
        if info.create_system in _UNIX_CREATORS and stat.S_ISLNK(_unix_mode(info)):
            raise PackageError(f"unsafe zip: entry {info.filename[:80]!r} is a symlink")
        if info.flag_bits & 0x1:
            raise PackageError(f"entry {info.filename[:80]!r} is encrypted")
        declared += info.file_size
    if declared > limits.max_unpacked_bytes:
        raise PackageError(
            f"the zip unpacks to {declared} bytes; the limit is {limits.max_unpacked_bytes}"
        )


def _find_executable(infos: list[zipfile.ZipInfo], type_: str, os_: str) -> str:
    pattern = re.compile(rf"^terraform-provider-{re.escape(type_)}(?:[_.][^/]*)?$")
    top = [i for i in infos if "/" not in i.filename and pattern.match(i.filename)]
    if not top:
        nested = [i.filename for i in infos if pattern.match(i.filename.rsplit("/", 1)[-1])]
        if nested:
            raise PackageError(
                f"the executable {nested[0][:120]!r} is inside a directory; Terraform"
                f" looks for terraform-provider-{type_}* at the top level of the zip"
            )
        raise PackageError(
            f"no executable named terraform-provider-{type_} (optionally followed by"
            " '_...') at the top level of the zip"
        )
    if len(top) > 1:
        names = ", ".join(sorted(i.filename for i in top))
        raise PackageError(f"several files could be the executable ({names}); keep one")
    executable = top[0]
    if os_ != "windows":
        mode = _unix_mode(executable)
        if executable.create_system not in _UNIX_CREATORS or not mode & 0o111:
            raise PackageError(
                f"{executable.filename} has no Unix execute permission in the zip; Terraform"
                " would unpack a file it cannot run (zip it on Unix or set"
                " external_attr = 0o100755 << 16)"
            )
    return executable.filename


def _h1(archive: zipfile.ZipFile, names: list[str], limits: PackageLimits) -> str:
    digests: dict[str, str] = {}
    total = 0
    for name in sorted(names):
        digest = hashlib.sha256()
        with archive.open(name) as member:
            while chunk := member.read(CHUNK):
                total += len(chunk)
                if total > limits.max_unpacked_bytes:
                    raise PackageError(
                        f"the zip unpacks to more than {limits.max_unpacked_bytes} bytes"
                        " (a zip bomb?); stopped"
                    )
                digest.update(chunk)
        digests[name] = digest.hexdigest()
    return _h1_of(digests)


def _h1_of(digests: dict[str, str]) -> str:
    """Terraform's dirhash Hash1 from each file's sha256 hex."""
    summary = hashlib.sha256()
    for name in sorted(digests):
        summary.update(f"{digests[name]}  {name}\n".encode())
    return "h1:" + base64.b64encode(summary.digest()).decode()


def inspect_package(
    path: Path,
    type_: str,
    os_: str,
    limits: PackageLimits,
    sha256: str | None = None,
    streamed: StreamedMembers | None = None,
) -> PackageInfo:
    """Check a package's layout and compute its hashes; raises PackageError.
    `sha256`: the file's, when the caller hashed it as it wrote a file only it
    holds (the mirror's blob writer), which saves a pass over the bytes.
    `streamed`: the member hashes taken while that file was written
    (gitreg/providers/zipstream.py); used for `h1:` only when they match the
    central directory exactly, after every check below, else the file is unzipped."""
    size = path.stat().st_size
    if size > limits.max_package_bytes:
        raise PackageError(f"{path.name} is {size} bytes; the limit is {limits.max_package_bytes}")
    if sha256 is None:
        sha256, size = sha256_file(path)
    try:
        with open_zip(path, limits.max_files) as archive:
            infos = archive.infolist()
            _check_entries(infos, limits)
            executable = _find_executable(infos, type_, os_)
            names = [i.filename for i in infos]
            digests = None if streamed is None else streamed.digests(infos)
            h1 = _h1(archive, names, limits) if digests is None else _h1_of(digests)
    except PackageError:
        raise
    except ArchiveTooLarge as exc:
        raise PackageError(str(exc)) from exc
    except (zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, EOFError, ValueError) as exc:
        raise PackageError(f"{path.name} is not a readable zip: {exc}") from exc
    except (NotImplementedError, RuntimeError) as exc:
        # Unsupported compression methods and encryption surface as these.
        raise PackageError(f"{path.name} cannot be unpacked: {exc}") from exc
    return PackageInfo(sha256, size, h1, executable, tuple(sorted(names)))
